"""The controller against real ZooKeeper, with broker registrations written as brokers write them.

These tests drive the controller through ZooKeeper only (registrations, topic znodes, admin
znodes) and assert what it writes back: the state znodes (leader, ISR, leader epoch, controller
epoch), the epoch fencing, and the emitted state changes. Requests to brokers go nowhere here
(no broker serves them); the broker-agent tests cover that side.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from kazoo.client import KazooClient

from controller_core.broker.controller_client import ControllerClient
from controller_core.channel_manager import ControllerChannelManager
from controller_core.model import LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.protocol.messages import AlterIsrPartition, AlterIsrPartitionResult, AlterIsrRequest, ErrorCode
from controller_core.runner import ControllerRunner
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from tests.support.controllers import Candidates, FakeBrokers
from tests.support.zk import expire_session, wait_for


def state(zk: KazooClient, topic: str, partition: int) -> tuple[int, int, list[int], int]:
    data, _ = zk.get(paths.partition_state_path(TopicPartition(topic, partition)))
    decoded = codecs.decode_partition_state(data, 0)
    lai = decoded.leader_and_isr
    return lai.leader, lai.leader_epoch, list(lai.isr), decoded.controller_epoch


def controller_epoch(zk: KazooClient) -> int:
    return int(zk.get(paths.CONTROLLER_EPOCH_PATH)[0])


def test_first_controller_gets_epoch_1_and_elects_leaders_for_a_new_topic(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    for b in (1, 2, 3):
        fake_brokers.start(b)
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    assert controller_epoch(zk) == 1
    info = codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0])
    assert info.broker_id == 100
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
    wait_for(lambda: zk.exists(paths.partition_state_path(TopicPartition("orders", 2))) is not None, what="states")
    assert state(zk, "orders", 0) == (1, 0, [1, 2, 3], 1)
    assert state(zk, "orders", 1) == (2, 0, [2, 3, 1], 1)
    # The topic may be created while the failover is still running: its record comes at the end.
    wait_for(lambda: any(r["kind"] == "failover" for r in candidates.sinks[100].records), what="failover record")


def test_broker_failure_moves_leadership_and_shrinks_the_isr(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    for b in (1, 2, 3):
        fake_brokers.start(b)
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1]})
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.partition_state_path(TopicPartition("orders", 1))) is not None)
    fake_brokers.kill(1)
    wait_for(lambda: state(zk, "orders", 0)[0] == 2, what="orders-0 led by 2")
    leader, epoch, isr, cepoch = state(zk, "orders", 0)
    assert (leader, isr, cepoch) == (2, [2, 3], 1)
    assert epoch == 1
    # orders-1 kept its leader; broker 1 left its ISR with one epoch bump.
    wait_for(lambda: state(zk, "orders", 1)[2] == [2, 3], what="orders-1 ISR shrinks")
    assert state(zk, "orders", 1)[:2] == (2, 1)

    # The event's records are built once its effects are out (the deferred log): after the writes seen above.
    def offline_election_recorded() -> bool:
        wanted = ("election", "orders-0", "offline", 2)
        return any(
            (r["kind"], r.get("entity"), r.get("strategy"), r.get("leader_after")) == wanted
            for r in candidates.sinks[100].records
        )

    wait_for(offline_election_recorded, what="the offline election's record")
    # The record of the death carries the estimated loss of its session: noticed minus the timeout.
    [death] = [r for r in candidates.sinks[100].records if r["kind"] == "broker_change" and r["dead_brokers"] == [1]]
    assert death["session_lost_brokers"] == [1] and death["session_lost_estimated"] is True
    assert death["session_lost_ms"] == pytest.approx(death["ts"] - 18_000.0, abs=50.0)


def test_an_alter_isr_adding_a_dead_broker_is_refused_and_writes_nothing(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates, request: pytest.FixtureRequest
) -> None:
    """KIP-841 (KAFKA-14140): a leader may still see a follower fetch after the controller took it out
    (a broker in controlled shutdown follows what it led until it exits). Accepted, a dead broker
    would stay in the ISR of a quiet partition for ever: nothing else removes it."""
    epochs = {b: fake_brokers.start(b) for b in (1, 2)}
    ZkStore(zk).create_topic("orders", {0: [1, 2]})
    candidates.start(100)
    path = paths.partition_state_path(TopicPartition("orders", 0))
    wait_for(lambda: zk.exists(path) is not None, what="state")
    fake_brokers.kill(2)
    wait_for(lambda: state(zk, "orders", 0)[2] == [1], what="broker 2 leaves the ISR")
    client = ControllerClient(zk, timeout_s=10.0)
    request.addfinalizer(client.close)
    client.start()
    wait_for(lambda: client.controller_id == 100, what="controller known")
    leader_epoch = state(zk, "orders", 0)[1]
    version = zk.get(path)[1].version

    def propose() -> AlterIsrPartitionResult:
        proposal = AlterIsrPartition("orders", 0, leader_epoch, (1, 2), version)
        response = client.alter_isr(AlterIsrRequest(1, epochs[1], (proposal,)))
        assert response.error_code == ErrorCode.NONE
        [result] = response.partitions
        return result

    assert propose().error_code == ErrorCode.INELIGIBLE_REPLICA
    assert zk.get(path)[1].version == version and state(zk, "orders", 0)[2] == [1]

    # Back and live, broker 2 may join again: the same proposal is accepted once the controller knows.
    fake_brokers.start(2)
    answers: list[AlterIsrPartitionResult] = []

    def accepted() -> bool:
        answers.append(propose())
        return answers[-1].error_code == ErrorCode.NONE

    wait_for(accepted, what="the proposal accepted")
    assert state(zk, "orders", 0)[:3] == (1, leader_epoch, [1, 2]) and answers[-1].zk_version == version + 1


def test_no_live_isr_member_leaves_the_partition_offline_unless_unclean_is_enabled(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    for b in (1, 2):
        fake_brokers.start(b)
    store = ZkStore(zk)
    store.create_topic("clean", {0: [1, 2]})
    store.create_topic("dirty", {0: [1, 2]}, config={"unclean.leader.election.enable": "true"})
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.partition_state_path(TopicPartition("dirty", 0))) is not None)
    fake_brokers.kill(2)  # ISR shrinks to [1]
    wait_for(lambda: state(zk, "clean", 0)[2] == [1] and state(zk, "dirty", 0)[2] == [1], what="ISR [1]")
    fake_brokers.kill(1)  # the last ISR member dies: leader -1, ISR kept
    wait_for(lambda: state(zk, "clean", 0)[0] == -1, what="clean partition leaderless")
    assert state(zk, "clean", 0)[2] == [1]
    fake_brokers.start(2)  # only an out-of-sync replica comes back
    wait_for(lambda: state(zk, "dirty", 0)[0] == 2, what="unclean election of broker 2")
    assert state(zk, "dirty", 0)[2] == [2]
    assert state(zk, "clean", 0)[0] == -1  # clean topic stays offline


def test_standby_takes_over_with_the_next_epoch_when_the_active_one_stops(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    fake_brokers.start(1)
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None)
    candidates.start(101)
    assert codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0]).broker_id == 100
    candidates.stop(100)
    wait_for(
        lambda: (
            zk.exists(paths.CONTROLLER_PATH) is not None
            and codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0]).broker_id == 101
        ),
        what="standby elected",
    )
    assert controller_epoch(zk) == 2


def test_the_controller_znode_names_the_candidate_and_its_api_endpoint(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    fake_brokers.start(1)
    active = candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    candidates.start(101)
    assert active.api is not None
    info = codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0])
    assert info.broker_id == 100 and info.extra == {"endpoint": active.api.url}
    assert candidates.runners[101].controller is not None
    assert candidates.runners[101].controller.run_on_event_thread(lambda: controller_epoch(zk)) == 1  # lost, no bump


def test_a_controller_move_deletes_only_our_own_controller_znode_fenced_by_our_epoch(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    """Kafka's ``triggerControllerMove`` (on an election error or an illegal state), on the real path."""
    fake_brokers.start(1)
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    candidates.start(101)
    standby = candidates.runners[101].controller
    assert standby is not None

    # A standby asked to move the controller leaves the active one's /controller alone.
    standby.run_on_event_thread(standby._trigger_controller_move)
    assert codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0]).broker_id == 100
    assert controller_epoch(zk) == 1

    # The active one deletes its /controller (fenced by epoch 1's version): the watch re-elects.
    active = candidates.runners[100].controller
    assert active is not None
    active.run_on_event_thread(active._trigger_controller_move)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None and controller_epoch(zk) == 2, what="re-election")

    # Once another controller moved the epoch, the fenced delete fails and /controller stays.
    winner = codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0]).broker_id
    now_active = candidates.runners[winner].controller
    assert now_active is not None
    assert now_active.run_on_event_thread(lambda: now_active.ctx.epoch_zk_version) == 2
    zk.set(paths.CONTROLLER_EPOCH_PATH, b"9")
    before = zk.get(paths.CONTROLLER_PATH)
    now_active.run_on_event_thread(now_active._trigger_controller_move)
    after = zk.get(paths.CONTROLLER_PATH)
    assert after[0] == before[0] and after[1].czxid == before[1].czxid


