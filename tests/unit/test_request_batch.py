"""ControllerBrokerRequestBatch (reference §6.1 to §6.3, checklist §15 items 4 to 6); the wire format is in
test_broker_protocol."""

from __future__ import annotations

from typing import Any

import pytest

from controller_core.context import ControllerContext
from controller_core.errors import IllegalStateError
from controller_core.model import (
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.protocol.messages import (
    ErrorCode,
    LeaderAndIsrPartitionState,
    LeaderAndIsrResponse,
    LiveLeader,
    PartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    empty_response_for,
)
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.state_change_log import MemorySink, StateChangeLogger
from scripts.support.fakes import RecordingTransport, broker

pytestmark = pytest.mark.unit

T0 = TopicPartition("orders", 0)
T1 = TopicPartition("orders", 1)
D0 = TopicPartition("doomed", 0)
INFO = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 7, (1, 2), zk_version=4), controller_epoch=3)
ASSIGNMENT = ReplicaAssignment.of([1, 2, 3], adding=[3], removing=[])


class Setup:
    def __init__(self) -> None:
        self.ctx = ControllerContext(controller_id=9)
        self.ctx.epoch = 5
        self.ctx.set_live_brokers([broker(1), broker(2), broker(3), broker(4, rack="rack-b")])
        self.ctx.add_shutting_down_broker(4)
        self.ctx.add_topics(["orders", "doomed"])
        for tp in (T0, T1, D0):
            self.ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of([1, 2, 3]))
            self.ctx.put_partition_leadership_info(tp, INFO)
        self.transport = RecordingTransport()
        self.sink = MemorySink()
        self.log = StateChangeLogger(self.sink, 9, lambda: self.ctx.epoch, clock=lambda: 1_700_000_000.0)
        self.batch = ControllerBrokerRequestBatch(self.ctx, self.transport, self.log)


@pytest.fixture
def s() -> Setup:
    return Setup()


# --- lifecycle ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["leader_and_isr", "stop_replica", "update_metadata"])
def test_new_batch_refuses_a_non_empty_batch(s: Setup, kind: str) -> None:
    s.batch.new_batch()
    if kind == "leader_and_isr":
        s.batch.add_leader_and_isr_request_for_brokers([1], T0, INFO, ASSIGNMENT, is_new=False)
    elif kind == "stop_replica":
        s.batch.add_stop_replica_request_for_brokers([1], T0, delete_partition=False)
    else:
        s.batch.add_update_metadata_request_for_brokers([1])
    with pytest.raises(IllegalStateError, match="not empty"):
        s.batch.new_batch()
    s.batch.clear()
    s.batch.new_batch()
    assert s.batch.is_empty()


# --- LeaderAndIsr --------------------------------------------------------------------------------------


def test_leader_and_isr_state_carries_the_decision_and_the_assignment(s: Setup) -> None:
    s.batch.add_leader_and_isr_request_for_brokers([2, -1], T0, INFO, ASSIGNMENT, is_new=False)
    assert list(s.batch.leader_and_isr_requests) == [2]  # negative ids are ignored
    assert s.batch.leader_and_isr_requests[2][T0] == LeaderAndIsrPartitionState(
        topic="orders",
        partition=0,
        controller_epoch=3,  # the epoch of the controller that made the decision
        leader=1,
        leader_epoch=7,
        isr=(1, 2),
        zk_version=4,
        replicas=(1, 2, 3),
        adding_replicas=(3,),
        removing_replicas=(),
        is_new=False,
    )


def test_every_leader_and_isr_also_updates_metadata_on_all_registered_brokers(s: Setup) -> None:
    s.batch.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=False)
    assert s.batch.update_metadata_brokers == {1, 2, 3, 4}  # 4 is shutting down but registered
    assert s.batch.update_metadata_partitions == [T0]


def test_leader_and_isr_without_valid_brokers_still_updates_metadata(s: Setup) -> None:
    s.batch.add_leader_and_isr_request_for_brokers([-1], T0, INFO, ASSIGNMENT, is_new=False)
    assert s.batch.leader_and_isr_requests == {}
    assert s.batch.update_metadata_partitions == [T0]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ((True, False), True),
        ((False, True), True),
        ((False, False), False),
        ((True, True), True),
    ],
)
def test_is_new_is_sticky_within_a_batch(s: Setup, flags: tuple[bool, bool], expected: bool) -> None:
    for is_new in flags:
        s.batch.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=is_new)
    assert s.batch.leader_and_isr_requests[2][T0].is_new is expected


