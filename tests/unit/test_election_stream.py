"""An election takes its write results in slices as their multis come back (records, cache, LeaderAndIsr
states, UpdateMetadata states built ahead), while ZooKeeper applies the later multis. What the brokers
are sent, what is cached and what is recorded must be exactly what taking every result at the end gives:
the same requests in the same order, the same records, even when a write conflicts, fails or the
controller is fenced in the middle of the stream."""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from controller_core.controlled_shutdown import move_off_broker
from controller_core.election import PreferredStrategy
from controller_core.errors import ControllerMovedError
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller_core.states import PartitionState, ReplicaState
from scripts.support.fakes import Harness
from tests.support.clusters import BROKERS, random_cluster, what_happened

pytestmark = pytest.mark.unit


def _cluster(seed: int) -> Harness:
    """600 partitions over 5 brokers, random replica lists and ISRs, decisions on the cache."""
    return random_cluster(seed, partitions=600, topics=9, in_sync=0.8)


def _broker_failure(h: Harness, dead: int) -> None:
    """As ``Controller._elect_offline_leaders``: the dead broker's led partitions to Offline, then elect."""
    h.ctx.remove_live_brokers([dead])
    offline = h.ctx.partition_ids_with_offline_leader()
    h.psm.handle_partition_ids(offline, PartitionState.OFFLINE)
    h.psm.trigger_online_partition_state_change()


def _run(monkeypatch: pytest.MonkeyPatch, slice_size: int, scenario: Callable[[Harness], None], seed: int) -> Any:
    h = _cluster(seed)
    monkeypatch.setattr(h.psm, "stream_slice", slice_size)
    monkeypatch.setattr(h.rsm, "stream_slice", slice_size)
    scenario(h)
    return what_happened(h)


def _failure_then_preferred(h: Harness) -> None:
    _broker_failure(h, 2)
    h.ctx.add_live_brokers([next(b for b in _registrations(h) if b.id == 2)])
    for tp in h.ctx.all_partitions():  # the returning broker back in every ISR it was in (its AlterIsr)
        info = h.ctx.partition_leadership_info(tp)
        assert info is not None
        if 2 in h.ctx.partition_replica_assignment(tp) and 2 not in info.leader_and_isr.isr:
            h.store.leader_isr_change(tp, (*info.leader_and_isr.isr, 2))
            state = h.store.state(tp)
            assert state is not None
            h.ctx.put_partition_leadership_info(tp, state)
    h.psm.handle_state_changes(h.ctx.all_partitions(), PartitionState.ONLINE, PreferredStrategy())


def _registrations(h: Harness) -> list[Any]:
    from scripts.support.fakes import broker

    return [broker(b) for b in BROKERS]


def _conflicts_and_failures(h: Harness) -> None:
    """Some partitions changed behind the cache (BADVERSION, retried on a read), one write's reply lost
    twice (an error for that partition), then the broker failure."""
    rng = random.Random(7)
    led = [tp for tp in h.ctx.all_partitions() if h.ctx.partition_leadership_info(tp).leader_and_isr.leader == 3]  # type: ignore[union-attr]
    for tp in rng.sample(led, 25):
        h.store.concurrent_isr_change(tp, h.store.znodes[tp].isr)
    h.store.lose_reply(led[5], times=2)
    _broker_failure(h, 3)


def _failure_with_isr_shrinks(h: Harness) -> None:
    """The broker failure, then its replicas Offline: the ISR shrinks, written and taken in slices too."""
    _broker_failure(h, 1)
    h.rsm.handle_replica_ids(1, h.ctx.partition_ids_on_broker(1), ReplicaState.OFFLINE)


def _controlled_shutdown(h: Harness) -> None:
    """A controlled shutdown's moves: its leaders elected away, then it leaves the ISRs it is in."""
    h.ctx.add_shutting_down_broker(5)
    move_off_broker(h.ctx, h.psm, h.rsm, h.partition_batch, lambda: None, 5)


def _fenced_midway(h: Harness) -> None:
    """Another controller wins after 40 of the election's writes: what landed before is kept."""
    h.store.elect_other_controller_after(40)
    with pytest.raises(ControllerMovedError):
        _broker_failure(h, 4)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(
    "scenario",
    [_failure_then_preferred, _conflicts_and_failures, _failure_with_isr_shrinks, _controlled_shutdown, _fenced_midway],
    ids=lambda f: f.__name__,
)
def test_results_taken_in_slices_send_record_and_cache_what_one_pass_does(
    monkeypatch: pytest.MonkeyPatch, seed: int, scenario: Callable[[Harness], None]
) -> None:
    one_pass = _run(monkeypatch, 10**9, scenario, seed)
    for slice_size in (1, 7, 64):
        sliced = _run(monkeypatch, slice_size, scenario, seed)
        assert sliced[0] == one_pass[0], f"requests differ with slices of {slice_size}"
        assert sliced[1] == one_pass[1], f"records differ with slices of {slice_size}"
        assert sliced[2] == one_pass[2], f"cache differs with slices of {slice_size}"
        assert sliced[3] == one_pass[3], f"partition states differ with slices of {slice_size}"
    if scenario is not _fenced_midway:
        assert any(b'"LeaderAndIsr"' in body or b"leader_epoch" in body for _, body in one_pass[0])


