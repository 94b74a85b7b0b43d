"""Broker registration in a real ZooKeeper: Kafka's JSON v5, czxid epochs, expiry, taken ids, SIGKILL."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from controller_core.broker.agent import BrokerAgent
from controller_core.broker.config import BrokerConfig
from controller_core.model import BrokerRegistration, EndPoint
from controller_core.zk import codecs, paths
from tests.support.broker_agents import Agents
from tests.support.zk import expire_session, wait_for

#: The killed brokers' ZooKeeper session (the agents' 4 s otherwise): what these tests wait out, and
#: 2 s proves the same (ZooKeeper's floor here is 1 s, tickTime 500 ms).
SHORT_SESSION = ("--zookeeper-session-timeout-ms", "2000")


def test_the_registration_is_kafkas_json_v5_and_the_epoch_its_czxid(zk: KazooClient, agents: Agents) -> None:
    agent = agents.start(4, "--rack", "rack-b")
    data, stat = zk.get(paths.broker_id_path(4))
    body = json.loads(data)
    assert body["version"] == 5
    assert body["endpoints"] == [f"PLAINTEXT://127.0.0.1:{agent.port}", f"CONTROL://127.0.0.1:{agent.port}"]
    assert (body["host"], body["port"], body["jmx_port"]) == ("127.0.0.1", agent.port, -1)
    assert body["rack"] == "rack-b"
    assert body["features"] == {}
    assert isinstance(body["timestamp"], str) and body["timestamp"].isdigit()
    assert body["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT", "CONTROL": "PLAINTEXT"}
    assert stat.ephemeralOwner != 0
    assert agent.epoch == stat.czxid
    assert agent.state(partitions="0")["epoch"] == stat.czxid
    decoded = codecs.decode_broker_registration(4, data, stat.czxid)
    assert decoded.endpoint("CONTROL") == EndPoint("CONTROL", "127.0.0.1", agent.port)


def test_a_broker_without_a_rack_registers_none(zk: KazooClient, agents: Agents) -> None:
    agents.start(5)
    assert "rack" not in json.loads(zk.get(paths.broker_id_path(5))[0])


def test_it_refuses_to_start_when_another_live_session_holds_its_id(zk: KazooClient, agents: Agents) -> None:
    squatter = BrokerRegistration(6, (EndPoint("PLAINTEXT", "10.0.0.9", 9092),))
    zk.create(paths.broker_id_path(6), codecs.encode_broker_registration(squatter), ephemeral=True, makepath=True)
    agent = agents.start(6, wait=False)
    assert agent.wait_exit(timeout=30) == 3
    assert "already registered by another session" in agent.log()
    assert json.loads(zk.get(paths.broker_id_path(6))[0])["host"] == "10.0.0.9"  # untouched


def test_it_registers_again_with_a_new_epoch_after_its_session_expires(
    zk_chroot: str, zk: KazooClient, tmp_path: Path
) -> None:
    agent = BrokerAgent(BrokerConfig(broker_id=7, zookeeper_connect=zk_chroot, zookeeper_session_timeout_ms=4000))
    agent.start()
    try:
        first = agent.replicas.broker_epoch
        assert zk.exists(paths.broker_id_path(7)).czxid == first
        assert agent.zk is not None
        expire_session(agent.zk, zk_chroot)
        wait_for(lambda: agent.replicas.broker_epoch not in (first,), timeout=20, what="re-registration")
        stat = zk.exists(paths.broker_id_path(7))
        assert stat is not None
        assert stat.czxid == agent.replicas.broker_epoch > first
        assert agent.registrar is not None and agent.registrar.registrations == 2
    finally:
        agent.shutdown(controlled=False)
    assert zk.exists(paths.broker_id_path(7)) is None


@pytest.mark.slow
def test_sigkill_leaves_the_registration_only_until_the_session_times_out(zk: KazooClient, agents: Agents) -> None:
    agent = agents.start(8, *SHORT_SESSION)
    agent.signal(signal.SIGKILL)
    agent.wait_exit(timeout=10)
    killed_at = time.monotonic()
    assert zk.exists(paths.broker_id_path(8)) is not None  # nobody deregistered it
    wait_for(lambda: zk.exists(paths.broker_id_path(8)) is None, timeout=20, what="session expiry")
    assert time.monotonic() - killed_at > 1.0  # it went with the session (2 s), not at once


@pytest.mark.slow
def test_a_restarted_broker_waits_for_its_killed_predecessors_session(zk: KazooClient, agents: Agents) -> None:
    first = agents.start(9, *SHORT_SESSION)
    first.signal(signal.SIGKILL)
    first.wait_exit(timeout=10)
    second = agents.start(9, "--registration-wait-s", "30")
    assert second.epoch > first.epoch
    assert zk.exists(paths.broker_id_path(9)).czxid == second.epoch


def test_sigterm_while_waiting_for_a_taken_id_stops_at_once(zk: KazooClient, agents: Agents) -> None:
    squatter = BrokerRegistration(10, (EndPoint("PLAINTEXT", "10.0.0.9", 9092),))
    zk.create(paths.broker_id_path(10), codecs.encode_broker_registration(squatter), ephemeral=True, makepath=True)
    agent = agents.start(10, "--registration-wait-s", "120", wait=False)
    wait_for(lambda: "waiting up to" in agent.log(), timeout=30, what="the agent to start waiting")
    agent.signal(signal.SIGTERM)
    assert agent.wait_exit(timeout=10) == 0