def test_later_adds_overwrite_except_is_new_and_stickiness_is_per_broker(s: Setup) -> None:
    s.batch.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=True)
    newer = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 8, (2,), 5), 5)
    s.batch.add_leader_and_isr_request_for_brokers([2, 3], T0, newer, ASSIGNMENT, is_new=False)
    on_2, on_3 = s.batch.leader_and_isr_requests[2][T0], s.batch.leader_and_isr_requests[3][T0]
    assert (on_2.leader, on_2.leader_epoch, on_2.is_new) == (2, 8, True)
    assert (on_3.leader, on_3.leader_epoch, on_3.is_new) == (2, 8, False)


# --- StopReplica -----------------------------------------------------------------------------------------


def test_stop_replica_leader_epoch(s: Setup) -> None:
    unknown = TopicPartition("orders", 99)
    s.ctx.queue_topic_deletion(["doomed"])
    s.batch.add_stop_replica_request_for_brokers([1], T0, delete_partition=False)
    s.batch.add_stop_replica_request_for_brokers([1], D0, delete_partition=True)
    s.batch.add_stop_replica_request_for_brokers([1, -3], unknown, delete_partition=False)
    pending = s.batch.stop_replica_requests
    assert list(pending) == [1]
    assert pending[1][T0].leader_epoch == 7  # cached leader epoch
    assert pending[1][D0].leader_epoch == -2  # topic queued for deletion
    assert pending[1][unknown].leader_epoch == -1  # no leadership info


@pytest.mark.parametrize(("flags", "expected"), [((True, False), True), ((False, True), True), ((False, False), False)])
def test_delete_partition_is_sticky(s: Setup, flags: tuple[bool, bool], expected: bool) -> None:
    for delete in flags:
        s.batch.add_stop_replica_request_for_brokers([1], T0, delete_partition=delete)
    assert s.batch.stop_replica_requests[1][T0].delete_partition is expected


@pytest.mark.parametrize("deleting", [False, True])
@pytest.mark.parametrize("earlier_delete", [False, True])
def test_stop_replica_by_number_builds_the_states_of_the_partition_path(deleting: bool, earlier_delete: bool) -> None:
    """``add_stop_replica_requests_by_id`` (a shutdown's bulk path, with its fresh-batch shortcut) gives
    exactly what ``add_stop_replica_requests_for_broker`` gives: leader epochs, -2 while deleting, -1
    without leadership, a pending delete kept."""
    by_tp, by_id = Setup(), Setup()
    unknown = TopicPartition("orders", 2)
    for setup in (by_tp, by_id):
        setup.ctx.update_partition_full_replica_assignment(unknown, ReplicaAssignment.of([1, 2, 3]))
        if deleting:
            setup.ctx.queue_topic_deletion(["doomed"])
        if earlier_delete:
            setup.batch.add_stop_replica_request_for_brokers([1], T1, delete_partition=True)
    partitions = [T0, T1, D0, unknown]
    by_tp.batch.add_stop_replica_requests_for_broker(1, partitions, delete_partition=False)
    by_id.batch.add_stop_replica_requests_by_id(1, by_id.ctx.partition_ids(partitions), delete_partition=False)
    by_id.batch.add_stop_replica_requests_by_id(-1, by_id.ctx.partition_ids(partitions), delete_partition=True)
    assert by_id.batch.stop_replica_requests == by_tp.batch.stop_replica_requests
    pending = by_id.batch.stop_replica_requests[1]
    assert pending[T0].leader_epoch == 7 and pending[unknown].leader_epoch == -1
    assert pending[D0].leader_epoch == (-2 if deleting else 7)
    assert pending[T1].delete_partition is earlier_delete


# --- UpdateMetadata -----------------------------------------------------------------------------------------


def _sent_update_metadata(s: Setup) -> dict[int, UpdateMetadataRequest]:
    return {x.broker_id: x.request for x in s.transport.of_kind("UpdateMetadata")}


