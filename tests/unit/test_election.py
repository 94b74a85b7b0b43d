"""Leader election is pure: every rule of reference §5 (and checklist §15) as a table."""

from __future__ import annotations

import dataclasses

import pytest

from controller_core.election import (
    BrokerView,
    ControlledShutdownStrategy,
    ElectionOutcome,
    OfflineStrategy,
    PreferredStrategy,
    ReassignStrategy,
    controlled_shutdown_partition_leader_election,
    elect,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
    offline_partition_leader_election,
    preferred_replica_partition_leader_election,
    reassign_partition_leader_election,
)
from controller_core.model import LeaderAndIsr, ReplicaAssignment

pytestmark = pytest.mark.unit


# --- selection algorithms ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "expected"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, False, 1),
        ([1, 2, 3], [2, 3], {1, 2, 3}, False, 2),
        ([1, 2, 3], [3, 2], {1, 2, 3}, False, 2),  # assignment order wins over ISR order
        ([1, 2, 3], [1, 2], {2, 3}, False, 2),  # first live in-sync replica
        ([1, 2, 3], [1], {2, 3}, False, None),  # only ISR member is dead, unclean off
        ([1, 2, 3], [1], {2, 3}, True, 2),  # unclean: first live assigned replica
        ([1, 2, 3], [1], {1, 3}, True, 1),  # a clean choice is preferred even when unclean is allowed
        ([2, 4], [2], {4}, False, None),
        ([2, 4], [2], {4}, True, 4),
        ([1, 2], [1, 2], set(), True, None),  # nobody alive
        ([1, 2], [3], {3}, True, None),  # ISR/live outside the assignment never qualify
        ([], [], set(), True, None),
    ],
)
def test_offline_selection(
    assignment: list[int], isr: list[int], live: set[int], unclean: bool, expected: int | None
) -> None:
    assert offline_partition_leader_election(assignment, isr, live, unclean) == expected


@pytest.mark.parametrize(
    ("targets", "isr", "live", "expected"),
    [
        ([4, 5, 6], [1, 2, 3, 4, 5, 6], {1, 2, 3, 4, 5, 6}, 4),
        ([4, 5, 6], [1, 2, 3, 5, 6], {1, 2, 3, 4, 5, 6}, 5),
        ([4, 5, 6], [4, 5, 6], {5, 6}, 5),
        ([4, 5, 6], [1, 2, 3], {1, 2, 3, 4, 5, 6}, None),  # never unclean
        ([4, 5, 6], [4, 5, 6], set(), None),
        ([], [1], {1}, None),
    ],
)
def test_reassign_selection(targets: list[int], isr: list[int], live: set[int], expected: int | None) -> None:
    assert reassign_partition_leader_election(targets, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "expected"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, 1),
        ([1, 2, 3], [2, 3], {1, 2, 3}, None),  # preferred not in sync: no fallback
        ([1, 2, 3], [1, 2, 3], {2, 3}, None),  # preferred dead: no fallback
        ([], [], set(), None),
    ],
)
def test_preferred_selection(assignment: list[int], isr: list[int], live: set[int], expected: int | None) -> None:
    assert preferred_replica_partition_leader_election(assignment, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "shutting_down", "expected"),
    [
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}, 2),
        ([1, 2, 3], [1, 3], {1, 2, 3}, {1}, 3),
        ([1, 2, 3], [1, 2, 3], {1, 3}, {1}, 3),  # 2 is dead
        ([1, 2, 3], [1], {1, 2, 3}, {1}, None),  # only the shutting-down broker is in sync
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1, 2, 3}, None),
        ([1, 2, 3], [1, 2, 3], {1, 2, 3}, set(), 1),
    ],
)
def test_controlled_shutdown_selection(
    assignment: list[int], isr: list[int], live: set[int], shutting_down: set[int], expected: int | None
) -> None:
    assert controlled_shutdown_partition_leader_election(assignment, isr, live, shutting_down) == expected


