"""Replication-factor plans: fewest moves, rack-aware, preferred leaders kept; bad factors refused."""

from __future__ import annotations

import pytest

from controller_core.model import TopicPartition
from dashboard.actions.reassign_rf import check_factor, check_racks, plan

RACKS = {1: "a", 2: "b", 3: "a", 4: "b", 5: "a"}


def tps(**assignments: list[int]) -> dict[TopicPartition, list[int]]:
    return {TopicPartition("t", int(k[1:])): v for k, v in assignments.items()}


def test_raising_appends_replicas_on_new_racks_and_keeps_the_leaders() -> None:
    proposal = plan(tps(p0=[1], p1=[2], p2=[3], p3=[4]), 2, RACKS)
    for move in proposal.moves:
        assert move.proposed[0] == move.current[0]  # preferred leader kept
        assert len(move.proposed) == 2 and move.removing == ()
        assert {RACKS[b] for b in move.proposed} == {"a", "b"}  # one replica per rack
    assert proposal.moved_replicas == 4  # exactly one new replica per partition
    counts = proposal.replica_counts()
    assert max(counts.values()) - min(counts.values()) <= 1


def test_lowering_removes_only_and_keeps_rack_spread_and_the_leader() -> None:
    proposal = plan(tps(p0=[1, 3, 2], p1=[2, 4, 1]), 2, RACKS)
    p0, p1 = proposal.moves
    assert p0.proposed == (1, 2) and p0.adding == ()  # 3 shares rack a with the leader
    assert p1.proposed == (2, 1) and p1.adding == ()
    assert proposal.moved_replicas == 0


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
