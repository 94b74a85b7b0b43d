"""Replication throttles between real broker agents: set through Kafka's config znodes and change
notifications, a new replica copies at the set rate, a live change takes effect within seconds, and
the throttle stops applying once the replica is in the ISR."""

from __future__ import annotations

import time

from kazoo.client import KazooClient

from controller_core.broker.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from controller_core.model import TopicPartition
from controller_core.zk.store import ZkStore
from tests.integration import test_broker_harness as harness
from tests.integration.test_broker_harness import FakeController
from tests.integration.test_broker_replication import assign
from tests.support.broker_agents import AgentProcess, Agents
from tests.support.zk import wait_for

controller = harness.controller

TP = TopicPartition("orders", 0)
SIZE = 1000
RATE = 100_000  # bytes/s: 100 messages/s of 1000 bytes
TOLERANCE = 0.15


def _copy_rate(newcomer: AgentProcess, seconds: float) -> float:
    """Bytes/s the new replica copied, measured over ``seconds`` of its copy."""
    start_leo: int = newcomer.replica(TP)["log_end_offset"]
    start = time.monotonic()
    time.sleep(seconds)
    end_leo: int = newcomer.replica(TP)["log_end_offset"]
    end = time.monotonic()
    return (end_leo - start_leo) * SIZE / (end - start)


def _throttle(store: ZkStore, rate: int) -> None:
    store.alter_entity_config("brokers", "1", {LEADER_RATE: str(rate)})
    store.alter_entity_config("brokers", "3", {FOLLOWER_RATE: str(rate)})


def test_a_new_replica_copies_at_the_throttled_rate_and_a_live_change_takes_effect(
    agents: Agents, controller: FakeController, zk: KazooClient
) -> None:
    store = ZkStore(zk)
    leader = agents.start(1, "--produce-rate", "400", "--message-size", str(SIZE))
    assign([(leader, 1, 1, [1], [1])], [leader])
    newcomer = agents.start(3, "--message-size", str(SIZE))
    _throttle(store, RATE)
    store.alter_entity_config("topics", TP.topic, {LEADER_REPLICAS: "0:1", FOLLOWER_REPLICAS: "0:3"})
    for agent in (leader, newcomer):
        wait_for(
            lambda a=agent: a.state(partitions="0")["throttles"][
                "follower_replicas" if a is newcomer else "leader_replicas"
            ],  # type: ignore[misc]
            timeout=10,
            interval=0.1,
            what="the throttle picked up from /config/changes",
        )
    wait_for(lambda: leader.replica(TP)["log_end_offset"] >= 800, timeout=20, interval=0.1, what="a log to copy")
    assign([(leader, 1, 2, [1], [1, 3]), (newcomer, 1, 2, [1], [1, 3])], [leader], is_new=True)

    time.sleep(1.0)
    measured = _copy_rate(newcomer, 5.0)
    assert abs(measured - RATE) <= TOLERANCE * RATE, f"copied at {measured:.0f} B/s, throttle {RATE}"
    assert leader.replica(TP)["isr"] == [1]  # 400 messages/s produced, 100/s copied: still behind

    _throttle(store, 20 * RATE)  # raised live: it catches up and joins the ISR
    wait_for(lambda: (1, 3) in controller.proposed_isrs(TP), timeout=15, interval=0.1, what="the newcomer to join")
    state = newcomer.state(partitions="0")["throttles"]
    assert state["follower_rate"] == 20 * RATE and state["follower_replicas"] == {"orders": "0:3"}
    wait_for(lambda: leader.replica(TP)["isr"] == [1, 3], timeout=10, interval=0.1, what="the expansion committed")

    # In the ISR, a throttle (even a tiny one) no longer applies: the replica keeps up with 400 KB/s.
    _throttle(store, 1000)
    time.sleep(1.0)
    assert _copy_rate(newcomer, 3.0) > 300 * SIZE
    assert leader.replica(TP)["isr"] == [1, 3]


def test_lowering_the_throttle_live_slows_the_copy_within_seconds(
    agents: Agents, controller: FakeController, zk: KazooClient
) -> None:
    store = ZkStore(zk)
    leader = agents.start(1, "--produce-rate", "1000", "--message-size", str(SIZE))
    assign([(leader, 1, 1, [1], [1])], [leader])
    newcomer = agents.start(3, "--message-size", str(SIZE))
    store.alter_entity_config("brokers", "<default>", {LEADER_RATE: str(4 * RATE), FOLLOWER_RATE: str(4 * RATE)})
    store.alter_entity_config("topics", TP.topic, {LEADER_REPLICAS: "*", FOLLOWER_REPLICAS: "*"})
    wait_for(
        lambda: newcomer.state(partitions="0")["throttles"]["follower_rate"] == 4 * RATE,
        timeout=10,
        interval=0.1,
        what="the default entity's rate",
    )
    assign([(leader, 1, 2, [1], [1, 3]), (newcomer, 1, 2, [1], [1, 3])], [leader], is_new=True)
    time.sleep(1.0)
    fast = _copy_rate(newcomer, 3.0)
    assert abs(fast - 4 * RATE) <= TOLERANCE * 4 * RATE, fast
    changed = time.monotonic()
    store.alter_entity_config("brokers", "<default>", {LEADER_RATE: str(RATE), FOLLOWER_RATE: str(RATE)})
    wait_for(
        lambda: newcomer.state(partitions="0")["throttles"]["follower_rate"] == RATE,
        timeout=5,
        interval=0.05,
        what="the change",
    )
    assert time.monotonic() - changed < 3.0
    slow = _copy_rate(newcomer, 3.0)
    assert abs(slow - RATE) <= TOLERANCE * RATE, slow

    # Removed (both keys deleted, as kafka-reassign-partitions --verify does): unthrottled again.
    store.alter_entity_config("brokers", "<default>", {}, deletes=[LEADER_RATE, FOLLOWER_RATE])
    wait_for(
        lambda: newcomer.state(partitions="0")["throttles"]["follower_rate"] is None,
        timeout=5,
        interval=0.05,
        what="the removal",
    )
    assert _copy_rate(newcomer, 2.0) > 4 * RATE