# --- UpdateMetadata states built ahead ---------------------------------------------------------------


def _um_states(h: Harness) -> list[Any]:
    return [msgspec.json.encode(s.request.partition_states) for s in h.transport.sent if s.kind == "UpdateMetadata"]


def _send_after(h: Harness, change: Callable[[Harness, list[int]], None]) -> list[Any]:
    """Add LeaderAndIsr for every partition, build their UpdateMetadata states ahead, apply ``change``,
    send; the UpdateMetadata states sent."""
    ctx, batch = h.ctx, h.partition_batch
    ids = ctx.partition_ids(ctx.all_partitions())
    batch.new_batch()
    table = ctx.table
    entries = []
    for pid in ids:
        info = table.leadership[pid]
        assignment = table.assignment[pid]
        assert info is not None and assignment is not None
        entries.append((assignment.replicas, pid, info, assignment))
    batch.add_leader_and_isr_requests_by_id(entries, is_new=False)
    batch.prebuild_update_metadata(ids)
    change(h, ids)
    h.transport.clear()
    batch.send_requests_to_brokers(ctx.epoch)
    return _um_states(h)


def _built_at_send(change: Callable[[Harness, list[int]], None]) -> list[Any]:
    h = _cluster(3)
    ctx, batch = h.ctx, h.partition_batch
    ids = ctx.partition_ids(ctx.all_partitions())
    batch.new_batch()
    table = ctx.table
    entries = []
    for pid in ids:
        info = table.leadership[pid]
        assignment = table.assignment[pid]
        assert info is not None and assignment is not None
        entries.append((assignment.replicas, pid, info, assignment))
    batch.add_leader_and_isr_requests_by_id(entries, is_new=False)
    change(h, ids)
    h.transport.clear()
    batch.send_requests_to_brokers(ctx.epoch)
    return _um_states(h)


def _nothing(h: Harness, ids: list[int]) -> None:
    pass


def _new_leadership(h: Harness, ids: list[int]) -> None:
    """Some partitions get a newer leadership after their states were built."""
    for pid in ids[::5]:
        info = h.ctx.table.leadership[pid]
        assert info is not None
        lai = info.leader_and_isr
        newer = LeaderAndIsr(lai.leader, lai.leader_epoch + 1, lai.isr, lai.zk_version + 1)
        h.ctx.put_leadership_by_id([(pid, LeaderIsrAndControllerEpoch(newer, info.controller_epoch))])


def _broker_gone(h: Harness, ids: list[int]) -> None:
    """A broker leaves: its replicas are offline in every state built after."""
    h.ctx.remove_live_brokers([5])


def _topic_deleted(h: Harness, ids: list[int]) -> None:
    """A topic is queued for deletion: its partitions go out with leader -2."""
    h.ctx.queue_topic_deletion(["t1"])


@pytest.mark.parametrize("change", [_nothing, _new_leadership, _broker_gone, _topic_deleted], ids=lambda f: f.__name__)
def test_update_metadata_built_ahead_is_what_the_send_would_build(change: Callable[[Harness, list[int]], None]) -> None:
    h = _cluster(3)
    ahead = _send_after(h, change)
    assert ahead, "no UpdateMetadata was sent"
    assert ahead == _built_at_send(change)


def test_a_slice_whose_taking_fails_is_not_taken_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """If caching a slice raises (a bug, not a ZooKeeper error), the election fails as before and no
    result is recorded twice: the rest is taken once, the failed slice not again."""
    h = _cluster(1)
    monkeypatch.setattr(h.psm, "stream_slice", 16)
    calls = []
    put = h.ctx.put_leadership_by_id

    def failing_second(infos: Any) -> None:
        calls.append(len(infos))
        if len(calls) == 2:
            raise RuntimeError("cache broke")
        put(infos)

    monkeypatch.setattr(h.ctx, "put_leadership_by_id", failing_second)
    _broker_failure(h, 2)
    h.log.flush()
    elections = [r["entity"] for r in h.sink.records if r["kind"] == "election"]
    assert len(calls) == 3 and calls[1] == 16  # the failed slice, then only what remained
    assert len(elections) == len(set(elections)) == 32 + calls[2]
