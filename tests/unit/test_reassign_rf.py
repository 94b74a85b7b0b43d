"""Replication-factor plans: fewest moves, rack-aware, preferred leaders kept; bad factors refused."""

from __future__ import annotations

import pytest

from controller_core.model import TopicPartition
from controller_core.reassign_plan import Proposal
from dashboard.actions.reassign_rf import check_factor, check_racks, plan

RACKS = {1: "a", 2: "b", 3: "a", 4: "b", 5: "a"}


def tps(**assignments: list[int]) -> dict[TopicPartition, list[int]]:
    return {TopicPartition("t", int(k[1:])): v for k, v in assignments.items()}


def proposed(proposal: Proposal) -> dict[int, tuple[int, ...]]:
    return {m.partition: m.proposed for m in proposal.moves}


def test_raising_appends_one_replica_on_the_other_rack_to_each_partition() -> None:
    # By hand, partition by partition (loads start 1,1,1,1,0 for brokers 1-5; the rule: a rack the
    # partition lacks, then the lowest load counting what is already planned, then the lowest id):
    # p0 [1] (rack a): 2 and 4 are rack b at load 1 -> 2.   p1 [2] (b): 1, 3, 5 are rack a; 5 has load 0.
    # p2 [3] (a): 2 (now load 2) or 4 (load 1) -> 4.        p3 [4] (b): 1, 3, 5 all at load 1 -> 1.
    proposal = plan(tps(p0=[1], p1=[2], p2=[3], p3=[4]), 2, RACKS)
    assert proposed(proposal) == {0: (1, 2), 1: (2, 5), 2: (3, 4), 3: (4, 1)}
    assert all(m.removing == () and len(m.adding) == 1 for m in proposal.moves)
    assert proposal.moved_replicas == 4  # exactly one new replica per partition
    assert proposal.replica_counts() == {1: 2, 2: 2, 3: 1, 4: 2, 5: 1}


def test_raising_spreads_over_racks_before_it_balances_load() -> None:
    # Rack b has one broker (4): every partition raised to 3 over racks a, b, c takes it, though its
    # load then runs ahead of the others'. Loads start 1,1,0,1,0,0 for brokers 1-6.
    # p0 [1] (a): c first (5 and 6 at load 0 -> 5), then b (4).   p1 [2] (a): c (6 at load 0), then b (4).
    # p2 [4] (b): a (3 at load 0), then c (5 and 6 both at load 1 -> 5).
    racks = {1: "a", 2: "a", 3: "a", 4: "b", 5: "c", 6: "c"}
    proposal = plan(tps(p0=[1], p1=[2], p2=[4]), 3, racks)
    assert proposed(proposal) == {0: (1, 5, 4), 1: (2, 6, 4), 2: (4, 3, 5)}
    assert all(sorted(racks[b] for b in m.proposed) == ["a", "b", "c"] for m in proposal.moves)
    assert proposal.replica_counts()[4] == 3


def test_raising_past_the_racks_fills_with_the_least_loaded() -> None:
    # Two racks, factor 3: after one replica on each rack the third goes to the least loaded broker.
    # Loads start 1,0,0,0,0. p0 [1] (a): b (2, 4 at 0 -> 2), then any (3, 4, 5 at 0 -> 3).
    proposal = plan(tps(p0=[1]), 3, RACKS)
    assert proposed(proposal) == {0: (1, 2, 3)}


def test_lowering_keeps_the_leader_then_a_new_rack_then_the_least_loaded() -> None:
    # Loads start 3,3,3,1,2 for brokers 1-5 and fall as replicas are dropped, partition by partition.
    # To 2: p0 [1, 3, 5, 2] (racks a, a, a, b) keeps 1, then 2, the only one on rack b (3 -> 2, 5 -> 1).
    # p1 [2, 4, 1, 3] (b, b, a, a) keeps 2, then rack a: 3 (load 2) before 1 (load 3) (4 -> 0, 1 -> 2).
    # p2 [1, 3, 5, 2] keeps 1 and 2 as p0 did.
    current = tps(p0=[1, 3, 5, 2], p1=[2, 4, 1, 3], p2=[1, 3, 5, 2])
    proposal = plan(current, 2, RACKS)
    assert proposed(proposal) == {0: (1, 2), 1: (2, 3), 2: (1, 2)}
    assert all(m.adding == () for m in proposal.moves) and proposal.moved_replicas == 0
    # To 3, afresh: p0 keeps 1, 2, then 5 (load 2) over 3 (load 3) (3 -> 2). p1 keeps 2, 3 (rack a,
    # load 2), then 4 (load 1) over 1 (load 3) (1 -> 2). p2 keeps 1, 2, then 3 and 5 both at load 2:
    # the current order decides, 3. The kept replicas stay in their current order.
    assert proposed(plan(current, 3, RACKS)) == {0: (1, 5, 2), 1: (2, 4, 3), 2: (1, 3, 2)}


def test_lowering_drops_replicas_on_dead_brokers_first() -> None:
    # Broker 9 is not live: it goes before a live replica whatever its rack or place in the list.
    proposal = plan(tps(p0=[1, 9, 4, 3]), 2, RACKS)
    assert proposed(proposal) == {0: (1, 4)}
    assert proposed(plan(tps(p0=[1, 9, 4, 3]), 3, RACKS)) == {0: (1, 4, 3)}


def test_an_unchanged_factor_moves_nothing() -> None:
    proposal = plan(tps(p0=[1, 2]), 2, RACKS)
    assert proposal.changed == [] and proposal.request()["partitions"] == []


@pytest.mark.parametrize(
    ("value", "message"),
    [(0, "at least 1"), (-1, "at least 1"), (6, "more than the 5 live"), ("x", "whole number"), (2.5, "whole number"),
     (True, "whole number")],
)  # fmt: skip
def test_bad_factors_are_refused(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_factor(value, 5)
    assert check_factor("3", 5) == 3


def test_a_mix_of_racked_and_unracked_brokers_is_refused() -> None:
    with pytest.raises(ValueError, match="no rack"):
        check_racks({1: "a", 2: None})
    check_racks({1: None, 2: None})
    proposal = plan(tps(p0=[1]), 3, {1: None, 2: None, 3: None, 4: None})
    assert proposal.moves[0].proposed[0] == 1 and len(set(proposal.moves[0].proposed)) == 3
