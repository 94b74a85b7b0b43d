"""Impact preview: broker failure and controlled shutdown, decided by the controller's election code."""

from __future__ import annotations

import pytest

from controller_core.impact import FAILURE, SHUTDOWN, PartitionSnapshot, brokers_in_rack, compute_impact
from controller_core.model import TopicPartition as TP

S = PartitionSnapshot


def by_partition(rows: list) -> dict[str, tuple[int | None, tuple[int, ...]]]:  # type: ignore[type-arg]
    return {f"{r.topic}-{r.partition}": (r.new_leader, r.new_isr) for r in rows}


STATE = {
    TP("a", 0): S((3, 1, 2), leader=3, isr=(3, 1, 2), min_isr=2),  # leader moves to 1
    TP("a", 1): S((1, 3), leader=1, isr=(1, 3), min_isr=2),  # follower: ISR shrinks to [1], under min ISR
    TP("a", 2): S((3, 2), leader=3, isr=(3,)),  # only 3 in sync: offline on failure
    TP("a", 3): S((1, 2), leader=1, isr=(1, 2)),  # not hosted on 3: untouched
    TP("b", 0): S((3,), leader=3, isr=(3,)),  # single replica
    TP("u", 0): S((3, 2), leader=3, isr=(3,), unclean=True),  # unclean allowed: 2 takes over
}
LIVE = (1, 2, 3)


def test_failure_moves_leaders_with_the_offline_strategy() -> None:
    impact = compute_impact(STATE, LIVE, [3], FAILURE)
    assert by_partition(impact.leader_moves) == {"a-0": (1, (1, 2)), "u-0": (2, (2,))}
    assert [p.unclean for p in impact.leader_moves] == [False, True]
    assert by_partition(impact.offline) == {"a-2": (None, ()), "b-0": (None, ())}
    assert by_partition(impact.isr_shrinks) == {"a-1": (1, (1,))}
    assert [f"{p.topic}-{p.partition}" for p in impact.under_min_isr] == ["a-1"]
    assert impact.leaders_gained() == {1: 1, 2: 1}
    assert impact.summary()["partitions_hosted"] == 5 and impact.partitions_total == 6


def test_controlled_shutdown_never_elects_unclean_and_skips_single_replicas() -> None:
    impact = compute_impact(STATE, LIVE, [3], SHUTDOWN)
    assert by_partition(impact.leader_moves) == {"a-0": (1, (1, 2))}
    # a-2 and u-0 have no other in-sync replica; b-0 has one replica: led by 3 until it stops
    assert {f"{p.topic}-{p.partition}": p.effect for p in impact.offline} == {
        "a-2": "stays_until_stop", "b-0": "stays_until_stop", "u-0": "stays_until_stop",
    }  # fmt: skip
    assert by_partition(impact.isr_shrinks) == {"a-1": (1, (1,))}


def test_rack_failure_takes_every_broker_of_the_rack() -> None:
    racks = {1: "a", 2: "b", 3: "b"}
    down = brokers_in_rack(racks, "b")
    assert down == (2, 3)
    impact = compute_impact(STATE, LIVE, down, FAILURE)
    assert by_partition(impact.leader_moves) == {"a-0": (1, (1,))}
    assert "a-0" in {f"{p.topic}-{p.partition}" for p in impact.under_min_isr}
    assert {f"{p.topic}-{p.partition}" for p in impact.offline} == {"a-2", "b-0", "u-0"}
    assert impact.leaders_gained() == {1: 1}


def test_already_offline_and_already_under_min_isr_are_not_new_losses() -> None:
    state = {
        TP("x", 0): S((4, 3), leader=-1, isr=(4,)),
        TP("x", 1): S((1, 3), leader=1, isr=(1,), min_isr=2),
    }
    impact = compute_impact(state, (1, 3), [3], FAILURE)
    assert by_partition(impact.already_offline) == {"x-0": (None, (4,))}
    assert impact.offline == [] and impact.under_min_isr == []
    assert impact.as_dict()["summary"]["already_offline"] == 1


@pytest.mark.parametrize(("brokers", "mode", "message"), [([], FAILURE, "at least one"), ([3], "crash", "mode")])
def test_bad_input(brokers: list[int], mode: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        compute_impact(STATE, LIVE, brokers, mode)