def test_update_metadata_partition_state(s: Setup) -> None:
    s.ctx.remove_live_brokers([3])  # dead replica
    s.batch.add_update_metadata_request_for_brokers([1], [T0])
    s.batch.send_requests_to_brokers(controller_epoch=5)
    (state,) = _sent_update_metadata(s)[1].partition_states
    assert state == UpdateMetadataPartitionState(
        topic="orders",
        partition=0,
        controller_epoch=3,
        leader=1,
        leader_epoch=7,
        isr=(1, 2),
        zk_version=4,
        replicas=(1, 2, 3),
        offline_replicas=(3,),
    )


def test_update_metadata_counts_shutting_down_and_failed_dirs_as_offline(s: Setup) -> None:
    s.ctx.update_partition_full_replica_assignment(T0, ReplicaAssignment.of([1, 2, 4]))
    s.ctx.set_replicas_on_offline_dirs(2, [T0])
    s.batch.add_update_metadata_request_for_brokers([1], [T0])
    s.batch.send_requests_to_brokers(5)
    assert _sent_update_metadata(s)[1].partition_states[0].offline_replicas == (2, 4)


def test_update_metadata_uses_during_delete_values_for_queued_topics(s: Setup) -> None:
    s.ctx.queue_topic_deletion(["doomed"])
    s.batch.add_update_metadata_request_for_brokers([1], [D0])
    s.batch.send_requests_to_brokers(5)
    (state,) = _sent_update_metadata(s)[1].partition_states
    assert (state.leader, state.leader_epoch, state.zk_version, state.isr) == (-2, 0, 0, (1, 2))


def test_update_metadata_skips_partitions_without_leadership_and_can_carry_none(s: Setup) -> None:
    s.batch.add_update_metadata_request_for_brokers([1, 2, 7, -1], [TopicPartition("orders", 42)])
    s.batch.send_requests_to_brokers(5)
    sent = _sent_update_metadata(s)
    assert sorted(sent) == [1, 2]  # 7 is not registered, -1 ignored
    assert sent[1].partition_states == []


def test_update_metadata_lists_every_registered_broker_with_all_endpoints(s: Setup) -> None:
    s.batch.add_update_metadata_request_for_brokers([1])
    s.batch.send_requests_to_brokers(5)
    live = {b.id: b for b in _sent_update_metadata(s)[1].live_brokers}
    assert sorted(live) == [1, 2, 3, 4]  # the shutting-down broker is still listed
    assert live[4] == UpdateMetadataBroker(
        4,
        (
            UpdateMetadataEndpoint("broker4", 9092, "PLAINTEXT", "PLAINTEXT"),
            UpdateMetadataEndpoint("broker4", 9093, "CONTROL", "PLAINTEXT"),
        ),
        "rack-b",
    )


def test_update_metadata_is_built_once_and_shared_by_all_targets(s: Setup) -> None:
    s.batch.add_leader_and_isr_request_for_brokers([1], T0, INFO, ASSIGNMENT, is_new=False)
    s.batch.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=False)
    s.batch.send_requests_to_brokers(5)
    sent = _sent_update_metadata(s)
    assert sorted(sent) == [1, 2, 3, 4]
    assert len(sent[1].partition_states) == 1  # the partition appears once however often it was added
    assert sent[1].partition_states is sent[3].partition_states
    assert sent[1].live_brokers is sent[4].live_brokers


# --- sending ------------------------------------------------------------------------------------------------


def test_send_order_and_dropping_unregistered_brokers(s: Setup) -> None:
    s.batch.add_stop_replica_request_for_brokers([2, 8], T1, delete_partition=False)
    s.batch.add_leader_and_isr_request_for_brokers([3, 1, 8], T0, INFO, ASSIGNMENT, is_new=False)
    s.batch.send_requests_to_brokers(controller_epoch=5)
    assert s.transport.order() == [
        ("LeaderAndIsr", 1),
        ("LeaderAndIsr", 3),
        ("UpdateMetadata", 1),
        ("UpdateMetadata", 2),
        ("UpdateMetadata", 3),
        ("UpdateMetadata", 4),
        ("StopReplica", 2),
    ]
    assert s.batch.is_empty()
    s.batch.new_batch()  # sent batches are empty


