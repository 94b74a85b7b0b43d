"""The partition state machine decides each election *shape* once and reuses the decision for the
other partitions of that shape; every outcome must still be exactly what the pure strategy function
of ``controller_core.election`` gives for that partition on its own.

Random clusters with many partitions per shape (few brokers, short replica lists) and different
leader epochs and zk versions per partition, so a reused decision that kept another partition's
epoch or version would show; odd seeds add a failed log directory, so online sets differ per
partition.
"""

from __future__ import annotations

import random

import pytest

from controller_core.election import (
    ControlledShutdownStrategy,
    ElectionStrategy,
    OfflineStrategy,
    PreferredStrategy,
    ReassignStrategy,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
)
from controller_core.model import LeaderAndIsr, TopicPartition
from scripts.support.fakes import make_harness

pytestmark = pytest.mark.unit

BROKERS = (1, 2, 3, 4, 5)


def _cluster(seed: int) -> tuple[object, list[tuple[TopicPartition, LeaderAndIsr]]]:
    rng = random.Random(seed)
    h = make_harness(brokers=BROKERS)
    candidates: list[tuple[TopicPartition, LeaderAndIsr]] = []
    for i in range(600):
        tp = TopicPartition(f"t{i % 7}", i)
        replicas = rng.sample(BROKERS, rng.choice((1, 2, 3)))
        isr = [r for r in replicas if rng.random() < 0.7] or replicas[:1]
        adding = replicas[-1:] if len(replicas) == 3 and rng.random() < 0.2 else []
        h.seed_partition(tp, replicas, leader=isr[0], isr=isr, leader_epoch=rng.randrange(50), adding=adding)
        for _ in range(rng.randrange(3)):  # different zk versions
            h.store.leader_isr_change(tp, tuple(isr))
        state = h.store.state(tp)
        assert state is not None
        candidates.append((tp, state.leader_and_isr))
    h.ctx.remove_live_brokers([rng.choice(BROKERS)])
    h.ctx.add_shutting_down_broker(rng.choice(BROKERS))
    if seed % 2:  # a failed log directory: online sets differ per partition
        h.ctx.set_replicas_on_offline_dirs(rng.choice(BROKERS), [tp for tp, _ in candidates[::3]])
    return h, candidates


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize(
    "strategy",
    [
        OfflineStrategy(allow_unclean=False),
        OfflineStrategy(allow_unclean=True),
        ReassignStrategy(),
        PreferredStrategy(),
        ControlledShutdownStrategy(),
    ],
    ids=lambda s: f"{s.name}-{getattr(s, 'allow_unclean', '')}",
)
def test_each_outcome_is_the_pure_functions_answer_for_that_partition(seed: int, strategy: ElectionStrategy) -> None:
    h, candidates = _cluster(seed)
    ctx = h.ctx  # type: ignore[attr-defined]
    # The state machine decides on the context's partition numbers.
    ids = ctx.partition_ids(tp for tp, _ in candidates)
    numbered = [(pid, current) for pid, (_, current) in zip(ids, candidates, strict=True)]
    by_number = h.psm._run_strategy(numbered, strategy)  # type: ignore[attr-defined]
    outcomes = {ctx.table.tps[pid]: outcome for pid, outcome in by_number.items()}
    assert set(outcomes) == {tp for tp, _ in candidates}
    shutting_down = ctx.shutting_down_broker_ids
    for tp, current in candidates:
        assignment = ctx.partition_full_replica_assignment(tp)
        online = ctx.online_replica_set(tp)
        match strategy:
            case OfflineStrategy(allow_unclean=allow_unclean):
                expected = elect_offline(current, assignment.replicas, online, allow_unclean)
            case ReassignStrategy():
                expected = elect_reassign(current, assignment, online)
            case PreferredStrategy():
                expected = elect_preferred(current, assignment.replicas, online)
            case ControlledShutdownStrategy():
                expected = elect_controlled_shutdown(
                    current, assignment.replicas, ctx.online_replica_set(tp, True), shutting_down
                )
        assert outcomes[tp] == expected, tp
    decided = [o for o in outcomes.values() if o.leader_and_isr is not None]
    assert len(decided) > 100  # the shapes were shared by many partitions, and most elections succeeded