def test_a_controller_whose_session_expires_resigns_and_cannot_write(
    zk: KazooClient, zk_chroot: str, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    fake_brokers.start(1)
    fake_brokers.start(2)
    ZkStore(zk).create_topic("orders", {0: [1, 2]})
    first = candidates.start(100)
    wait_for(lambda: zk.exists(paths.partition_state_path(TopicPartition("orders", 0))) is not None)
    candidates.start(101)
    assert first.client is not None and first.controller is not None
    old = first.controller
    expire_session(first.client, zk_chroot)
    wait_for(
        lambda: (
            codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0]).broker_id in (100, 101)
            and controller_epoch(zk) == 2
        ),
        timeout=20,
        what="re-election after expiry",
    )
    # Whoever won epoch 2, a write fenced with epoch 1's zk version fails and changes nothing.
    from controller_core.errors import ControllerMovedError
    from controller_core.model import LeaderAndIsr

    before = zk.get(paths.partition_state_path(TopicPartition("orders", 0)))
    with pytest.raises(ControllerMovedError):
        ZkStore(zk).update_leader_and_isr(
            {TopicPartition("orders", 0): LeaderAndIsr(2, 9, (2,), before[1].version)}, 1, 1
        )
    assert zk.get(paths.partition_state_path(TopicPartition("orders", 0)))[0] == before[0]
    # The old controller stopped acting when its connection dropped; it resigns once kazoo reports the
    # expiry, which may come after a warm standby has already taken over (tens of milliseconds).
    wait_for(lambda: old.ctx.epoch in (0, 2), what="the expired controller resigned (epoch reset, or re-elected)")


