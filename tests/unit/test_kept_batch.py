"""A batch holding a failover's kept start-up requests (``add_kept``) as whole groups, not per-broker
dicts: what it sends is what the same entries added one by one send, byte for byte, also when more
states or UpdateMetadata partitions join before the send (the groups are merged then) and when a
recipient list names a broker twice (no shared parts for it)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_core.context import ControllerContext
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from controller_core.protocol.messages import encode_control_request
from controller_core.request_batch import ControllerBrokerRequestBatch, GroupedStates
from controller_core.standby.kept_requests import KeptRequests
from scripts.support.fakes import RecordingTransport, broker

pytestmark = pytest.mark.unit

PARTITIONS = 400  # enough for shared parts (64 partitions a part on average)


def _context(twice: bool = False) -> ControllerContext:
    ctx = ControllerContext(1)
    ctx.epoch = 3
    ctx.set_live_brokers([broker(b) for b in (1, 2, 3, 4)])
    for t in range(4):
        topic = f"t{t}"
        ctx.add_topics([topic])
        ctx.add_topic_id(topic, f"id-{t}")
        assignments: dict[TopicPartition, ReplicaAssignment] = {}
        leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for p in range(PARTITIONS // 4):
            replicas = tuple((p + k) % 5 + 1 for k in range(3))  # broker 5 is dead: some offline replicas
            if twice and p % 7 == 0:
                replicas = (replicas[0], replicas[0], replicas[1])
            tp = TopicPartition(topic, p)
            assignments[tp] = ReplicaAssignment(replicas)
            leadership[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(replicas[0], 2, replicas, 4), 2)
        ctx.load_topic_assignment(topic, assignments)
        ctx.load_partition_leadership_info(leadership)
    return ctx


def _sent(batch: ControllerBrokerRequestBatch, transport: RecordingTransport) -> list[tuple[int, bytes]]:
    batch.send_requests_to_brokers(3)
    return [(s.broker_id, encode_control_request(s.request)) for s in transport.sent]


def _one_by_one(ctx: ControllerContext, extra: Any) -> list[tuple[int, bytes]]:
    """The oracle: the start-up's entries added as the replica state machine adds them, then ``extra``."""
    transport = RecordingTransport()
    batch = ControllerBrokerRequestBatch(ctx, transport)
    batch.new_batch()
    table, live = ctx.table, ctx.live_broker_ids
    entries = []
    for _, pid in ctx.iter_assigned_ids():
        info, assignment = table.leadership[pid], table.assignment[pid]
        assert info is not None and assignment is not None
        online = tuple(r for r in assignment.replicas if r in live)
        if online:
            entries.append((online, pid, info, assignment))
    batch.add_leader_and_isr_requests_by_id(entries, is_new=False)
    extra(batch)
    return _sent(batch, transport)


def _kept(ctx: ControllerContext, extra: Any) -> list[tuple[int, bytes]]:
    transport = RecordingTransport()
    batch = ControllerBrokerRequestBatch(ctx, transport)
    batch.new_batch()
    kept = KeptRequests.build(ctx)
    leader_and_isr, update_metadata, parts = kept.take()
    assert all(isinstance(states, GroupedStates) for states in leader_and_isr.values())
    batch.add_kept(leader_and_isr, update_metadata, parts)
    assert not batch.is_empty()
    extra(batch)
    return _sent(batch, transport)


def _nothing(batch: ControllerBrokerRequestBatch) -> None:
    pass


def _more_states(batch: ControllerBrokerRequestBatch) -> None:
    ctx = batch._ctx
    pids = [pid for _, pid in ctx.iter_assigned_ids()][::9]
    table = ctx.table
    entries = [((2, 3), pid, table.leadership[pid], table.assignment[pid]) for pid in pids]
    batch.add_leader_and_isr_requests_by_id(entries, is_new=True)  # type: ignore[arg-type]


def _more_metadata(batch: ControllerBrokerRequestBatch) -> None:
    batch.add_update_metadata_request_for_brokers([1], [TopicPartition("t0", 0)])


@pytest.mark.parametrize("extra", [_nothing, _more_states, _more_metadata])
@pytest.mark.parametrize("twice", [False, True])
def test_kept_groups_send_the_bytes_of_the_same_entries_added_one_by_one(extra: Any, twice: bool) -> None:
    ctx = _context(twice)
    kept, oracle = _kept(ctx, extra), _one_by_one(ctx, extra)
    assert [b for b, _ in kept] == [b for b, _ in oracle]
    assert kept == oracle


def test_a_broker_named_twice_in_a_recipient_list_gets_no_shared_parts() -> None:
    ctx = _context(twice=True)
    leader_and_isr, _, parts = KeptRequests.build(ctx).take()
    for broker_id, states in leader_and_isr.items():
        pids = [pid for pid, _ in states.items()]
        assert len(pids) == len(set(pids)), broker_id
        if broker_id in parts:
            assert [s for part in parts[broker_id] for s in part] == list(states.values())
    assert set(parts) < set(leader_and_isr)