def test_requests_carry_controller_identity_and_target_broker_epoch(s: Setup) -> None:
    s.batch.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=False)
    s.batch.add_stop_replica_request_for_brokers([3], T1, delete_partition=False)
    s.batch.send_requests_to_brokers(controller_epoch=6)
    for sent in s.transport.sent:
        assert sent.request.controller_id == 9
        assert sent.request.controller_epoch == 6
        assert sent.request.broker_epoch == 100 + sent.broker_id


def test_leader_and_isr_names_registered_leaders_on_the_inter_broker_listener(s: Setup) -> None:
    no_leader = LeaderIsrAndControllerEpoch(LeaderAndIsr(-1, 3, (3,)), 5)
    s.batch.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=False)
    s.batch.add_leader_and_isr_request_for_brokers([2], T1, no_leader, ASSIGNMENT, is_new=False)
    s.batch.send_requests_to_brokers(5)
    (request,) = [x.request for x in s.transport.of_kind("LeaderAndIsr")]
    assert request.live_leaders == [LiveLeader(1, "broker1", 9092)]

    control = ControllerBrokerRequestBatch(s.ctx, s.transport, inter_broker_listener="control")
    control.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=False)
    s.ctx.remove_live_brokers([1])  # a leader that is gone at send time is not listed
    s.transport.clear()
    control.send_requests_to_brokers(5)
    assert s.transport.of_kind("LeaderAndIsr")[0].request.live_leaders == []


def test_topic_ids_travel_with_the_partitions(s: Setup) -> None:
    s.ctx.add_topic_id("orders", "b3JkZXJz")
    s.batch.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=False)
    s.batch.add_leader_and_isr_request_for_brokers([2], D0, INFO, ASSIGNMENT, is_new=False)
    s.batch.send_requests_to_brokers(5)
    assert s.transport.of_kind("LeaderAndIsr")[0].request.topic_ids == {"orders": "b3JkZXJz"}
    assert s.transport.of_kind("UpdateMetadata")[0].request.topic_ids == {"orders": "b3JkZXJz"}


def test_a_failing_send_is_an_illegal_state_and_leaves_the_rest_pending(s: Setup) -> None:
    class Broken(RecordingTransport):
        def send(self, broker_id: int, request: Any, callback: Any = None) -> None:
            if request.kind == "UpdateMetadata":
                raise ConnectionError("queue closed")
            super().send(broker_id, request, callback)

    batch = ControllerBrokerRequestBatch(s.ctx, Broken())
    batch.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=False)
    batch.add_stop_replica_request_for_brokers([2], T0, delete_partition=False)
    with pytest.raises(IllegalStateError, match="queue closed"):
        batch.send_requests_to_brokers(5)
    assert batch.leader_and_isr_requests == {}  # already sent
    with pytest.raises(IllegalStateError):
        batch.new_batch()


def test_a_sent_batch_is_recorded_with_counts(s: Setup) -> None:
    s.batch.add_leader_and_isr_request_for_brokers([1, 2], T0, INFO, ASSIGNMENT, is_new=False)
    s.batch.add_stop_replica_request_for_brokers([3], T1, delete_partition=True)
    s.batch.send_requests_to_brokers(5)
    (record,) = s.sink.of_kind("request_batch")
    assert record["leader_and_isr"] == {"1": 1, "2": 1}
    assert record["update_metadata"] == {"brokers": [1, 2, 3, 4], "partitions": 1}
    assert record["stop_replica"] == {"3": 1}
    s.batch.send_requests_to_brokers(5)  # nothing pending: nothing recorded
    assert len(s.sink.of_kind("request_batch")) == 1


# --- response callbacks ---------------------------------------------------------------------------------------