def test_isr_changes_a_leader_writes_itself_are_recorded_from_the_notification(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    """Pre-AlterIsr leaders write their ISR and leave an isr_change notification (Kafka's protocol)."""
    for b in (1, 2, 3):
        fake_brokers.start(b)
    tp = TopicPartition("orders", 0)
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3]})
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.partition_state_path(tp)) is not None, what="state created")
    data, stat = zk.get(paths.partition_state_path(tp))
    current = codecs.decode_partition_state(data, stat.version)
    shrunk = current.leader_and_isr.new_leader_and_isr(1, (1, 2))
    # As the leader (broker 1) does: a conditional write of its own ISR, then the notification.
    zk.set(
        paths.partition_state_path(tp),
        codecs.encode_partition_state(LeaderIsrAndControllerEpoch(shrunk, 1)),
        stat.version,
    )
    ZkStore(zk).create_isr_change_notification([tp])

    def recorded() -> list[Mapping[str, Any]]:
        sink = candidates.sinks[100]
        return [r for r in sink.records if r["kind"] == "isr_change" and r["entity"] == "orders-0"]

    wait_for(lambda: bool(recorded()), what="isr_change record")
    (record,) = recorded()
    assert (record["isr_before"], record["isr_after"]) == ((1, 2, 3), (1, 2))
    assert (record["leader_before"], record["leader_after"]) == (1, 1)
    wait_for(lambda: not zk.get_children(paths.ISR_CHANGE_NOTIFICATION_PATH), what="notification consumed")


