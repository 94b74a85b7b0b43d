"""Partition: leader/follower transitions (seed 003), HW, ISR shrink/expand proposals, AlterIsr answers."""

from __future__ import annotations

import pytest

from controller_core.broker.log import ReplicaLog
from controller_core.broker.partition import FollowerState, NotEnoughReplicasError, NotLeaderError, Partition, Role
from controller_core.model import TopicPartition
from controller_core.protocol.messages import AlterIsrPartitionResult, ErrorCode, LeaderAndIsrPartitionState

TP = TopicPartition("orders", 0)
LAG_MS = 10_000.0


def state(
    leader: int,
    epoch: int,
    isr: tuple[int, ...] = (1, 2, 3),
    replicas: tuple[int, ...] = (1, 2, 3),
    zk_version: int = 0,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(TP.topic, TP.partition, 1, leader, epoch, isr, zk_version, replicas)


def leader_with(isr: tuple[int, ...] = (1, 2, 3), messages: int = 0, now: float = 0.0) -> Partition:
    partition = Partition(TP, 1, ReplicaLog())
    partition.log.append(messages, 0)
    partition.make_leader(state(1, 1, isr), now)
    return partition


def follower_of(partition: Partition, replica: int) -> FollowerState:
    follower = partition.follower(replica)
    assert follower is not None
    return follower


def fetch(partition: Partition, replica: int, offset: int, now: float) -> None:
    assert partition.update_follower_fetch_state(replica, offset, 0, now)
    partition.maybe_increment_high_watermark()


# -- becoming leader --------------------------------------------------------------------------------


def test_a_new_leader_records_its_epoch_and_the_epochs_start_offset() -> None:
    partition = Partition(TP, 1, ReplicaLog())
    partition.log.append(40, 0)
    partition.log.high_watermark = 30
    assert partition.make_leader(state(1, 5), now_ms=0.0)
    assert (partition.role, partition.leader_id, partition.leader_epoch) == (Role.LEADER, 1, 5)
    assert partition.leader_epoch_start_offset == 40
    assert partition.log.epochs[-1] == (5, 40)
    assert partition.log.high_watermark == 30  # kept: it only moves up from here


def test_a_new_leader_forgets_what_it_knew_of_followers() -> None:
    partition = leader_with(messages=10)
    fetch(partition, 2, 10, now=1.0)
    partition.make_follower(state(2, 2))
    partition.make_leader(state(1, 3), now_ms=5.0)
    follower = follower_of(partition, 2)
    assert follower.log_end_offset == -1
    assert follower.last_caught_up_time_ms == 5.0  # ISR members start "caught up now"


def test_followers_outside_the_isr_start_out_of_sync() -> None:
    partition = leader_with(isr=(1, 2), now=7.0)
    assert follower_of(partition, 2).last_caught_up_time_ms == 7.0
    assert follower_of(partition, 3).last_caught_up_time_ms == 0.0


def test_re_electing_the_same_leader_keeps_follower_offsets() -> None:
    partition = leader_with(messages=10)
    fetch(partition, 2, 10, now=1.0)
    assert not partition.make_leader(state(1, 2), now_ms=2.0)
    assert follower_of(partition, 2).log_end_offset == 10


# -- becoming follower ------------------------------------------------------------------------------


def test_a_new_follower_truncates_to_its_high_watermark() -> None:
    partition = leader_with(isr=(1,), messages=20)
    partition.log.append(5, 1)
    partition.log.high_watermark = 18
    assert partition.make_follower(state(2, 2))
    assert (partition.role, partition.leader_id, partition.leader_epoch) == (Role.FOLLOWER, 2, 2)
    assert partition.log.log_end_offset == 18
    assert partition.isr_state.isr == ()
    assert partition.leader_epoch_start_offset is None


def test_it_fetches_from_its_log_end_offset_at_the_current_epoch() -> None:
    partition = Partition(TP, 3, ReplicaLog(0, 12, 12))
    partition.make_follower(state(1, 4))
    assert partition.fetch_position() == (12, 4)


# -- appends ----------------------------------------------------------------------------------------


def test_only_the_leader_takes_appends() -> None:
    partition = Partition(TP, 2, ReplicaLog())
    partition.make_follower(state(1, 1))
    with pytest.raises(NotLeaderError):
        partition.append_as_leader(1, acks=1, min_insync_replicas=1)


@pytest.mark.parametrize(
    ("isr", "acks", "min_isr", "refused"),
    [
        ((1, 2), -1, 2, False),
        ((1,), -1, 2, True),
        ((1,), 1, 2, False),  # acks=1 never waits for the ISR
        ((1,), 0, 3, False),
        ((1, 2, 3), -1, 3, False),
    ],
)
def test_acks_all_needs_min_insync_replicas(isr: tuple[int, ...], acks: int, min_isr: int, refused: bool) -> None:
    partition = leader_with(isr=isr)
    if refused:
        with pytest.raises(NotEnoughReplicasError):
            partition.append_as_leader(5, acks, min_isr)
        assert partition.log.log_end_offset == 0
    else:
        partition.append_as_leader(5, acks, min_isr)
        assert partition.log.log_end_offset == 5


# -- high watermark ---------------------------------------------------------------------------------


def test_the_high_watermark_is_the_lowest_leo_in_the_isr() -> None:
    partition = leader_with(isr=(1, 2, 3), messages=100)
    fetch(partition, 2, 80, now=1.0)
    assert partition.log.high_watermark == 0  # replica 3's offset is still unknown
    fetch(partition, 3, 60, now=1.0)
    assert partition.log.high_watermark == 60
    fetch(partition, 3, 100, now=2.0)
    assert partition.log.high_watermark == 80


def test_a_replica_outside_the_isr_does_not_hold_the_high_watermark_back() -> None:
    partition = leader_with(isr=(1, 2), messages=50)
    fetch(partition, 3, 5, now=1.0)
    fetch(partition, 2, 50, now=1.0)
    assert partition.log.high_watermark == 50


def test_a_leader_alone_in_the_isr_commits_at_once() -> None:
    partition = leader_with(isr=(1,))
    partition.append_as_leader(9, acks=-1, min_insync_replicas=1)
    assert partition.log.high_watermark == 9


def test_the_high_watermark_never_goes_back() -> None:
    partition = leader_with(isr=(1, 2), messages=30)
    fetch(partition, 2, 30, now=1.0)
    partition.isr_state = partition.isr_state.__class__((1, 2, 3))
    partition.maybe_increment_high_watermark()
    assert partition.log.high_watermark == 30


# -- ISR shrink -------------------------------------------------------------------------------------


def test_a_follower_that_stops_fetching_leaves_the_isr_after_the_lag_time() -> None:
    partition = leader_with(isr=(1, 2, 3), messages=10, now=0.0)
    fetch(partition, 2, 10, now=100.0)
    fetch(partition, 3, 10, now=100.0)
    partition.append_as_leader(5, acks=1, min_insync_replicas=1)
    fetch(partition, 2, 15, now=9_000.0)
    assert partition.maybe_shrink_isr(now_ms=10_050.0, max_lag_ms=LAG_MS) is None
    proposal = partition.maybe_shrink_isr(now_ms=10_200.0, max_lag_ms=LAG_MS)
    assert proposal is not None
    assert proposal.new_isr == (1, 2)
    assert not proposal.expand
    assert (proposal.leader_epoch, proposal.zk_version) == (1, 0)


def test_a_follower_at_the_leo_stays_in_sync_however_long_ago_it_fetched() -> None:
    partition = leader_with(isr=(1, 2), messages=10, now=0.0)
    fetch(partition, 2, 10, now=1.0)
    assert partition.out_of_sync_replicas(now_ms=60_000.0, max_lag_ms=LAG_MS) == ()


def test_a_follower_counts_as_caught_up_at_its_previous_fetch_when_it_reaches_that_leo() -> None:
    partition = leader_with(isr=(1, 2), messages=10, now=0.0)
    fetch(partition, 2, 10, now=1_000.0)  # caught up at 1s; leader LEO was 10
    partition.append_as_leader(10, acks=1, min_insync_replicas=1)
    fetch(partition, 2, 10, now=5_000.0)  # behind LEO 20, but at the LEO of its previous fetch
    assert follower_of(partition, 2).last_caught_up_time_ms == 1_000.0
    partition.append_as_leader(10, acks=1, min_insync_replicas=1)
    fetch(partition, 2, 20, now=9_000.0)  # reached the LEO seen at 5s: caught up as of 5s
    assert follower_of(partition, 2).last_caught_up_time_ms == 5_000.0


def test_the_leader_never_removes_itself() -> None:
    partition = leader_with(isr=(1,), messages=10, now=0.0)
    assert partition.maybe_shrink_isr(now_ms=1e9, max_lag_ms=LAG_MS) is None


# -- ISR expand -------------------------------------------------------------------------------------


def test_a_follower_joins_the_isr_once_it_reaches_the_high_watermark() -> None:
    partition = leader_with(isr=(1, 2), messages=100, now=0.0)
    fetch(partition, 2, 100, now=1.0)
    assert partition.update_follower_fetch_state(3, 40, 0, now_ms=2.0)
    assert partition.maybe_expand_isr(3) is None
    assert partition.update_follower_fetch_state(3, 100, 0, now_ms=3.0)
    proposal = partition.maybe_expand_isr(3)
    assert proposal is not None
    assert proposal.new_isr == (1, 2, 3)
    assert proposal.expand


def test_a_follower_must_also_reach_the_leader_epochs_start_offset() -> None:
    partition = Partition(TP, 1, ReplicaLog())
    partition.log.append(50, 0)
    partition.log.high_watermark = 30  # the HW this broker knew as a follower
    partition.make_leader(state(1, 4, isr=(1, 2)), now_ms=0.0)  # replica 2's offset unknown: HW stays 30
    assert partition.leader_epoch_start_offset == 50
    assert partition.update_follower_fetch_state(3, 40, 0, now_ms=1.0)
    assert partition.maybe_expand_isr(3) is None  # past the HW, short of the epoch's start
    assert partition.update_follower_fetch_state(3, 50, 0, now_ms=2.0)
    assert partition.maybe_expand_isr(3) is not None


def test_a_replica_not_assigned_is_neither_tracked_nor_added() -> None:
    partition = leader_with(isr=(1, 2, 3), messages=5)
    assert not partition.update_follower_fetch_state(9, 5, 0, now_ms=1.0)
    assert partition.maybe_expand_isr(9) is None


def test_a_fetch_outside_the_leaders_log_is_not_recorded() -> None:
    partition = leader_with(isr=(1, 2), messages=5)
    assert not partition.update_follower_fetch_state(2, 8, 0, now_ms=1.0)
    assert follower_of(partition, 2).log_end_offset == -1


# -- AlterIsr proposals and answers -----------------------------------------------------------------


def shrunk(partition: Partition) -> AlterIsrPartitionResult:
    return AlterIsrPartitionResult(TP.topic, TP.partition, ErrorCode.NONE, 1, partition.leader_epoch, (1, 2), 1)


def test_while_a_change_is_pending_nothing_else_is_proposed_and_the_isr_stays() -> None:
    partition = leader_with(isr=(1, 2, 3), messages=10, now=0.0)
    proposal = partition.maybe_shrink_isr(now_ms=20_000.0, max_lag_ms=LAG_MS)
    assert proposal is not None
    partition.mark_proposed(proposal)
    assert partition.isr_state.isr == (1, 2, 3)
    assert partition.isr_state.inflight
    assert partition.maybe_shrink_isr(now_ms=30_000.0, max_lag_ms=LAG_MS) is None


def test_a_pending_expansion_already_counts_for_the_high_watermark() -> None:
    partition = leader_with(isr=(1,), messages=10, now=0.0)
    assert partition.update_follower_fetch_state(2, 10, 0, now_ms=1.0)
    proposal = partition.maybe_expand_isr(2)
    assert proposal is not None
    partition.mark_proposed(proposal)
    partition.append_as_leader(5, acks=1, min_insync_replicas=1)
    assert partition.log.high_watermark == 10  # waits for replica 2 (maximal ISR)


def test_a_successful_answer_commits_the_isr_and_its_version() -> None:
    partition = leader_with(isr=(1, 2, 3), messages=10, now=0.0)
    fetch(partition, 2, 10, now=15_000.0)
    proposal = partition.maybe_shrink_isr(now_ms=20_000.0, max_lag_ms=LAG_MS)
    assert proposal is not None and proposal.new_isr == (1, 2)
    partition.mark_proposed(proposal)
    assert partition.handle_alter_isr_success(proposal, shrunk(partition))
    assert partition.isr_state.isr == (1, 2)
    assert not partition.isr_state.inflight
    assert partition.zk_version == 1
    assert partition.isr_shrinks == 1


def test_an_ineligible_replica_answer_reverts_to_the_committed_isr_and_may_propose_again() -> None:
    """KIP-841: the controller refused to add a dead or shutting-down follower; nothing was written."""
    partition = leader_with(isr=(1,), messages=10, now=0.0)
    assert partition.update_follower_fetch_state(2, 10, 0, now_ms=1.0)
    proposal = partition.maybe_expand_isr(2)
    assert proposal is not None
    partition.mark_proposed(proposal)
    assert not partition.handle_alter_isr_error(proposal, ErrorCode.INELIGIBLE_REPLICA)  # not resent
    assert partition.isr_state == ((1,), None)
    assert partition.log.high_watermark == 10
    again = partition.maybe_expand_isr(2)  # the follower fetches again: proposed again, not stuck
    assert again is not None and again.new_isr == (1, 2)


def test_an_answer_for_a_replaced_state_is_ignored() -> None:
    partition = leader_with(isr=(1, 2, 3), messages=10, now=0.0)
    proposal = partition.maybe_shrink_isr(now_ms=20_000.0, max_lag_ms=LAG_MS)
    assert proposal is not None
    partition.mark_proposed(proposal)
    partition.make_leader(state(1, 2, isr=(1, 3), zk_version=5), now_ms=21_000.0)  # the controller decided
    assert not partition.handle_alter_isr_success(proposal, shrunk(partition))
    assert not partition.handle_alter_isr_error(proposal, ErrorCode.NOT_CONTROLLER)
    assert partition.isr_state.isr == (1, 3)


def test_an_answer_with_another_leader_epoch_or_an_older_version_is_ignored() -> None:
    partition = leader_with(isr=(1, 2, 3), messages=10, now=0.0)
    proposal = partition.maybe_shrink_isr(now_ms=20_000.0, max_lag_ms=LAG_MS)
    assert proposal is not None
    partition.mark_proposed(proposal)
    other_epoch = AlterIsrPartitionResult(TP.topic, 0, ErrorCode.NONE, 1, 7, (1, 2), 3)
    assert not partition.handle_alter_isr_success(proposal, other_epoch)
    partition.zk_version = 4
    older = AlterIsrPartitionResult(TP.topic, 0, ErrorCode.NONE, 1, 1, (1, 2), 3)
    assert not partition.handle_alter_isr_success(proposal, older)
    assert partition.isr_state.inflight


@pytest.mark.parametrize(
    ("error", "retry"),
    [
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, False),
        (ErrorCode.FENCED_LEADER_EPOCH, False),
        (ErrorCode.INVALID_UPDATE_VERSION, False),
        (ErrorCode.NOT_CONTROLLER, True),
        (ErrorCode.UNKNOWN_SERVER_ERROR, True),
    ],
)
def test_failed_answers_give_up_when_the_controller_has_moved_on(error: ErrorCode, retry: bool) -> None:
    partition = leader_with(isr=(1, 2, 3), messages=10, now=0.0)
    proposal = partition.maybe_shrink_isr(now_ms=20_000.0, max_lag_ms=LAG_MS)
    assert proposal is not None
    partition.mark_proposed(proposal)
    assert partition.handle_alter_isr_error(proposal, error) is retry
    assert partition.isr_state.inflight  # pending until an answer or a LeaderAndIsr replaces it


# -- stop --------------------------------------------------------------------------------------------


def test_a_stopped_replica_keeps_its_log_but_neither_leads_nor_follows() -> None:
    partition = leader_with(isr=(1,), messages=10)
    partition.stop()
    assert partition.role == Role.STOPPED
    assert partition.log.log_end_offset == 10
    with pytest.raises(NotLeaderError):
        partition.append_as_leader(1, 1, 1)
    assert partition.check_fetch_epoch(2, 1) == ErrorCode.NOT_LEADER_OR_FOLLOWER


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (1, ErrorCode.NONE),
        (-1, ErrorCode.NONE),
        (0, ErrorCode.FENCED_LEADER_EPOCH),
        (2, ErrorCode.UNKNOWN_LEADER_EPOCH),
    ],
)
def test_fetches_are_fenced_by_leader_epoch(epoch: int, expected: ErrorCode) -> None:
    assert leader_with().check_fetch_epoch(2, epoch) == expected
