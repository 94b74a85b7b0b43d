"""Strict decoding on the real endpoints: a wrongly typed field is answered 400 naming it, nothing applied.

One case per message kind, each of which would have been *accepted* (and applied) by a coercing
decoder: on a real broker agent process (LeaderAndIsr, StopReplica, UpdateMetadata, follower fetch),
and on a real controller candidate with ZooKeeper (AlterIsr, ControlledShutdown). "Nothing applied"
is checked on what each side exposes: the broker's state view, and every znode of the cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from http import HTTPStatus
from typing import Any

import pytest
from kazoo.client import KazooClient

from controller_core.channel_manager import ControllerChannelManager
from controller_core.model import BrokerRegistration, EndPoint, TopicPartition
from controller_core.protocol.client import HttpStatusError, JsonConnection, split_url
from controller_core.protocol.messages import (
    ALTER_ISR_PATH,
    CONTROLLED_SHUTDOWN_PATH,
    FETCH_PATH,
    LEADER_AND_ISR_PATH,
    STOP_REPLICA_PATH,
    UPDATE_METADATA_PATH,
    ErrorCode,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    StopReplicaRequest,
    StopReplicaResponse,
)
from controller_core.protocol.server import JsonHttpServer
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from tests.integration.test_broker_harness import leader_and_isr, partition_state
from tests.support.broker_agents import AgentProcess, Agents
from tests.support.controllers import Candidates, FakeBrokers
from tests.support.snapshots import zk_tree
from tests.support.zk import wait_for

TP = TopicPartition("orders", 0)


def refused(port: int, path: str, body: dict[str, Any]) -> str:
    """POST ``body``; it must be answered 400. Returns the error message."""
    conn = JsonConnection("127.0.0.1", port, timeout=10.0)
    try:
        with pytest.raises(HttpStatusError) as answer:
            conn.post(path, json.dumps(body).encode())
    finally:
        conn.close()
    assert answer.value.status == HTTPStatus.BAD_REQUEST
    return answer.value.message


# -- the broker agent ---------------------------------------------------------------------------------


@pytest.fixture
def broker(agents: Agents) -> AgentProcess:
    """Broker 1 leads orders-0 (replicas 1 and 2, ISR 1) at leader epoch 2 for controller epoch 5."""
    agent = agents.start(1)
    lead = leader_and_isr(agent, [partition_state(TP, 1, 2, [1], [1, 2])], [agent], controller_epoch=5)
    response = agent.send(lead)
    assert isinstance(response, LeaderAndIsrResponse) and response.error_code == ErrorCode.NONE
    return agent


def observable(agent: AgentProcess) -> dict[str, Any]:
    """What a control request or a fetch could change (time-dependent figures left out)."""
    state = agent.state()
    return {
        "controller_id": state["controller_id"],
        "controller_epoch": state["controller_epoch"],
        "counts": state["counts"],
        "requests_handled": state["requests_handled"],
        "requests_rejected": state["requests_rejected"],
        "metadata": state["metadata"],
        "replicas": [
            {
                key: replica[key]
                for key in (
                    "partition",
                    "role",
                    "leader",
                    "leader_epoch",
                    "controller_epoch",
                    "zk_version",
                    "replicas",
                    "isr",
                    "pending_isr",
                    "log_end_offset",
                )
            }
            | {"followers": [(f["broker_id"], f["log_end_offset"]) for f in replica.get("followers", [])]}
            for replica in state["replicas"]
        ],
    }


def lai_body(agent: AgentProcess, **state_fields: Any) -> dict[str, Any]:
    state = {
        "topic": "orders",
        "partition": 0,
        "controller_epoch": 6,
        "leader": 2,
        "leader_epoch": 3,
        "isr": [1, 2],
        "zk_version": 1,
        "replicas": [1, 2],
    }
    state.update(state_fields)
    return {
        "kind": "LeaderAndIsr",
        "controller_id": 100,
        "controller_epoch": 6,
        "broker_epoch": agent.epoch,
        "partition_states": [state],
        "live_leaders": [{"id": 2, "host": "127.0.0.1", "port": 1}],
    }


def test_leader_and_isr_with_a_fractional_leader_epoch_is_refused(broker: AgentProcess) -> None:
    before = observable(broker)
    message = refused(broker.port, LEADER_AND_ISR_PATH, lai_body(broker, leader_epoch=4.9))
    assert message == "LeaderAndIsr request: Expected `int`, got `float` - at `$.partition_states[0].leader_epoch`"
    message = refused(broker.port, LEADER_AND_ISR_PATH, lai_body(broker, partition="0"))
    assert message.endswith("at `$.partition_states[0].partition`")
    assert observable(broker) == before
    assert broker.replica(TP)["role"] == "leader"


def test_stop_replica_with_delete_partition_as_a_string_is_refused_and_the_log_kept(broker: AgentProcess) -> None:
    before = observable(broker)
    stop = {
        "kind": "StopReplica",
        "controller_id": 100,
        "controller_epoch": 6,
        "broker_epoch": broker.epoch,
        "partitions": [{"topic": "orders", "partition": 0, "leader_epoch": 3, "delete_partition": "false"}],
    }
    message = refused(broker.port, STOP_REPLICA_PATH, stop)
    assert message == "StopReplica request: Expected `bool`, got `str` - at `$.partitions[0].delete_partition`"
    assert observable(broker) == before
    assert broker.replica(TP)["role"] == "leader"


def test_update_metadata_with_a_port_as_a_string_is_refused(broker: AgentProcess) -> None:
    before = observable(broker)
    update = {
        "kind": "UpdateMetadata",
        "controller_id": 100,
        "controller_epoch": 6,
        "broker_epoch": broker.epoch,
        "partition_states": [
            {
                "topic": "orders",
                "partition": 0,
                "controller_epoch": 6,
                "leader": 1,
                "leader_epoch": 2,
                "isr": [1],
                "zk_version": 0,
                "replicas": [1],
            }
        ],
        "live_brokers": [{"id": 1, "endpoints": [{"host": "127.0.0.1", "port": "9092", "listener": "PLAINTEXT"}]}],
    }
    message = refused(broker.port, UPDATE_METADATA_PATH, update)
    assert message.endswith("at `$.live_brokers[0].endpoints[0].port`")
    assert observable(broker) == before
    assert before["metadata"]["partition_count"] == 0


def test_an_unknown_kind_is_refused(broker: AgentProcess) -> None:
    before = observable(broker)
    body = lai_body(broker)
    body["kind"] = "Fetch"
    assert (
        refused(broker.port, LEADER_AND_ISR_PATH, body) == "LeaderAndIsr request: Invalid value 'Fetch' - at `$.kind`"
    )
    assert observable(broker) == before


def test_a_fetch_with_an_offset_as_a_string_is_refused(broker: AgentProcess) -> None:
    before = observable(broker)
    fetch = {
        "replica_id": 2,
        "max_bytes": 1000,
        "partitions": [{"topic": "orders", "partition": 0, "fetch_offset": "5", "leader_epoch": 2}],
    }
    assert refused(broker.port, FETCH_PATH, fetch).endswith("at `$.partitions[0].fetch_offset`")
    assert observable(broker) == before


# -- the controller ------------------------------------------------------------------------------------


@pytest.fixture
def controller(zk: KazooClient, zk_chroot: str) -> Iterator[tuple[int, dict[int, int]]]:
    """A real controller candidate leading orders = {0: [1, 2]} with brokers 1 and 2; its API port."""
    brokers = FakeBrokers(zk_chroot)
    candidates = Candidates(zk_chroot)
    try:
        epochs = {b: brokers.start(b) for b in (1, 2)}
        ZkStore(zk).create_topic("orders", {0: [1, 2]})
        runner = candidates.start(100)

        def online() -> bool:
            if zk.exists(paths.partition_state_path(TP)) is None:
                return False
            data, _ = zk.get(paths.partition_state_path(TP))
            return codecs.decode_partition_state(data, 0).leader_and_isr.leader == 1

        wait_for(online, timeout=30, what="orders-0 online")
        assert runner.api is not None
        yield split_url(runner.api.url)[1], epochs
    finally:
        candidates.stop_all()
        brokers.stop_all()


def test_alter_isr_with_a_version_as_a_string_is_refused_and_zookeeper_unchanged(
    zk: KazooClient, controller: tuple[int, dict[int, int]]
) -> None:
    port, epochs = controller
    before = zk_tree(zk)
    alter = {
        "broker_id": 1,
        "broker_epoch": epochs[1],
        "partitions": [
            {"topic": "orders", "partition": 0, "leader_epoch": 0, "new_isr": [1], "current_isr_version": "0"}
        ],
    }
    message = refused(port, ALTER_ISR_PATH, alter)
    assert message == "AlterIsr request: Expected `int`, got `str` - at `$.partitions[0].current_isr_version`"
    assert zk_tree(zk) == before


def test_controlled_shutdown_with_a_broker_epoch_as_a_float_is_refused_and_zookeeper_unchanged(
    zk: KazooClient, controller: tuple[int, dict[int, int]]
) -> None:
    port, epochs = controller
    before = zk_tree(zk)
    message = refused(port, CONTROLLED_SHUTDOWN_PATH, {"broker_id": 1, "broker_epoch": float(epochs[1])})
    assert message == "ControlledShutdown request: Expected `int`, got `float` - at `$.broker_epoch`"
    assert zk_tree(zk) == before


# -- the broker's answers, as the controller's channel decodes them ---------------------------------------


@pytest.mark.parametrize(
    ("path", "request_", "answer"),
    [
        (
            LEADER_AND_ISR_PATH,
            LeaderAndIsrRequest(100, 1, 1, [partition_state(TP, 1, 0, [1], [1])], []),
            b'{"kind":"LeaderAndIsr","error_code":0,"partition_errors":[{"topic":"orders","partition":"0","error_code":0}]}',
        ),
        (
            STOP_REPLICA_PATH,
            StopReplicaRequest(100, 1, 1, []),
            b'{"kind":"LeaderAndIsr","error_code":0,"partition_errors":[]}',
        ),
    ],
)
def test_a_wrongly_typed_answer_reaches_the_controller_as_unknown_server_error(
    path: str, request_: LeaderAndIsrRequest | StopReplicaRequest, answer: bytes
) -> None:
    """An answer is decoded as the response to the request sent: nothing in it is taken at face value."""
    server = JsonHttpServer("127.0.0.1", 0, post={path: lambda body: answer}, name="odd-broker")
    server.start()
    channels = ControllerChannelManager(request_timeout_s=5.0)
    received: list[object] = []
    try:
        channels.add_broker(BrokerRegistration(1, (EndPoint("CONTROL", "127.0.0.1", server.port),)))
        channels.send(1, request_, received.append)
        wait_for(lambda: len(received) == 1, timeout=10, what="the answer")
    finally:
        channels.shutdown()
        server.close()
    (response,) = received
    assert isinstance(response, LeaderAndIsrResponse | StopReplicaResponse)
    assert type(response).kind == request_.kind
    assert response.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
    expected = [TP] if isinstance(request_, LeaderAndIsrRequest) else []
    assert response.errors_by_partition() == dict.fromkeys(expected, ErrorCode.UNKNOWN_SERVER_ERROR)