# --- strategies: new state, epoch and recipients ----------------------------------------------------


def lai(leader: int, epoch: int, isr: tuple[int, ...], zk_version: int = 7) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, zk_version)


@pytest.mark.parametrize(
    ("current", "assignment", "online", "unclean", "expected"),
    [
        # clean: ISR keeps its online members in ISR order, epoch +1, zk version is the one read
        (lai(1, 5, (1, 2, 3)), [1, 2, 3], {2, 3}, False, ElectionOutcome(lai(2, 6, (2, 3)), (2, 3))),
        (lai(1, 5, (3, 1, 2)), [1, 2, 3], {2, 3}, False, ElectionOutcome(lai(2, 6, (3, 2)), (2, 3))),
        # unclean: the new leader alone forms the ISR
        (lai(1, 5, (1,)), [1, 2, 3], {2, 3}, True, ElectionOutcome(lai(2, 6, (2,)), (2, 3), unclean=True)),
        # no eligible leader: recipients are still the live replicas
        (lai(1, 5, (1,)), [1, 2, 3], {2, 3}, False, ElectionOutcome(None, (2, 3))),
        (lai(-1, 5, (1,)), [1, 2, 3], set(), True, ElectionOutcome(None, ())),
        # a shutting-down broker is not "online" for this strategy: dropped from ISR and recipients
        (lai(1, 5, (1, 2, 3)), [1, 2, 3], {1, 3}, False, ElectionOutcome(lai(1, 6, (1, 3)), (1, 3))),
    ],
)
def test_offline_strategy(
    current: LeaderAndIsr, assignment: list[int], online: set[int], unclean: bool, expected: ElectionOutcome
) -> None:
    assert elect_offline(current, assignment, online, unclean) == expected


REASSIGNING = ReplicaAssignment.of([4, 5, 6, 1, 2, 3], adding=[4, 5, 6], removing=[1, 2, 3])


@pytest.mark.parametrize(
    ("current", "online", "expected"),
    [
        # ISR unchanged, epoch +1; recipients are all target replicas
        (lai(1, 3, (1, 2, 3, 4, 5, 6)), {1, 2, 3, 4, 5, 6}, ElectionOutcome(lai(4, 4, (1, 2, 3, 4, 5, 6)), (4, 5, 6))),
        # a dead target still receives (dropped at send time), and is skipped as leader
        (lai(1, 3, (1, 2, 3, 4, 5, 6)), {1, 2, 3, 5, 6}, ElectionOutcome(lai(5, 4, (1, 2, 3, 4, 5, 6)), (4, 5, 6))),
        # no target in sync: no leader, never unclean
        (lai(1, 3, (1, 2, 3)), {1, 2, 3, 4, 5, 6}, ElectionOutcome(None, (4, 5, 6))),
    ],
)
def test_reassign_strategy(current: LeaderAndIsr, online: set[int], expected: ElectionOutcome) -> None:
    assert elect_reassign(current, REASSIGNING, online) == expected


@pytest.mark.parametrize(
    ("current", "online", "expected"),
    [
        (lai(2, 3, (1, 2, 3)), {1, 2, 3}, ElectionOutcome(lai(1, 4, (1, 2, 3)), (1, 2, 3))),
        # re-electing a leader that already is preferred is allowed here and bumps the epoch (§15.11)
        (lai(1, 3, (1, 2, 3)), {1, 2, 3}, ElectionOutcome(lai(1, 4, (1, 2, 3)), (1, 2, 3))),
        (lai(2, 3, (2, 3)), {1, 2, 3}, ElectionOutcome(None, (1, 2, 3))),
        (lai(2, 3, (1, 2, 3)), {2, 3}, ElectionOutcome(None, (1, 2, 3))),
    ],
)
def test_preferred_strategy(current: LeaderAndIsr, online: set[int], expected: ElectionOutcome) -> None:
    assert elect_preferred(current, [1, 2, 3], online) == expected


