"""PartitionStateMachine: every transition of reference §4, initialization (§4.3), elections (§4.4, §5)."""

from __future__ import annotations

import pytest

from controller_core.election import (
    ControlledShutdownStrategy,
    OfflineStrategy,
    PreferredStrategy,
    ReassignStrategy,
)
from controller_core.errors import ControllerMovedError, StateChangeFailedError, ZkOperationError
from controller_core.model import LeaderAndIsr, ReplicaAssignment, TopicPartition
from controller_core.ports import ZkCode
from controller_core.states import PARTITION_VALID_PREVIOUS, PartitionState
from scripts.support.fakes import Harness, make_harness
from tests.support.store_faults import inject_store_fault

pytestmark = pytest.mark.unit

P = PartitionState
T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)
U0 = TopicPartition("users", 0)


@pytest.fixture
def h() -> Harness:
    return make_harness(brokers=(1, 2, 3), epoch=5)


def seed_led(h: Harness, tp: TopicPartition = T0, state: P = P.OFFLINE, leader: int = 1, **kw: object) -> None:
    kw.setdefault("isr", [1, 2, 3])
    kw.setdefault("leader_epoch", 10)
    h.seed_partition(tp, [1, 2, 3], leader=leader, partition_state=state, **kw)  # type: ignore[arg-type]


def zk(h: Harness, tp: TopicPartition = T0) -> LeaderAndIsr:
    state = h.store.state(tp)
    assert state is not None
    return state.leader_and_isr


# --- the transition table, exhaustively ---------------------------------------------------------------------


@pytest.mark.parametrize("target", list(P))
@pytest.mark.parametrize("start", [None, *P])
def test_every_transition_is_made_or_refused_per_the_table(h: Harness, start: P | None, target: P) -> None:
    if start in (P.ONLINE, P.OFFLINE):
        seed_led(h, state=start)
    else:
        h.seed_partition(T0, [1, 2, 3], partition_state=start)
    valid = (start or P.NON_EXISTENT) in PARTITION_VALID_PREVIOUS[target]

    results = h.psm.handle_state_changes([T0], target, OfflineStrategy())

    if not valid:
        assert h.ctx.partition_state(T0) is (start or P.NON_EXISTENT)
        assert results == {}  # refused partitions are not in the result
        (failed,) = h.sink.of_kind("failed_change")
        assert (failed["entity"], failed["to_state"]) == ("orders-0", target)
        assert "before moving to" in failed["error"]
        assert h.transport.sent == []
        return
    assert h.ctx.partition_state(T0) is target
    assert h.sink.of_kind("failed_change") == []
    if target is P.ONLINE and start is not P.NEW:
        assert isinstance(results[T0], LeaderAndIsr)  # elections are reported
    else:
        assert results == {}  # initialization and plain state changes are not


@pytest.mark.parametrize("target", [P.OFFLINE, P.NON_EXISTENT, P.NEW])
def test_plain_state_changes_send_nothing_and_are_recorded(h: Harness, target: P) -> None:
    start = {P.NEW: P.NON_EXISTENT, P.OFFLINE: P.NEW, P.NON_EXISTENT: P.OFFLINE}[target]
    h.seed_partition(T0, [1, 2, 3], partition_state=start)
    h.psm.handle_state_changes([T0], target)
    assert h.transport.sent == []
    (record,) = h.sink.of_kind("partition_transition")
    assert (record["from_state"], record["to_state"]) == (start, target)


def test_offline_to_offline_is_allowed_but_not_recorded(h: Harness) -> None:
    h.seed_partition(T0, [1, 2, 3], partition_state=P.OFFLINE)
    h.psm.handle_state_changes([T0], P.OFFLINE)
    assert h.ctx.partition_state(T0) is P.OFFLINE
    assert h.sink.records == []


def test_going_offline_records_the_leader_it_loses(h: Harness) -> None:
    seed_led(h, state=P.ONLINE, leader=2, isr=[2, 3])
    h.psm.handle_state_changes([T0], P.OFFLINE)
    (record,) = h.sink.of_kind("partition_transition")
    assert (record["from_state"], record["to_state"]) == (P.ONLINE, P.OFFLINE)
    assert (record["leader_before"], record["isr_before"], record["leader_epoch_before"]) == (2, (2, 3), 10)
    assert record["leader_after"] is None


def test_offline_gauge_follows_the_machine(h: Harness) -> None:
    h.seed_partition(T0, [1, 2, 3], partition_state=P.NEW)
    h.psm.handle_state_changes([T0], P.OFFLINE)
    assert h.ctx.offline_partition_count == 1
    h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())  # no state znode: the election fails
    assert h.ctx.offline_partition_count == 1
    h.psm.handle_state_changes([T0], P.NON_EXISTENT)
    assert h.ctx.offline_partition_count == 0