def test_the_configured_request_timeout_reaches_the_broker_channels(candidates: Candidates) -> None:
    """``request_timeout_s`` (Kafka's controller.socket.timeout.ms) is what each delivery attempt waits."""
    runner = candidates.start(100, request_timeout_s=7.0)
    wait_for(lambda: any(r["kind"] == "failover" for r in candidates.sinks[100].records), what="failover record")
    assert runner.controller is not None
    channel = runner.controller._transport.channel
    assert isinstance(channel, ControllerChannelManager)
    assert channel._request_timeout_s == 7.0


class HandOverLog:
    """What reached the brokers' senders, when replicas were listed and when the ISR shrinks began, in
    one order.

    Installed on the active controller between events (the event thread is idle): the channel's
    ``send``, the context's ``replicas_on_brokers`` and the replica state machine's ISR removal are
    wrapped to append to ``steps``.
    """

    def __init__(self, runner: ControllerRunner) -> None:
        controller = runner.controller
        assert controller is not None
        self.steps: list[tuple[str, int, Any]] = []
        channel = controller._transport.channel
        assert channel is not None
        send, remove = channel.send, controller.replica_sm._remove_replicas_from_isr

        def recording_send(broker_id: int, request: Any, callback: Any = None) -> None:
            leaders = {(s.topic, s.partition): s.leader for s in getattr(request, "partition_states", ())}
            self.steps.append((type(request).__name__, broker_id, leaders))
            send(broker_id, request, callback)

        def recording_remove(broker_id: int, ids: Any, on_cached: Any = None) -> Any:
            self.steps.append(("isr_removal", broker_id, sorted(ids)))  # partition numbers of the context's table
            return remove(broker_id, ids, on_cached)

        replicas_on_brokers = controller.ctx.replicas_on_brokers

        def recording_replicas_on_brokers(broker_ids: Any) -> Any:
            broker_ids = sorted(broker_ids)
            self.steps.append(("replicas_listed", 0, broker_ids))
            return replicas_on_brokers(broker_ids)

        channel.send = recording_send  # type: ignore[method-assign]
        controller.replica_sm._remove_replicas_from_isr = recording_remove  # type: ignore[method-assign]
        controller.ctx.replicas_on_brokers = recording_replicas_on_brokers  # type: ignore[method-assign]

    def first(self, predicate: Any) -> int:
        return next(i for i, step in enumerate(self.steps) if predicate(step))


def test_new_leaders_hear_of_a_broker_failure_before_the_isr_shrinks(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    """Kafka's order: the elections' LeaderAndIsr go to the senders before the replicas of the dead
    broker leave the ISRs of the partitions it followed (those writes change nothing for availability).
    The dead broker's replicas are not even listed before that (30,000 for one broker of a
    100,000-partition cluster): the elections need only the leader index."""
    for b in (1, 2, 3):
        fake_brokers.start(b)
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [2, 1, 3]})
    runner = candidates.start(100)
    wait_for(lambda: any(r["kind"] == "failover" for r in candidates.sinks[100].records), what="failover")
    log = HandOverLog(runner)
    fake_brokers.kill(1)
    wait_for(lambda: state(zk, "orders", 1)[2] == [2, 3], what="orders-1 ISR shrinks")
    elected = log.first(lambda s: s[0] == "LeaderAndIsrRequest" and s[2].get(("orders", 0)) == 2)
    listed = log.first(lambda s: s[0] == "replicas_listed" and s[2] == [1])
    shrink = log.first(lambda s: s[0] == "isr_removal" and s[1] == 1)
    assert elected < listed < shrink, log.steps


