"""Failover from a warm standby against real ZooKeeper: the record says warm, the new controller's
context matches a full read, a cold standby (watch stream cut, or switched off) reads everything and
says why, and a candidate that resigns follows again."""

from __future__ import annotations

import socket
from collections.abc import Mapping
from typing import Any

import pytest
from kazoo.client import KazooClient

from controller_core.controller import Controller
from controller_core.model import BrokerRegistration, EndPoint, ReplicaAssignment
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from tests.support.controllers import Candidates, FakeBrokers
from tests.support.zk import wait_for


def _active_id(zk: KazooClient) -> int:
    return codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0]).broker_id


def _failovers(candidates: Candidates, cid: int) -> list[Mapping[str, Any]]:
    return [r for r in candidates.sinks[cid].records if r["kind"] == "failover"]


def _context_matches_zookeeper(controller: Controller, zk: KazooClient) -> None:
    """The context the failover loaded equals what a cold failover reads now (nothing changes meanwhile)."""
    store = ZkStore(zk)

    def check() -> dict[str, Any]:
        ctx = controller.ctx
        topics = store.get_all_topics()
        assignments = store.get_replica_assignments(topics)
        return {
            "brokers": (set(ctx.live_or_shutting_down_broker_ids), set(store.get_all_broker_registrations())),
            "topics": (set(ctx.all_topics), topics),
            "assignments": (
                {tp: a for tp, a in ctx.iter_assignments()},
                {(t, p): a for t, ta in assignments.items() for p, a in ta.partitions.items()},
            ),
            # Leader, epoch, ISR and znode version. Not the cached controller epoch: like Kafka's, an ISR
            # removal that finds the replica already gone caches its own epoch without a write.
            "leadership": (
                {tp: s.leader_and_isr for tp, s in ctx.partitions_leadership_info.items()},
                {tp: s.leader_and_isr for tp, s in store.get_partition_leadership(ctx.all_partitions()).items()},
            ),
        }

    out = controller.run_on_event_thread(check)
    for name, (mine, truth) in out.items():
        assert mine == truth, name


def _setup(zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates) -> None:
    for b in (1, 2, 3):
        fake_brokers.start(b)
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    store = ZkStore(zk)
    store.create_topic("orders", {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(12)})
    store.create_topic("audit", {0: [2, 3, 1], 1: [3, 1, 2]})
    wait_for(lambda: zk.exists(paths.partition_state_path(_tp("audit", 1))) is not None, what="states")
    wait_for(lambda: len(_failovers(candidates, 100)) == 1, what="first failover record")


def _tp(topic: str, partition: int) -> Any:
    from controller_core.model import TopicPartition

    return TopicPartition(topic, partition)