# --- New -> Online: initialization ------------------------------------------------------------------------------


def test_initialization_picks_the_first_live_replica_and_all_live_ones_in_sync(h: Harness) -> None:
    h.ctx.add_shutting_down_broker(3)
    h.ctx.set_replicas_on_offline_dirs(1, [T0])
    h.seed_partition(T0, [4, 1, 2, 3], partition_state=P.NEW)  # 4 dead, 1 dir failed, 3 shutting down

    results = h.psm.handle_state_changes([T0], P.ONLINE)

    assert results == {}  # §15.8
    assert h.ctx.partition_state(T0) is P.ONLINE
    assert zk(h) == LeaderAndIsr(2, 0, (2,), 0)
    assert h.store.state(T0).controller_epoch == 5  # type: ignore[union-attr]
    assert h.ctx.partition_leadership_info(T0) == h.store.state(T0)
    (state,) = h.transport.leader_and_isr_partitions(2).values()
    assert (state.leader, state.isr, state.is_new, state.replicas) == (2, (2,), True, (4, 1, 2, 3))
    assert [s.broker_id for s in h.transport.of_kind("LeaderAndIsr")] == [2]
    assert sorted(s.broker_id for s in h.transport.of_kind("UpdateMetadata")) == [1, 2, 3]
    (record,) = h.sink.of_kind("partition_transition")
    assert (record["from_state"], record["to_state"], record["leader_after"]) == (P.NEW, P.ONLINE, 2)


def test_initialization_sends_leader_and_isr_to_every_live_replica(h: Harness) -> None:
    h.seed_partition(T0, [3, 1, 2], partition_state=P.NEW)
    h.psm.handle_state_changes([T0], P.ONLINE)
    assert zk(h) == LeaderAndIsr(3, 0, (3, 1, 2), 0)
    assert [s.broker_id for s in h.transport.of_kind("LeaderAndIsr")] == [1, 2, 3]


@pytest.mark.parametrize("failure", ["no_live_replica", "node_exists", "create_error", "create_raises"])
def test_failed_initialization_stays_new(h: Harness, failure: str, monkeypatch: pytest.MonkeyPatch) -> None:
    replicas = [7, 8] if failure == "no_live_replica" else [1, 2]
    h.seed_partition(T0, replicas, partition_state=P.NEW)
    h.seed_partition(T1, [1, 2], partition_state=P.NEW)
    if failure == "node_exists":
        h.store.seed_state(T0, 1, [1], controller_epoch=5)
    elif failure == "create_error":
        h.store.create_errors[T0] = ZkCode.CONNECTION_LOSS
    elif failure == "create_raises":

        def boom(*args: object) -> dict[TopicPartition, ZkCode]:
            raise TimeoutError("zk timeout")

        monkeypatch.setattr(h.store, "create_partition_states", boom)

    h.psm.handle_state_changes([T0, T1], P.ONLINE)

    assert h.ctx.partition_state(T0) is P.NEW
    assert h.ctx.partition_leadership_info(T0) is None or failure == "node_exists"
    failed_entities = [r["entity"] for r in h.sink.of_kind("failed_change")]
    assert "orders-0" in failed_entities
    if failure == "create_raises":
        assert h.ctx.partition_state(T1) is P.NEW  # the whole create failed
    else:
        assert h.ctx.partition_state(T1) is P.ONLINE  # the others still initialize
        assert T0 not in h.transport.leader_and_isr_partitions(1)


def test_initialization_is_fenced(h: Harness) -> None:
    h.seed_partition(T0, [1, 2], partition_state=P.NEW)
    h.store.elect_other_controller()
    with pytest.raises(ControllerMovedError):
        h.psm.handle_state_changes([T0], P.ONLINE)
    assert h.store.state(T0) is None
    assert h.ctx.partition_state(T0) is P.NEW


# --- elections ---------------------------------------------------------------------------------------------------


