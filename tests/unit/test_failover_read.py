"""A cold failover's read with the start-ups' work done as each batch lands (``failover_read``): on
the same cluster the failover then sends the bytes, writes the znodes, records the summaries and
holds the context that reading everything first and running ``ReplicaStateMachine.startup`` and
``PartitionStateMachine.startup`` afterwards gives. In memory; the controller's own cold failovers
against ZooKeeper: tests/integration/test_controller_zk.py and the standby takeover tests."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from controller_core.context import ControllerContext
from controller_core.failover_read import read_partition_states
from controller_core.model import BrokerRegistration, EndPoint, ReplicaAssignment, TopicPartition
from controller_core.protocol.messages import encode_control_request
from controller_core.standby.view import ClusterView
from controller_core.standby.warm_context import adopt, start_partition_state_machine, start_replica_state_machine
from controller_core.zk import paths
from controller_core.zk.paths import under_chroot
from controller_core.zk.store.topics import LeadershipBatch, _StatePaths
from scripts.support.fakes import Harness, make_harness
from tests.support.contexts import context_fields, load_brokers_topics_and_assignments
from tests.unit.test_warm_context import _Cluster, _ViewStore


class _BatchedStore(_ViewStore):
    """``_ViewStore`` with the streamed state read, ``size`` partitions a batch (None where missing)."""

    def __init__(self, view: ClusterView, size: int) -> None:
        super().__init__(view)
        self.size = size

    def iter_partition_leadership(
        self, partitions: Sequence[TopicPartition], *, distinct: bool = False
    ) -> Iterator[LeadershipBatch]:
        found = self.get_partition_leadership(partitions)
        unique = list(dict.fromkeys(partitions))
        assert not distinct or len(unique) == len(partitions)
        for start in range(0, len(unique), self.size):
            tps = unique[start : start + self.size]
            states = [found.get(tp) for tp in tps]
            yield LeadershipBatch(tps, states, None not in states)


def _cluster(seed: int, live: Sequence[int] | None = None) -> ClusterView:
    rng = random.Random(seed)
    cluster = _Cluster(rng)
    view = ClusterView()
    for _ in range(120):
        view.apply(*cluster.change())
    if live is not None:
        view.brokers = {b: BrokerRegistration(b, (EndPoint("PLAINTEXT", "h", 9000 + b),)) for b in live}
    return view


def _loaded(view: ClusterView) -> tuple[ControllerContext, _BatchedStore]:
    """Brokers, topics and assignments loaded as ``Controller._load_controller_context`` loads them."""
    store = _BatchedStore(view, size=3)
    ctx = ControllerContext(1)
    load_brokers_topics_and_assignments(ctx, store, view.topics)  # type: ignore[arg-type]
    return ctx, store


def _harness(view: ClusterView) -> Harness:
    h = make_harness(brokers=(), decide_from_cache=True)
    for states in view.states.values():
        for tp, state in states.items():
            lai = state.leader_and_isr
            h.store.seed_state(tp, lai.leader, lai.isr, leader_epoch=lai.leader_epoch, version=lai.zk_version)
    for topic in view.topics:
        h.store.add_topic(topic)
    return h


def _failover(view: ClusterView, *, staged: bool, deleting: frozenset[str] = frozenset()) -> tuple[Any, ...]:
    """The read and both start-ups, the staged way (as the controller's cold path) or the old way;
    what was sent (bytes, in order), written, recorded and held afterwards."""
    ctx, store = _loaded(view)
    cold = None
    if staged:
        cold = read_partition_states(ctx, store)  # type: ignore[arg-type]
        assert cold is not None and cold.still_valid(ctx)
    else:
        ctx.load_partition_leadership_info(store.get_partition_leadership(ctx.all_partitions()))
    h = _harness(view)
    adopt(h.ctx, ctx)
    if deleting:  # decided after the read, before the start-ups (TopicDeletionManager.init)
        h.ctx.queue_topic_deletion(set(deleting))
    if cold is not None:
        start_replica_state_machine(h.rsm, h.replica_batch, h.ctx, h.log, cold.kept)
        start_partition_state_machine(h.psm, h.ctx, h.log)
    else:
        h.rsm.startup()
        h.psm.startup()
    sent = [(s.kind, s.broker_id, encode_control_request(s.request)) for s in h.transport.sent]
    records = [
        (r["kind"], r.get("machine"), r.get("counts")) for r in h.sink.records if r["kind"] == "states_initialized"
    ]
    return context_fields(h.ctx), sent, dict(h.store.znodes), records


@pytest.mark.parametrize("seed", range(10))
def test_the_staged_start_up_sends_and_holds_what_the_start_ups_after_the_read_do(seed: int) -> None:
    view = _cluster(seed)
    old, new = _failover(view, staged=False), _failover(view, staged=True)
    fields, sent, znodes, records = new
    assert old[1], "nothing was sent: the cluster has no online replica"
    for name, value in old[0].items():
        assert fields[name] == value, name
    assert sent == old[1]
    assert znodes == old[2]
    assert records == old[3] and len(records) == 2


@pytest.mark.parametrize("seed", range(4))
def test_topics_queued_for_deletion_after_the_read_are_sent_as_the_start_up_sends_them(seed: int) -> None:
    view = _cluster(50 + seed, live=(1, 2, 3, 4))  # broker 5 dead: offline replicas, ISR shrinks
    deleting = frozenset(sorted(view.topics)[:1])
    old = _failover(view, staged=False, deleting=deleting)
    new = _failover(view, staged=True, deleting=deleting)
    assert new[1] == old[1] and new[2] == old[2] and new[3] == old[3]
    for name, value in old[0].items():
        assert new[0][name] == value, name


def test_a_changed_live_broker_set_after_the_read_voids_what_was_built() -> None:
    view = _cluster(7)
    ctx, store = _loaded(view)
    cold = read_partition_states(ctx, store)  # type: ignore[arg-type]
    assert cold is not None and cold.still_valid(ctx)
    ctx.remove_live_brokers([min(ctx.live_broker_ids)])
    assert not cold.still_valid(ctx)


@pytest.mark.parametrize("chroot", [None, "/kafka/prod"])
def test_state_paths_encode_a_run_as_each_path_is_made_under_the_chroot(chroot: str | None) -> None:
    partitions = [TopicPartition(f"t{i % 3}", i) for i in range(40)]
    state_paths = _StatePaths(partitions)
    full = under_chroot(chroot)
    assert state_paths.encoded(5, 33, full) == [
        full(paths.partition_state_path(tp)).encode() for tp in partitions[5:33]
    ]
    assert list(state_paths[5:33]) == [paths.partition_state_path(tp) for tp in partitions[5:33]]
    assert state_paths[5:33].encoded(0, 2, full) == state_paths.encoded(5, 7, full)  # a slice encodes too
    with pytest.raises(ValueError, match="topic name"):
        _StatePaths([TopicPartition("..", 0)]).encoded(0, 1, full)


@pytest.mark.parametrize("seed", range(5))
def test_a_new_topics_assignment_loads_as_partition_by_partition_updates_do(seed: int) -> None:
    """``load_topic_assignment`` of topics none of whose partitions has a row (a failover's read, in
    one block) gives the table that updating each partition's assignment gives."""
    rng = random.Random(seed)
    shared = {r: ReplicaAssignment(r) for r in [(1, 2, 3), (2, 3, 4), (4, 1), (5,), ()]}
    topics = {
        f"t{t}": {TopicPartition(f"t{t}", p): rng.choice(list(shared.values())) for p in range(rng.randint(1, 30))}
        for t in range(8)
    }
    bulk, single = ControllerContext(1), ControllerContext(1)
    for topic, assignments in topics.items():
        bulk.load_topic_assignment(topic, assignments)
        for tp, assignment in assignments.items():
            single.update_partition_full_replica_assignment(tp, assignment)
    fields, expected = context_fields(bulk), context_fields(single)
    for name, value in expected.items():
        assert fields[name] == value, name
    assert bulk.table.by_broker and bulk.table.by_broker == single.table.by_broker