def test_a_warm_standby_takes_over_from_its_view(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    _setup(zk, fake_brokers, candidates)
    standby = candidates.start(101)
    assert standby.standby is not None
    wait_for(lambda: standby.standby is not None and standby.standby.is_warm, what="standby warm")
    status = standby.controller.status() if standby.controller else {}
    assert status["standby_warm"] == "1" and status["standby_state"] == "warm"
    fake_brokers.kill(3)  # a change the standby follows before it wins
    wait_for(lambda: 3 not in ZkStore(zk).get_all_broker_registrations(), what="broker 3 gone")
    candidates.stop(100)
    wait_for(lambda: bool(_failovers(candidates, 101)), what="standby's failover")
    record = _failovers(candidates, 101)[0]
    assert record["path"] == "warm", record
    # The kept context was swapped in: nothing loaded, no per-topic watches before the requests.
    assert "warm_context" in record["phases_ms"], record["phases_ms"]
    assert "partition_states" not in record["phases_ms"] and "assignments" not in record["phases_ms"]
    assert _active_id(zk) == 101
    assert standby.controller is not None
    _context_matches_zookeeper(standby.controller, zk)
    assert standby.controller.status()["last_failover_path"] == "warm"
    assert standby.controller.status()["standby_state"] == "paused"


def test_a_standby_whose_watch_stream_was_cut_never_takes_over_from_a_stale_view(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    _setup(zk, fake_brokers, candidates)
    standby = candidates.start(101)
    follower = standby.standby
    assert follower is not None and standby.client is not None
    wait_for(lambda: follower.is_warm, what="standby warm")
    reloads = follower.reloads
    # Cut the standby's connection (its persistent watches go with it), change the cluster, and let
    # it win at once: it either proves a reloaded view current or reads everything, never neither.
    standby.client._connection._socket.shutdown(socket.SHUT_RDWR)
    ZkStore(zk).create_topic("late", {0: [1, 2, 3]})
    fake_brokers.kill(2)
    candidates.stop(100)
    wait_for(lambda: bool(_failovers(candidates, 101)), what="standby's failover")
    record = _failovers(candidates, 101)[0]
    assert standby.controller is not None
    _context_matches_zookeeper(standby.controller, zk)
    if record["path"] == "cold":
        fallbacks = [r for r in candidates.sinks[101].records if r["kind"] == "standby_fallback"]
        assert fallbacks and fallbacks[0]["reason"] == record["standby"]
    else:
        assert follower.reloads > reloads, "warm after a cut connection only from a reloaded view"


def test_a_candidate_without_a_standby_fails_over_cold_and_a_resigned_one_follows_again(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    _setup(zk, fake_brokers, candidates)
    cold = candidates.start(101, warm_standby=False)
    candidates.stop(100)
    wait_for(lambda: bool(_failovers(candidates, 101)), what="failover")
    record = _failovers(candidates, 101)[0]
    assert record["path"] == "cold" and record["standby"] == "no standby"
    assert cold.controller is not None
    _context_matches_zookeeper(cold.controller, zk)
    # 100 comes back as a standby, 101 steps down: 100 follows, wins and takes over warm.
    back = candidates.start(100)
    assert back.standby is not None
    wait_for(lambda: back.standby is not None and back.standby.is_warm, what="standby warm again")
    candidates.stop(101)
    wait_for(lambda: len(_failovers(candidates, 100)) >= 1, what="failover of 100")
    assert _failovers(candidates, 100)[-1]["path"] == "warm"
    assert back.controller is not None
    _context_matches_zookeeper(back.controller, zk)


def test_topic_changes_made_while_a_standby_takes_over_are_handled(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm path arms the per-topic watches after its requests went out, relative to the zxid its
    context is current to: a partition addition, a topic creation and a deletion request made after the
    hand-over and before that arming are still handled (made inside that window, deterministically),
    and so is a broker's new registration (its watch is armed late too)."""
    _setup(zk, fake_brokers, candidates)
    standby = candidates.start(101)
    controller = standby.controller
    assert controller is not None
    wait_for(lambda: standby.standby is not None and standby.standby.is_warm, what="standby warm")
    arm = controller._arm_deferred_topic_watches
    made: list[str] = []

    def changes_then_arm() -> None:
        if controller._deferred_topic_watches is not None and not made:
            data, _ = zk.get(paths.topic_path("orders"))
            orders = codecs.decode_topic_assignment("orders", data, {})
            grown = dict(orders.partitions)
            for p in (12, 13):
                grown[p] = grown[0]
            zk.set(paths.topic_path("orders"), codecs.encode_topic_assignment(grown, orders.topic_id))
            ZkStore(zk).create_topic("fresh", {0: [1, 2, 3], 1: [2, 3, 1]})
            zk.create(f"{paths.DELETE_TOPICS_PATH}/audit", b"", makepath=True)
            moved = BrokerRegistration(1, (EndPoint("PLAINTEXT", "127.0.0.1", 2),))
            zk.set(paths.broker_id_path(1), codecs.encode_broker_registration(moved))
            made.append("done")
        arm()

    monkeypatch.setattr(controller, "_arm_deferred_topic_watches", changes_then_arm)
    candidates.stop(100)
    wait_for(lambda: bool(_failovers(candidates, 101)), what="standby's failover")
    assert _failovers(candidates, 101)[0]["path"] == "warm" and made
    added = (_tp("orders", 12), _tp("orders", 13), _tp("fresh", 0), _tp("fresh", 1))
    wait_for(lambda: all(zk.exists(paths.partition_state_path(tp)) is not None for tp in added), what="added led")

    def seen() -> tuple[int, bool, bool, int]:
        ctx = controller.ctx
        broker = ctx.live_or_shutting_down_broker(1)
        port = broker.endpoints[0].port if broker is not None else 0
        return (
            len(ctx.partitions_for_topic("orders")),
            "fresh" in ctx.all_topics,
            "audit" in ctx.topics_to_be_deleted,
            port,
        )

    wait_for(lambda: controller.run_on_event_thread(seen) == (14, True, True, 2), what="changes handled")
    # And a change after the failover reaches the controller through the watches armed late.
    data, _ = zk.get(paths.topic_path("fresh"))
    fresh = codecs.decode_topic_assignment("fresh", data, {})
    zk.set(
        paths.topic_path("fresh"),
        codecs.encode_topic_assignment({**fresh.partitions, 2: ReplicaAssignment.of([3, 1, 2])}, fresh.topic_id),
    )
    wait_for(lambda: zk.exists(paths.partition_state_path(_tp("fresh", 2))) is not None, what="fresh-2 led")