def test_offline_election_elects_a_live_in_sync_replica(h: Harness) -> None:
    seed_led(h, leader=1, isr=[1, 3, 2], controller_epoch=4)
    h.ctx.remove_live_brokers([1])

    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())

    expected = LeaderAndIsr(2, 11, (3, 2), zk_version=1)
    assert results == {T0: expected}
    assert zk(h) == expected
    assert h.store.state(T0).controller_epoch == 5  # type: ignore[union-attr]  # written with our epoch
    cached = h.ctx.partition_leadership_info(T0)
    assert cached is not None and cached.leader_and_isr == expected and cached.controller_epoch == 5
    assert h.ctx.partition_state(T0) is P.ONLINE
    assert [s.broker_id for s in h.transport.of_kind("LeaderAndIsr")] == [2, 3]  # live replicas
    state = h.transport.leader_and_isr_partitions(3)[T0]
    assert (state.leader, state.leader_epoch, state.isr, state.zk_version, state.is_new) == (2, 11, (3, 2), 1, False)
    assert sorted(s.broker_id for s in h.transport.of_kind("UpdateMetadata")) == [2, 3]
    (record,) = h.sink.of_kind("election")
    assert record["strategy"] == "offline"
    assert (record["from_state"], record["to_state"]) == (P.OFFLINE, P.ONLINE)
    assert (record["leader_before"], record["leader_after"]) == (1, 2)
    assert (record["leader_epoch_before"], record["leader_epoch_after"]) == (10, 11)
    assert (record["isr_before"], record["isr_after"], record["unclean"]) == ((1, 3, 2), (3, 2), False)


def test_elections_read_zookeeper_not_the_cache(h: Harness) -> None:
    seed_led(h, leader=1, isr=[1, 2])
    h.store.leader_isr_change(T0, [1, 3])  # the leader changed the ISR; the cache did not see it
    h.ctx.remove_live_brokers([1])
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    assert results[T0] == LeaderAndIsr(3, 11, (3,), 2)


def test_elections_retry_version_conflicts_without_limit(h: Harness) -> None:
    seed_led(h, leader=1, isr=[1, 2, 3])
    h.ctx.remove_live_brokers([1])
    h.store.concurrent_isr_change(T0, [1, 3], times=3)
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    assert len(h.store.update_calls) == 4
    assert len(h.store.read_calls) == 4
    assert results == {T0: LeaderAndIsr(3, 11, (3,), 4)}
    assert len(h.sink.of_kind("election")) == 1


def test_a_conflict_on_one_partition_does_not_delay_the_others(h: Harness) -> None:
    seed_led(h, T0)
    seed_led(h, T1)
    h.ctx.remove_live_brokers([1])
    h.store.concurrent_isr_change(T1, [1, 3])
    results = h.psm.handle_state_changes([T0, T1], P.ONLINE, OfflineStrategy())
    assert [list(call) for call in h.store.update_calls] == [[T0, T1], [T1]]
    assert results[T0].leader == 2 and results[T1].leader == 3  # type: ignore[union-attr]


def test_elections_abort_when_a_newer_controller_wrote_the_state(h: Harness) -> None:
    seed_led(h)
    h.ctx.remove_live_brokers([1])
    h.store.overwrite_by_newer_controller(T0, controller_epoch=6)
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    assert isinstance(results[T0], StateChangeFailedError)
    assert "another controller" in str(results[T0])
    assert h.store.update_calls == []
    assert h.ctx.partition_state(T0) is P.OFFLINE
    assert h.sink.of_kind("failed_change")[0]["strategy"] == "offline"


@pytest.mark.parametrize(
    ("failure", "error_type", "text"),
    [
        ("missing", StateChangeFailedError, "doesn't exist"),
        ("corrupt", StateChangeFailedError, "doesn't exist"),
        ("read_error", ZkOperationError, "CONNECTIONLOSS"),
        ("write_error", ZkOperationError, "NONODE"),
        ("read_raises", TimeoutError, "zk timeout"),
    ],
)
def test_election_failures_are_per_partition_results(
    h: Harness, failure: str, error_type: type[Exception], text: str
) -> None:
    seed_led(h)
    h.ctx.remove_live_brokers([1])
    inject_store_fault(h.store, T0, failure)
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    assert isinstance(results[T0], error_type)
    assert text in str(results[T0])
    assert h.ctx.partition_state(T0) is P.OFFLINE
    assert h.transport.of_kind("LeaderAndIsr") == []
    assert len(h.store.read_calls) == 1  # no retry


def test_no_eligible_leader_fails_and_keeps_the_state(h: Harness) -> None:
    seed_led(h, leader=1, isr=[1])
    h.ctx.remove_live_brokers([1])
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    assert isinstance(results[T0], StateChangeFailedError)
    assert "Failed to elect leader for partition orders-0 under strategy" in str(results[T0])
    assert h.ctx.partition_state(T0) is P.OFFLINE
    assert zk(h).leader_epoch == 10


