"""ReplicaManager: control-request validation exactly as reference §6.5, fetch serving and applying."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import pytest

from controller_core.broker.config import BrokerConfig
from controller_core.broker.log import ReplicaLog
from controller_core.broker.partition import IsrProposal, Role
from controller_core.broker.replica_manager import AppendResult, ReplicaManager
from controller_core.model import TopicPartition
from controller_core.protocol.messages import (
    AlterIsrPartitionResult,
    ErrorCode,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveLeader,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)

T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)
BROKER_EPOCH = 500
LEADERS = [LiveLeader(1, "127.0.0.1", 9001), LiveLeader(2, "127.0.0.1", 9002)]


@dataclass
class RecordingFetchers:
    added: list[tuple[int, list[TopicPartition]]] = field(default_factory=list)
    removed: list[TopicPartition] = field(default_factory=list)

    def add_partitions(self, leader: LiveLeader, partitions: Iterable[TopicPartition]) -> None:
        self.added.append((leader.id, list(partitions)))

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        self.removed.extend(partitions)


@dataclass
class RecordingProposer:
    proposals: list[IsrProposal] = field(default_factory=list)
    accept: bool = True

    def submit(self, proposal: IsrProposal) -> bool:
        if self.accept:
            self.proposals.append(proposal)
        return self.accept


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def rm(clock: Clock) -> ReplicaManager:
    config = BrokerConfig(
        broker_id=1, zookeeper_connect="zk:2181", message_size_bytes=100, replica_fetch_max_bytes=1000
    )
    manager = ReplicaManager(config, fetchers=RecordingFetchers(), isr_proposer=RecordingProposer(), clock=clock)
    manager.set_broker_epoch(BROKER_EPOCH)
    return manager


def pstate(
    tp: TopicPartition = T0,
    leader: int = 1,
    leader_epoch: int = 1,
    isr: tuple[int, ...] = (1, 2),
    replicas: tuple[int, ...] = (1, 2),
    zk_version: int = 0,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(tp.topic, tp.partition, 3, leader, leader_epoch, isr, zk_version, replicas)


def leader_and_isr(
    *states: LeaderAndIsrPartitionState,
    controller_epoch: int = 3,
    broker_epoch: int = BROKER_EPOCH,
    topic_ids: dict[str, str] | None = None,
) -> LeaderAndIsrRequest:
    return LeaderAndIsrRequest(9, controller_epoch, broker_epoch, list(states), LEADERS, topic_ids or {})


def stop_replica(
    *parts: StopReplicaPartitionState, controller_epoch: int = 3, broker_epoch: int = BROKER_EPOCH
) -> StopReplicaRequest:
    return StopReplicaRequest(9, controller_epoch, broker_epoch, list(parts))


def update_metadata(
    *states: UpdateMetadataPartitionState, controller_epoch: int = 3, broker_epoch: int = BROKER_EPOCH
) -> UpdateMetadataRequest:
    brokers = [UpdateMetadataBroker(1, (UpdateMetadataEndpoint("127.0.0.1", 9001, "PLAINTEXT", "PLAINTEXT"),), "r1")]
    return UpdateMetadataRequest(9, controller_epoch, broker_epoch, list(states), brokers)


def errors(response: object) -> dict[TopicPartition, ErrorCode]:
    return {TopicPartition(e.topic, e.partition): e.error_code for e in response.partition_errors}  # type: ignore[attr-defined]


# -- broker epoch (all three requests) --------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_epoch", "accepted"),
    [(BROKER_EPOCH, True), (-1, True), (BROKER_EPOCH + 7, True), (BROKER_EPOCH - 1, False)],
)
def test_a_request_for_an_older_broker_epoch_is_rejected(
    rm: ReplicaManager, request_epoch: int, accepted: bool
) -> None:
    expected = ErrorCode.NONE if accepted else ErrorCode.STALE_BROKER_EPOCH
    response = rm.handle_leader_and_isr(leader_and_isr(pstate(), broker_epoch=request_epoch))
    assert response.error_code == expected
    assert (T0 in rm.partitions) is accepted
    assert rm.handle_stop_replica(stop_replica(broker_epoch=request_epoch)).error_code == expected
    assert rm.handle_update_metadata(update_metadata(broker_epoch=request_epoch)).error_code == expected


def test_a_stale_broker_epoch_changes_nothing_not_even_the_controller_epoch(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(), controller_epoch=8, broker_epoch=BROKER_EPOCH - 1))
    assert rm.controller_epoch == 0


# -- controller epoch -------------------------------------------------------------------------------


def test_requests_from_an_older_controller_are_rejected_whole(rm: ReplicaManager) -> None:
    assert rm.handle_leader_and_isr(leader_and_isr(pstate(), controller_epoch=5)).error_code == ErrorCode.NONE
    assert rm.controller_epoch == 5
    old = rm.handle_leader_and_isr(leader_and_isr(pstate(T1), controller_epoch=4))
    assert old.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert errors(old) == {T1: ErrorCode.STALE_CONTROLLER_EPOCH}
    assert T1 not in rm.partitions
    assert rm.handle_stop_replica(stop_replica(controller_epoch=4)).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert rm.handle_update_metadata(update_metadata(controller_epoch=4)).error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    assert rm.handle_update_metadata(update_metadata(controller_epoch=6)).error_code == ErrorCode.NONE
    assert rm.controller_epoch == 6


# -- LeaderAndIsr per partition ---------------------------------------------------------------------


def test_it_leads_or_follows_as_told(rm: ReplicaManager) -> None:
    response = rm.handle_leader_and_isr(leader_and_isr(pstate(T0, leader=1), pstate(T1, leader=2)))
    assert errors(response) == {T0: ErrorCode.NONE, T1: ErrorCode.NONE}
    assert rm.partitions[T0].role == Role.LEADER
    assert rm.partitions[T1].role == Role.FOLLOWER
    fetchers = rm.fetchers
    assert isinstance(fetchers, RecordingFetchers)
    assert fetchers.added == [(2, [T1])]
    assert T0 in fetchers.removed  # a new leader stops fetching first


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [(3, ErrorCode.NONE), (2, ErrorCode.STALE_CONTROLLER_EPOCH), (1, ErrorCode.STALE_CONTROLLER_EPOCH)],
)
def test_partition_states_with_an_older_or_equal_leader_epoch_are_ignored(
    rm: ReplicaManager, epoch: int, expected: ErrorCode
) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=1, leader_epoch=2)))
    response = rm.handle_leader_and_isr(leader_and_isr(pstate(leader=2, leader_epoch=epoch)))
    assert response.error_code == ErrorCode.NONE
    assert errors(response) == {T0: expected}
    assert rm.partitions[T0].role == (Role.FOLLOWER if expected == ErrorCode.NONE else Role.LEADER)


def test_a_partition_this_broker_is_no_replica_of_is_unknown(rm: ReplicaManager) -> None:
    response = rm.handle_leader_and_isr(leader_and_isr(pstate(leader=2, replicas=(2, 3), isr=(2, 3))))
    assert errors(response) == {T0: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert T0 not in rm.partitions


def test_a_different_topic_id_is_inconsistent(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(), topic_ids={"orders": "id-a"}))
    response = rm.handle_leader_and_isr(leader_and_isr(pstate(leader_epoch=2), topic_ids={"orders": "id-b"}))
    assert errors(response) == {T0: ErrorCode.INCONSISTENT_TOPIC_ID}


def test_a_follower_of_a_leader_that_is_not_live_keeps_its_state(rm: ReplicaManager) -> None:
    request = LeaderAndIsrRequest(9, 3, BROKER_EPOCH, [pstate(leader=7, replicas=(1, 7), isr=(7,))], [])
    assert errors(rm.handle_leader_and_isr(request)) == {T0: ErrorCode.NONE}
    assert rm.partitions[T0].leader_epoch == -1  # a later request at the same epoch is still accepted


# -- StopReplica --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [
        (-2, ErrorCode.NONE),
        (-1, ErrorCode.NONE),
        (5, ErrorCode.NONE),
        (4, ErrorCode.FENCED_LEADER_EPOCH),
        (3, ErrorCode.FENCED_LEADER_EPOCH),
    ],
)
def test_stop_replica_is_fenced_by_leader_epoch(rm: ReplicaManager, epoch: int, expected: ErrorCode) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=2, leader_epoch=4)))
    response = rm.handle_stop_replica(stop_replica(StopReplicaPartitionState(T0.topic, T0.partition, epoch, False)))
    assert errors(response) == {T0: expected}
    assert rm.partitions[T0].role == (Role.STOPPED if expected == ErrorCode.NONE else Role.FOLLOWER)


def test_stop_replica_with_delete_removes_the_partition_and_its_log(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=1), topic_ids={"orders": "id-a"}))
    response = rm.handle_stop_replica(stop_replica(StopReplicaPartitionState(T0.topic, T0.partition, -2, True)))
    assert errors(response) == {T0: ErrorCode.NONE}
    assert T0 not in rm.partitions and T0 not in rm.logs
    assert "orders" not in rm.topic_ids  # a re-created topic may come with a new id


def test_stopping_a_partition_not_hosted_succeeds(rm: ReplicaManager) -> None:
    rm.logs[T1] = ReplicaLog(0, 5, 5)  # restored from a checkpoint, never hosted since
    response = rm.handle_stop_replica(stop_replica(StopReplicaPartitionState(T1.topic, T1.partition, 3, True)))
    assert errors(response) == {T1: ErrorCode.NONE}
    assert T1 not in rm.logs


# -- UpdateMetadata -----------------------------------------------------------------------------------


def test_update_metadata_fills_the_cache_and_drops_deleted_topics(rm: ReplicaManager) -> None:
    live = UpdateMetadataPartitionState("orders", 0, 3, 1, 2, (1, 2), 4, (1, 2))
    rm.handle_update_metadata(update_metadata(live))
    assert rm.metadata.partitions[T0].leader == 1
    assert rm.metadata.broker_address(1, "plaintext") == ("127.0.0.1", 9001)
    deleting = UpdateMetadataPartitionState("orders", 0, 3, -2, 0, (1, 2), 0, (1, 2))
    rm.handle_update_metadata(update_metadata(deleting))
    assert T0 not in rm.metadata.partitions


def test_an_older_update_metadata_applied_late_does_not_bring_an_old_leader_back(rm: ReplicaManager) -> None:
    """A resent copy of an older request can be handled after a newer one (two HTTP handler threads)."""
    older = UpdateMetadataPartitionState("orders", 0, 3, 1, 2, (1, 2), 4, (1, 2))
    newer = UpdateMetadataPartitionState("orders", 0, 3, 2, 3, (2,), 5, (1, 2))
    shrunk = UpdateMetadataPartitionState("orders", 0, 3, 2, 3, (2, 1), 6, (1, 2))  # same epoch, ISR write
    rm.handle_update_metadata(update_metadata(newer))
    rm.handle_update_metadata(update_metadata(older))
    assert (rm.metadata.partitions[T0].leader, rm.metadata.partitions[T0].leader_epoch) == (2, 3)
    rm.handle_update_metadata(update_metadata(shrunk))
    rm.handle_update_metadata(update_metadata(newer))  # same leader epoch, older znode version
    assert rm.metadata.partitions[T0].isr == (2, 1)
    rm.handle_update_metadata(update_metadata(shrunk))  # the same state again: applied, nothing changes
    assert rm.metadata.stale_states_ignored == 2
    deleting = UpdateMetadataPartitionState("orders", 0, 3, -2, 0, (1, 2), 0, (1, 2))
    rm.handle_update_metadata(update_metadata(deleting))  # a deletion is never "older"
    assert T0 not in rm.metadata.partitions
    rm.handle_update_metadata(update_metadata(older))  # the topic created again: epochs start over
    assert rm.metadata.partitions[T0].leader == 1


# -- fetch, leader side -------------------------------------------------------------------------------


def fetch_request(replica: int, offset: int, epoch: int = 1, tp: TopicPartition = T0) -> FetchRequest:
    return FetchRequest(replica, 10_000, (FetchPartition(tp.topic, tp.partition, offset, epoch),))


def test_the_leader_serves_records_and_advances_the_high_watermark(rm: ReplicaManager, clock: Clock) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=1, leader_epoch=1)))
    assert rm.append(T0, 25, acks=1, min_insync_replicas=1) == AppendResult.APPENDED
    (first,) = rm.handle_fetch(fetch_request(2, 0)).partitions
    assert (first.error_code, first.record_count, first.records_bytes) == (ErrorCode.NONE, 10, 1000)  # 1000 bytes max
    assert first.epochs == ((1, 0),)
    assert first.high_watermark == 0
    (second,) = rm.handle_fetch(fetch_request(2, 25)).partitions
    assert second.record_count == 0
    assert second.high_watermark == 25


@pytest.mark.parametrize(
    ("epoch", "expected"),
    [(0, ErrorCode.FENCED_LEADER_EPOCH), (2, ErrorCode.UNKNOWN_LEADER_EPOCH), (1, ErrorCode.NONE)],
)
def test_fetches_carry_the_followers_leader_epoch(rm: ReplicaManager, epoch: int, expected: ErrorCode) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=1, leader_epoch=1)))
    (data,) = rm.handle_fetch(fetch_request(2, 0, epoch=epoch)).partitions
    assert data.error_code == expected


def test_fetching_a_partition_not_led_here_fails(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=2)))
    assert rm.handle_fetch(fetch_request(2, 0)).partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert rm.handle_fetch(fetch_request(2, 0, tp=T1)).partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_a_caught_up_follower_is_proposed_for_the_isr(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=1, isr=(1,))))
    rm.append(T0, 5, acks=1, min_insync_replicas=1)
    rm.handle_fetch(fetch_request(2, 5))
    proposer = rm.isr_proposer
    assert isinstance(proposer, RecordingProposer)
    assert [p.new_isr for p in proposer.proposals] == [(1, 2)]
    assert rm.partitions[T0].isr_state.proposed == (1, 2)


def test_a_refused_proposal_leaves_the_partition_unchanged(rm: ReplicaManager) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=1, isr=(1,))))
    proposer = rm.isr_proposer
    assert isinstance(proposer, RecordingProposer)
    proposer.accept = False
    rm.handle_fetch(fetch_request(2, 0))
    assert not rm.partitions[T0].isr_state.inflight


def test_the_isr_check_proposes_dropping_lagging_followers(rm: ReplicaManager, clock: Clock) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=1, isr=(1, 2))))
    rm.append(T0, 5, acks=1, min_insync_replicas=1)
    clock.now += 11.0
    assert rm.maybe_shrink_isrs() == 1
    proposer = rm.isr_proposer
    assert isinstance(proposer, RecordingProposer)
    proposal = proposer.proposals[-1]
    rm.handle_alter_isr_result(proposal, AlterIsrPartitionResult("orders", 0, ErrorCode.NONE, 1, 1, (1,), 1))
    assert rm.partitions[T0].isr_state.isr == (1,)
    assert rm.append(T0, 1, acks=-1, min_insync_replicas=2) == AppendResult.NOT_ENOUGH_REPLICAS
    assert rm.not_enough_replicas == 1
    assert rm.not_enough_replicas_by_partition[T0] == 1


def test_a_retriable_alter_isr_error_resubmits_the_proposal(rm: ReplicaManager, clock: Clock) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=1, isr=(1, 2))))
    rm.append(T0, 5, acks=1, min_insync_replicas=1)
    clock.now += 11.0
    rm.maybe_shrink_isrs()
    proposer = rm.isr_proposer
    assert isinstance(proposer, RecordingProposer)
    proposal = proposer.proposals[-1]
    rm.handle_alter_isr_result(proposal, AlterIsrPartitionResult("orders", 0, ErrorCode.NOT_CONTROLLER))
    assert proposer.proposals[-1] is proposal and len(proposer.proposals) == 2
    assert rm.is_proposal_current(proposal)


# -- fetch, follower side -----------------------------------------------------------------------------


def follow(rm: ReplicaManager, leader_epoch: int = 1) -> None:
    rm.handle_leader_and_isr(leader_and_isr(pstate(leader=2, leader_epoch=leader_epoch)))


def test_the_follower_appends_what_the_leader_sent(rm: ReplicaManager) -> None:
    follow(rm)
    sent = rm.follower_positions(2, [T0])
    assert sent == {T0: (0, 1, 0)}
    response = FetchResponse(
        ErrorCode.NONE,
        (fetched(T0, record_count=8, high_watermark=6, log_end_offset=20, epochs=((0, 0), (1, 5))),),
    )
    outcome = rm.apply_fetch_response(2, sent, response)
    log = rm.partitions[T0].log
    assert outcome.records == 8
    assert (log.log_end_offset, log.high_watermark, log.epochs) == (8, 6, ((0, 0), (1, 5)))


def test_data_fetched_for_an_old_position_is_dropped(rm: ReplicaManager) -> None:
    follow(rm)
    sent = rm.follower_positions(2, [T0])
    follow(rm, leader_epoch=2)  # a LeaderAndIsr arrived while the fetch was in flight
    response = FetchResponse(ErrorCode.NONE, (fetched(T0, record_count=8, high_watermark=8, log_end_offset=8),))
    assert rm.apply_fetch_response(2, sent, response).records == 0
    assert rm.partitions[T0].log.log_end_offset == 0


def test_a_follower_ahead_of_its_leader_truncates_to_the_leaders_end(rm: ReplicaManager) -> None:
    rm.logs[T0] = ReplicaLog(0, 30, 30)
    follow(rm)
    response = FetchResponse(ErrorCode.NONE, (fetched(T0, high_watermark=10, log_end_offset=12),))
    rm.apply_fetch_response(2, rm.follower_positions(2, [T0]), response)
    assert rm.partitions[T0].log.log_end_offset == 12


def test_a_fetch_error_backs_the_partition_off(rm: ReplicaManager) -> None:
    follow(rm)
    response = FetchResponse(ErrorCode.NONE, (fetched(T0, error_code=ErrorCode.FENCED_LEADER_EPOCH),))
    assert rm.apply_fetch_response(2, rm.follower_positions(2, [T0]), response).failed == frozenset({T0})


def test_positions_only_cover_partitions_following_that_leader(rm: ReplicaManager) -> None:
    follow(rm)
    assert rm.follower_positions(3, [T0]) == {}


def fetched(
    tp: TopicPartition,
    *,
    error_code: ErrorCode = ErrorCode.NONE,
    record_count: int = 0,
    high_watermark: int = 0,
    log_end_offset: int = 0,
    epochs: tuple[tuple[int, int], ...] = (),
) -> FetchedPartition:
    return FetchedPartition(
        tp.topic,
        tp.partition,
        error_code,
        high_watermark=high_watermark,
        log_start_offset=0,
        log_end_offset=log_end_offset,
        record_count=record_count,
        records_bytes=record_count * 100,
        epochs=epochs or ((1, 0),),
    )