@pytest.mark.parametrize(
    ("current", "online_or_sd", "shutting_down", "expected"),
    [
        # the shutting-down broker (1) leaves the ISR but still receives the LeaderAndIsr (§5.4)
        (lai(1, 3, (1, 2, 3)), {1, 2, 3}, {1}, ElectionOutcome(lai(2, 4, (2, 3)), (1, 2, 3))),
        # every shutting-down broker leaves the ISR
        (lai(1, 3, (1, 2, 3)), {1, 2, 3}, {1, 3}, ElectionOutcome(lai(2, 4, (2,)), (1, 2, 3))),
        # dead brokers are neither candidates nor recipients
        (lai(1, 3, (1, 2, 3)), {1, 3}, {1}, ElectionOutcome(lai(3, 4, (2, 3)), (1, 3))),
        # nobody else in sync
        (lai(1, 3, (1,)), {1, 2, 3}, {1}, ElectionOutcome(None, (1, 2, 3))),
    ],
)
def test_controlled_shutdown_strategy(
    current: LeaderAndIsr, online_or_sd: set[int], shutting_down: set[int], expected: ElectionOutcome
) -> None:
    assert elect_controlled_shutdown(current, [1, 2, 3], online_or_sd, shutting_down) == expected


def test_every_successful_strategy_bumps_the_epoch_by_exactly_one() -> None:
    current = lai(1, 41, (1, 2, 3))
    view = BrokerView(online={2, 3}, online_or_shutting_down={1, 2, 3}, shutting_down={1})
    assignment = ReplicaAssignment.of([2, 3, 1])
    for strategy in (OfflineStrategy(), ReassignStrategy(), PreferredStrategy(), ControlledShutdownStrategy()):
        outcome = elect(strategy, current, assignment, view)
        assert outcome.leader_and_isr is not None, strategy
        assert outcome.leader_and_isr.leader_epoch == 42, strategy
        assert outcome.leader_and_isr.zk_version == current.zk_version, strategy


def test_elect_uses_the_topic_flag_over_the_strategy_flag() -> None:
    current = lai(1, 1, (1,))
    view = BrokerView(online={2}, online_or_shutting_down={2}, shutting_down=set())
    assignment = ReplicaAssignment.of([1, 2])
    assert elect(OfflineStrategy(allow_unclean=True), current, assignment, view).leader_and_isr == lai(2, 2, (2,))
    assert elect(OfflineStrategy(allow_unclean=False), current, assignment, view).leader_and_isr is None
    assert elect(OfflineStrategy(), current, assignment, view, unclean_leader_election_enabled=True).unclean
    assert (
        elect(OfflineStrategy(True), current, assignment, view, unclean_leader_election_enabled=False).leader_and_isr
        is None
    )


def test_elect_controlled_shutdown_uses_the_shutting_down_view() -> None:
    view = BrokerView(online={2, 3}, online_or_shutting_down={1, 2, 3}, shutting_down={1})
    outcome = elect(ControlledShutdownStrategy(), lai(1, 0, (1, 2, 3)), ReplicaAssignment.of([1, 2, 3]), view)
    assert outcome == ElectionOutcome(lai(2, 1, (2, 3)), (1, 2, 3))


def test_strategies_are_frozen_values_with_names() -> None:
    assert [s.name for s in (OfflineStrategy(True), ReassignStrategy(), PreferredStrategy())] == [
        "offline",
        "reassign",
        "preferred",
    ]
    assert ControlledShutdownStrategy().name == "controlled_shutdown"
    assert OfflineStrategy(True) == OfflineStrategy(allow_unclean=True)
    assert OfflineStrategy() != OfflineStrategy(True)
    assert len({OfflineStrategy(), OfflineStrategy(False), PreferredStrategy()}) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        OfflineStrategy().allow_unclean = True  # type: ignore[misc]
