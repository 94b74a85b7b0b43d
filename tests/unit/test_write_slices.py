"""Results taken in slices while the next multis are in flight change nothing that comes out.

The partition state machine's elections and the replica state machine's ISR shrinks record, cache and
request each ``WRITE_SLICE`` state-write results as they come back (``state_machine_parts.WRITE_SLICE``).
A broker failure and a controlled shutdown over more partitions than a slice must send the same
requests, write the same state-change records (in the same order, with the same sequence numbers) and
leave the same leadership cache as when every result is taken at the end.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller_core import partition_state_machine, replica_state_machine
from controller_core.controlled_shutdown import move_off_broker
from controller_core.model import TopicPartition
from controller_core.states import PartitionState, ReplicaState
from scripts.support.fakes import make_harness

pytestmark = pytest.mark.unit

PARTITIONS = 1_500
BROKERS = 7


def _run(slice_size: int, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, ...]:
    monkeypatch.setattr(partition_state_machine, "WRITE_SLICE", slice_size)
    monkeypatch.setattr(replica_state_machine, "WRITE_SLICE", slice_size)
    h = make_harness(brokers=range(1, BROKERS + 1), decide_from_cache=True)
    for i in range(PARTITIONS):
        replicas = [(i + k) % BROKERS + 1 for k in range(3)]
        h.seed_partition(
            TopicPartition(f"t{i // 40}", i % 40),
            replicas,
            leader=replicas[0],
            partition_state=PartitionState.ONLINE,
            replica_state=ReplicaState.ONLINE,
        )
    ctx = h.ctx
    ctx.remove_live_brokers([1])  # a broker failure's elections, then its replicas offline (ISR shrinks)
    h.psm.handle_partition_ids(ctx.partition_ids_with_offline_leader(), PartitionState.OFFLINE)
    h.psm.trigger_online_partition_state_change()
    h.rsm.handle_replica_ids(1, ctx.partition_ids_on_broker(1), ReplicaState.OFFLINE)
    ctx.add_shutting_down_broker(4)  # a controlled shutdown: elections, then ISR shrinks
    move_off_broker(ctx, h.psm, h.rsm, h.partition_batch, lambda: None, 4)
    h.log.flush()
    sent = [(s.broker_id, s.request) for s in h.transport.sent]
    assert not ctx.partition_leaders_on_broker(1) and not ctx.partition_leaders_on_broker(4)
    assert ctx.partition_ids_in_states((PartitionState.OFFLINE, PartitionState.NEW), None) == []
    leadership = list(ctx.table.leadership)
    states = (list(ctx.table.state), list(ctx.table.replica_states))
    return sent, list(h.sink.records), leadership, ctx.preferred_replica_imbalance_count, states


def test_slices_send_record_and_cache_what_one_go_does(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = _run(10**9, monkeypatch)
    sliced = _run(97, monkeypatch)
    sent, records, leadership, imbalance, states = whole
    assert len(records) > 3 * 97 and len(sent) > BROKERS  # the run makes many slices of both kinds
    assert sliced[0] == sent
    assert sliced[1] == records
    assert sliced[2] == leadership
    assert sliced[3] == imbalance
    assert sliced[4] == states