def test_missing_strategy_fails_every_requested_partition(h: Harness) -> None:
    seed_led(h, T0)
    h.seed_partition(T1, [1, 2], partition_state=P.NEW)
    results = h.psm.handle_state_changes([T0, T1], P.ONLINE)
    assert set(results) == {T0, T1}
    assert all(isinstance(e, ValueError) for e in results.values())
    assert h.ctx.partition_state(T0) is P.OFFLINE


def test_controller_moved_propagates_from_an_election(h: Harness) -> None:
    seed_led(h)
    h.ctx.remove_live_brokers([1])
    h.store.elect_other_controller()
    with pytest.raises(ControllerMovedError):
        h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    assert zk(h) == LeaderAndIsr(1, 10, (1, 2, 3), 0)
    assert h.ctx.partition_state(T0) is P.OFFLINE


def test_an_unsent_batch_turns_into_per_partition_errors(h: Harness) -> None:
    seed_led(h)
    h.partition_batch.add_update_metadata_request_for_brokers([1])
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    assert type(results[T0]).__name__ == "IllegalStateError"


# --- unclean elections ------------------------------------------------------------------------------------------


def _leaderless(h: Harness, tp: TopicPartition = T0) -> None:
    """Leader 1 (the only ISR member) is dead; 2 and 3 are alive but out of sync."""
    seed_led(h, tp, leader=1, isr=[1])
    h.ctx.remove_live_brokers([1])


@pytest.mark.parametrize(
    ("config", "broker_default", "expected_leader"),
    [
        ({"unclean.leader.election.enable": "true"}, False, 2),
        ({"unclean.leader.election.enable": " TRUE "}, False, 2),
        ({"unclean.leader.election.enable": "false"}, True, None),
        ({}, True, 2),  # no override: the broker default applies
        ({}, False, None),
    ],
)
def test_unclean_election_follows_the_topic_config(
    h: Harness, config: dict[str, str], broker_default: bool, expected_leader: int | None
) -> None:
    _leaderless(h)
    h.store.topic_configs["orders"] = config
    h.psm.unclean_leader_election_enable = broker_default
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    if expected_leader is None:
        assert isinstance(results[T0], StateChangeFailedError)
        assert h.psm.unclean_leader_elections == 0
        return
    assert results[T0] == LeaderAndIsr(expected_leader, 11, (expected_leader,), 1)
    assert h.psm.unclean_leader_elections == 1
    assert h.sink.of_kind("election")[0]["unclean"] is True


def test_allow_unclean_skips_the_config_read(h: Harness) -> None:
    _leaderless(h)
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy(allow_unclean=True))
    assert results[T0] == LeaderAndIsr(2, 11, (2,), 1)
    assert h.store.config_calls == []


def test_configs_are_read_only_for_partitions_without_a_live_in_sync_replica(h: Harness) -> None:
    _leaderless(h, T0)
    h.seed_partition(U0, [1, 2], leader=1, isr=[1, 2], partition_state=P.OFFLINE)
    h.psm.handle_state_changes([T0, U0], P.ONLINE, OfflineStrategy())
    assert h.store.config_calls == [{"orders"}]


@pytest.mark.parametrize("problem", ["unreadable", "invalid"])
def test_an_unusable_topic_config_fails_the_partition(h: Harness, problem: str) -> None:
    _leaderless(h)
    if problem == "unreadable":
        h.store.unreadable_topic_configs.add("orders")
    else:
        h.store.topic_configs["orders"] = {"unclean.leader.election.enable": "yes"}
    results = h.psm.handle_state_changes([T0], P.ONLINE, OfflineStrategy())
    assert isinstance(results[T0], StateChangeFailedError)
    assert "Failed to elect leader" in str(results[T0])
    assert len(h.sink.of_kind("failed_change")) == 2  # the config problem, then the election


# --- the other strategies -----------------------------------------------------------------------------------------


def test_preferred_election_tells_every_assigned_replica(h: Harness) -> None:
    seed_led(h, state=P.ONLINE, leader=2)
    h.ctx.remove_live_brokers([3])
    results = h.psm.handle_state_changes([T0], P.ONLINE, PreferredStrategy())
    assert results == {T0: LeaderAndIsr(1, 11, (1, 2, 3), 1)}  # ISR unchanged
    assert [s.broker_id for s in h.transport.of_kind("LeaderAndIsr")] == [1, 2]  # 3 dropped at send time
    assert h.sink.of_kind("election")[0]["from_state"] == P.ONLINE


def test_preferred_election_does_not_fall_back(h: Harness) -> None:
    seed_led(h, state=P.ONLINE, leader=2, isr=[2, 3])
    results = h.psm.handle_state_changes([T0], P.ONLINE, PreferredStrategy())
    assert isinstance(results[T0], StateChangeFailedError)
    assert zk(h).leader == 2