def test_stop_replica_responses_reach_the_deletion_callback(s: Setup) -> None:
    calls: list[tuple[int, ErrorCode, dict[TopicPartition, ErrorCode]]] = []
    s.batch.on_stop_replica_response = lambda b, err, errs: calls.append((b, err, dict(errs)))
    s.ctx.queue_topic_deletion(["doomed"])
    s.ctx.begin_topic_deletion(["doomed"])
    d1 = TopicPartition("doomed", 1)
    s.batch.add_stop_replica_request_for_brokers([2], D0, delete_partition=True)
    s.batch.add_stop_replica_request_for_brokers([2], d1, delete_partition=True)
    s.batch.add_stop_replica_request_for_brokers([2], T0, delete_partition=True)  # not being deleted
    s.batch.add_stop_replica_request_for_brokers([3], T1, delete_partition=False)
    s.batch.send_requests_to_brokers(5)
    s.ctx.remove_topic("doomed")  # the callback must not depend on the context any more

    to_2 = s.transport.to_broker(2, "StopReplica")[0]
    assert s.transport.to_broker(3, "StopReplica")[0].callback is None  # nothing being deleted there
    response = StopReplicaResponse(
        ErrorCode.NONE,
        [
            PartitionError("doomed", 0, ErrorCode.NONE),
            PartitionError("doomed", 1, ErrorCode.KAFKA_STORAGE_ERROR),
            PartitionError("orders", 0, ErrorCode.NONE),
        ],
    )
    s.transport.respond(to_2, response)
    assert calls == [(2, ErrorCode.NONE, {D0: ErrorCode.NONE, d1: ErrorCode.KAFKA_STORAGE_ERROR})]

    calls.clear()
    s.transport.respond(to_2, StopReplicaResponse(ErrorCode.STALE_CONTROLLER_EPOCH))
    assert calls == [(2, ErrorCode.STALE_CONTROLLER_EPOCH, dict.fromkeys([D0, d1], ErrorCode.STALE_CONTROLLER_EPOCH))]


def test_stop_replica_without_deletion_started_has_no_callback(s: Setup) -> None:
    s.batch.on_stop_replica_response = lambda *_: pytest.fail("no callback expected")
    s.ctx.queue_topic_deletion(["doomed"])  # queued, but deletion not started
    s.batch.add_stop_replica_request_for_brokers([2], D0, delete_partition=True)
    s.batch.send_requests_to_brokers(5)
    assert s.transport.to_broker(2, "StopReplica")[0].callback is None


def test_leader_and_isr_and_update_metadata_responses_are_delivered_with_the_broker_id(s: Setup) -> None:
    got: list[tuple[int, Any]] = []
    s.batch.on_leader_and_isr_response = lambda b, r: got.append((b, r))
    s.batch.on_update_metadata_response = lambda b, r: got.append((b, r))
    s.transport.auto_respond = True
    s.batch.add_leader_and_isr_request_for_brokers([2], T0, INFO, ASSIGNMENT, is_new=False)
    s.batch.send_requests_to_brokers(5)
    assert got[0] == (2, LeaderAndIsrResponse(ErrorCode.NONE, [PartitionError("orders", 0)]))
    assert [(b, type(r)) for b, r in got[1:]] == [(b, UpdateMetadataResponse) for b in (1, 2, 3, 4)]


def test_a_large_batch_is_cheap(s: Setup) -> None:
    ctx = s.ctx
    partitions = [TopicPartition("big", p) for p in range(100_000)]
    assignment = ReplicaAssignment.of([1, 2, 3])
    for tp in partitions:
        ctx.update_partition_full_replica_assignment(tp, assignment)
        ctx.put_partition_leadership_info(tp, INFO)
    for tp in partitions:
        s.batch.add_leader_and_isr_request_for_brokers((1, 2, 3), tp, INFO, assignment, is_new=False)
    s.batch.send_requests_to_brokers(5)
    assert len(s.transport.of_kind("UpdateMetadata")[0].request.partition_states) == 100_000


def test_empty_response_for_each_request() -> None:
    stop = StopReplicaRequest(1, 5, 1, [StopReplicaPartitionState("t", 3, 1, False)])
    assert empty_response_for(stop, ErrorCode.FENCED_LEADER_EPOCH) == StopReplicaResponse(
        ErrorCode.FENCED_LEADER_EPOCH, [PartitionError("t", 3, ErrorCode.FENCED_LEADER_EPOCH)]
    )
    assert empty_response_for(UpdateMetadataRequest(1, 5, 1, [], [])) == UpdateMetadataResponse()