def test_new_leaders_hear_of_a_controlled_shutdown_before_the_isr_shrinks(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    epochs = {b: fake_brokers.start(b) for b in (1, 2, 3)}
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [2, 1, 3]})
    runner = candidates.start(100)
    wait_for(lambda: any(r["kind"] == "failover" for r in candidates.sinks[100].records), what="failover")
    log = HandOverLog(runner)
    assert runner.controller is not None
    answers: list[tuple[int, Any]] = []
    from controller_core.events import ControlledShutdown

    runner.controller.events.put(ControlledShutdown(1, epochs[1], lambda code, rest: answers.append((code, rest))))
    wait_for(lambda: bool(answers), what="the controlled shutdown's answer")
    assert answers == [(0, [])]
    elected = log.first(lambda s: s[0] == "LeaderAndIsrRequest" and s[2].get(("orders", 0)) == 2)
    shrink = log.first(lambda s: s[0] == "isr_removal" and s[1] == 1)
    assert elected < shrink, log.steps


def test_a_controlled_shutdown_is_answered_before_its_records_are_built(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    """The controller keeps an event's partition records unbuilt until its effects are out (the writes,
    the requests, the answer), then hands every one of them to the sinks, in order."""
    epochs = {b: fake_brokers.start(b) for b in (1, 2, 3)}
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [2, 1, 3]})
    runner = candidates.start(100)
    sink = candidates.sinks[100]
    wait_for(lambda: any(r["kind"] == "failover" for r in sink.records), what="failover")
    assert runner.controller is not None
    seen_at_answer: list[list[str]] = []
    from controller_core.events import ControlledShutdown

    def answered(code: int, rest: Any) -> None:
        seen_at_answer.append([r["kind"] for r in sink.records if r.get("cause") == "ControlledShutdown"])

    runner.controller.events.put(ControlledShutdown(1, epochs[1], answered))
    wait_for(lambda: bool(seen_at_answer), what="the controlled shutdown's answer")
    assert "election" not in seen_at_answer[0]

    def of_the_shutdown() -> list[Mapping[str, Any]]:
        return [r for r in sink.records if r.get("cause") == "ControlledShutdown"]

    wait_for(lambda: any(r["kind"] == "replica_transition" for r in of_the_shutdown()), what="the records")
    records = of_the_shutdown()
    kinds = [r["kind"] for r in records]
    assert kinds.index("controlled_shutdown") < kinds.index("election") < kinds.index("isr_change")
    assert [r["entity"] for r in records if r["kind"] == "election"] == ["orders-0"]
    assert [r["entity"] for r in records if r["kind"] == "isr_change"] == ["orders-1@1"]
    seqs = [r["seq"] for r in records]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)


def test_a_partition_added_while_a_cold_failover_reads_is_not_missed(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cold path arms its topics' watches after its requests, relative to a zxid seen before its
    reads: a change made while it reads fires then, as Kafka's watches armed during the read would."""
    from controller_core import failover_read
    from controller_core.model import ReplicaAssignment

    for b in (1, 2, 3):
        fake_brokers.start(b)
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3]})
    read = failover_read.read_partition_states

    def add_a_partition_then_read(*args: Any) -> Any:
        grown = {0: ReplicaAssignment((1, 2, 3)), 1: ReplicaAssignment((2, 3, 1))}
        zk.set(paths.topic_path("orders"), codecs.encode_topic_assignment(grown, None))
        return read(*args)

    monkeypatch.setattr(failover_read, "read_partition_states", add_a_partition_then_read)
    candidates.start(100, warm_standby=False)  # the cold path
    wait_for(lambda: zk.exists(paths.partition_state_path(TopicPartition("orders", 1))) is not None, what="orders-1")
    assert state(zk, "orders", 1) == (2, 0, [2, 3, 1], 1)
    failover = next(r for r in candidates.sinks[100].records if r["kind"] == "failover")
    assert failover["path"] == "cold" and failover["partitions"] == 1  # read before the change landed