def test_reassign_election_moves_leadership_to_the_targets(h: Harness) -> None:
    seed_led(h, state=P.ONLINE, leader=1, isr=[1, 2, 3])
    h.ctx.update_partition_full_replica_assignment(T0, ReplicaAssignment.of([3, 2, 1], adding=[], removing=[1]))
    results = h.psm.handle_state_changes([T0], P.ONLINE, ReassignStrategy())
    assert results == {T0: LeaderAndIsr(3, 11, (1, 2, 3), 1)}
    assert [s.broker_id for s in h.transport.of_kind("LeaderAndIsr")] == [2, 3]  # target replicas only
    assert h.transport.leader_and_isr_partitions(3)[T0].removing_replicas == (1,)


def test_controlled_shutdown_election_informs_the_shutting_down_broker(h: Harness) -> None:
    seed_led(h, state=P.ONLINE, leader=1, isr=[1, 2, 3])
    h.ctx.add_shutting_down_broker(1)
    results = h.psm.handle_state_changes([T0], P.ONLINE, ControlledShutdownStrategy())
    assert results == {T0: LeaderAndIsr(2, 11, (2, 3), 1)}
    assert [s.broker_id for s in h.transport.of_kind("LeaderAndIsr")] == [1, 2, 3]
    assert h.transport.leader_and_isr_partitions(1)[T0].leader == 2
    assert h.sink.of_kind("election")[0]["strategy"] == "controlled_shutdown"


def test_controlled_shutdown_without_other_in_sync_replica_keeps_the_leader(h: Harness) -> None:
    seed_led(h, state=P.ONLINE, leader=1, isr=[1])
    h.ctx.add_shutting_down_broker(1)
    results = h.psm.handle_state_changes([T0], P.ONLINE, ControlledShutdownStrategy())
    assert isinstance(results[T0], StateChangeFailedError)
    assert zk(h).leader == 1
    assert h.ctx.partition_state(T0) is P.ONLINE


# --- startup and trigger ---------------------------------------------------------------------------------------------


def test_trigger_online_brings_new_and_offline_partitions_online_except_queued_topics(h: Harness) -> None:
    seed_led(h, T0, state=P.OFFLINE)
    h.seed_partition(T1, [2, 3], partition_state=P.NEW)
    h.seed_partition(U0, [2, 3], partition_state=P.NEW)
    online = TopicPartition("orders", 2)
    seed_led(h, online, state=P.ONLINE)
    h.ctx.queue_topic_deletion(["users"])
    h.ctx.remove_live_brokers([1])

    results = h.psm.trigger_online_partition_state_change()

    assert set(results) == {T0}  # only elections are reported
    assert h.ctx.partition_state(T0) is P.ONLINE
    assert h.ctx.partition_state(T1) is P.ONLINE
    assert h.ctx.partition_state(U0) is P.NEW
    assert zk(h, online).leader_epoch == 10  # Online partitions are left alone


def test_trigger_online_for_one_topic(h: Harness) -> None:
    h.seed_partition(T0, [2], partition_state=P.NEW)
    h.seed_partition(U0, [2], partition_state=P.NEW)
    h.psm.trigger_online_partition_state_change("users")
    assert h.ctx.partition_state(U0) is P.ONLINE
    assert h.ctx.partition_state(T0) is P.NEW


def test_startup_derives_states_from_the_cache_then_elects() -> None:
    h = make_harness(brokers=(2, 3), epoch=5)
    h.seed_partition(T0, [1, 2, 3], leader=1, isr=[1, 2], leader_epoch=3, controller_epoch=4)  # leader dead
    h.seed_partition(T1, [2, 3], leader=2, isr=[2, 3], controller_epoch=4)  # leader alive
    h.seed_partition(U0, [3, 2])  # never initialized

    results = h.psm.startup()

    (initialized,) = h.sink.of_kind("states_initialized")
    assert initialized["counts"] == {"NewPartition": 1, "OnlinePartition": 1, "OfflinePartition": 1}
    assert results == {T0: LeaderAndIsr(2, 4, (2,), 1)}
    assert {tp: h.ctx.partition_state(tp) for tp in (T0, T1, U0)} == dict.fromkeys((T0, T1, U0), P.ONLINE)
    assert zk(h, U0) == LeaderAndIsr(3, 0, (3, 2), 0)
    assert zk(h, T1).leader_epoch == 0  # untouched
    assert h.ctx.offline_partition_count == 0
