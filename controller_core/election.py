"""Leader election: Kafka's four selection algorithms and the strategies built on them.

Everything here is a pure function of its arguments (reference §5): no context, no ZooKeeper, no
clock. The partition state machine feeds it the state it read from ZooKeeper; the dashboard's
impact preview and the Spark "what-if" job feed it a snapshot. Because the same code decides in
all three places, a preview cannot disagree with what the controller will do.

Two layers:

1. The *selection* functions (``offline_partition_leader_election`` and friends) pick a broker id
   from a candidate list, scanning in assignment order, or return ``None``.
2. The *strategy* functions (``elect_offline`` and friends) wrap one selection with the rules the
   controller applies around it: which candidates, which new ISR, the leader epoch bump and who
   receives the LeaderAndIsr request (reference §5.1 to §5.5).

"Online" sets are sets of broker ids whose replica *of this partition* is online: registered, not
in controlled shutdown (unless the set says otherwise), and not on one of the broker's offline log
directories. ``ControllerContext.online_replica_set`` builds them.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import ClassVar, NamedTuple, TypeAlias

from controller_core.model import LeaderAndIsr, ReplicaAssignment

# --- 1. Selection algorithms -------------------------------------------------------------------


def offline_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: AbstractSet[int],
    unclean_leader_election_enabled: bool,
) -> int | None:
    """Return the first live in-sync replica, else (if allowed) the first live replica."""
    for replica in assignment:
        if replica in live_replicas and replica in isr:
            return replica
    if unclean_leader_election_enabled:
        for replica in assignment:
            if replica in live_replicas:
                return replica
    return None


def reassign_partition_leader_election(
    reassignment: Sequence[int], isr: Collection[int], live_replicas: AbstractSet[int]
) -> int | None:
    """Return the first target replica that is live and in sync; never unclean."""
    for replica in reassignment:
        if replica in live_replicas and replica in isr:
            return replica
    return None


def preferred_replica_partition_leader_election(
    assignment: Sequence[int], isr: Collection[int], live_replicas: AbstractSet[int]
) -> int | None:
    """Return the preferred replica (``assignment[0]``) if it is live and in sync, else ``None``.

    There is deliberately no fallback to other replicas: a preferred election that cannot put the
    preferred replica in charge must leave leadership where it is.
    """
    if assignment:
        preferred = assignment[0]
        if preferred in live_replicas and preferred in isr:
            return preferred
    return None


def controlled_shutdown_partition_leader_election(
    assignment: Sequence[int],
    isr: Collection[int],
    live_replicas: AbstractSet[int],
    shutting_down_brokers: AbstractSet[int],
) -> int | None:
    """Return the first replica that is live, in sync and not itself shutting down.

    ``live_replicas`` here *includes* shutting-down brokers (they are still registered); the
    candidate test excludes them explicitly.
    """
    for replica in assignment:
        if replica in live_replicas and replica in isr and replica not in shutting_down_brokers:
            return replica
    return None


# --- 2. Strategies -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OfflineStrategy:
    """Elect for offline or new-to-online partitions (broker failure/startup, unclean admin elections).

    ``allow_unclean`` forces unclean elections; when false a partition without a live in-sync
    replica still falls back to its topic's ``unclean.leader.election.enable``.
    """

    name: ClassVar[str] = "offline"
    allow_unclean: bool = False


@dataclass(frozen=True, slots=True)
class ReassignStrategy:
    """Move leadership onto the target replicas at the end of a reassignment."""

    name: ClassVar[str] = "reassign"


@dataclass(frozen=True, slots=True)
class PreferredStrategy:
    """Give leadership back to the preferred replica (admin, ZooKeeper or automatic rebalance)."""

    name: ClassVar[str] = "preferred"


@dataclass(frozen=True, slots=True)
class ControlledShutdownStrategy:
    """Move leadership off brokers that asked to shut down."""

    name: ClassVar[str] = "controlled_shutdown"


ElectionStrategy: TypeAlias = OfflineStrategy | ReassignStrategy | PreferredStrategy | ControlledShutdownStrategy


class ElectionOutcome(NamedTuple):
    """What one strategy decided for one partition.

    ``leader_and_isr`` is ``None`` when no replica is eligible. ``recipients`` are the brokers that
    get the LeaderAndIsr request when the write succeeds (brokers that are not registered are
    dropped at send time). ``unclean`` marks a leader taken from outside the ISR.
    """

    leader_and_isr: LeaderAndIsr | None
    recipients: tuple[int, ...]
    unclean: bool = False


class BrokerView(NamedTuple):
    """The liveness sets a strategy needs, as seen by one partition (for ``elect``)."""

    online: AbstractSet[int]
    online_or_shutting_down: AbstractSet[int]
    shutting_down: AbstractSet[int]


def elect_offline(
    current: LeaderAndIsr,
    assignment: Sequence[int],
    online: AbstractSet[int],
    unclean_leader_election_enabled: bool,
) -> ElectionOutcome:
    """Offline strategy (§5.1): clean election keeps the online part of the ISR, unclean resets it.

    Recipients are the live assigned replicas.
    """
    live = tuple(r for r in assignment if r in online)
    leader = offline_partition_leader_election(assignment, current.isr, online, unclean_leader_election_enabled)
    if leader is None:
        return ElectionOutcome(None, live)
    if leader in current.isr:
        new_isr = tuple(r for r in current.isr if r in online)
        return ElectionOutcome(current.new_leader_and_isr(leader, new_isr), live)
    # An unclean leader is the only replica whose log we can vouch for.
    return ElectionOutcome(current.new_leader_and_isr(leader, (leader,)), live, unclean=True)


def elect_reassign(current: LeaderAndIsr, assignment: ReplicaAssignment, online: AbstractSet[int]) -> ElectionOutcome:
    """Reassign strategy (§5.2): leader from the target replicas, ISR unchanged.

    Recipients are *all* target replicas, live or not.
    """
    targets = assignment.target_replicas
    leader = reassign_partition_leader_election(targets, current.isr, online)
    return ElectionOutcome(None if leader is None else current.new_leader(leader), targets)


def elect_preferred(current: LeaderAndIsr, assignment: Sequence[int], online: AbstractSet[int]) -> ElectionOutcome:
    """Preferred strategy (§5.3): the preferred replica or nobody, ISR unchanged.

    Re-electing a leader that already is the preferred replica is allowed here and bumps the
    epoch; callers that do not want that filter such partitions out first. Recipients are the
    full assignment.
    """
    leader = preferred_replica_partition_leader_election(assignment, current.isr, online)
    return ElectionOutcome(None if leader is None else current.new_leader(leader), tuple(assignment))


def elect_controlled_shutdown(
    current: LeaderAndIsr,
    assignment: Sequence[int],
    online_or_shutting_down: AbstractSet[int],
    shutting_down: AbstractSet[int],
) -> ElectionOutcome:
    """Controlled-shutdown strategy (§5.4): drop shutting-down brokers from the ISR.

    Recipients are the assigned replicas that are online *including* the shutting-down ones, so
    the broker going away also learns it is no longer the leader.
    """
    live = tuple(r for r in assignment if r in online_or_shutting_down)
    leader = controlled_shutdown_partition_leader_election(
        assignment, current.isr, online_or_shutting_down, shutting_down
    )
    if leader is None:
        return ElectionOutcome(None, live)
    new_isr = tuple(r for r in current.isr if r not in shutting_down)
    return ElectionOutcome(current.new_leader_and_isr(leader, new_isr), live)


def elect(
    strategy: ElectionStrategy,
    current: LeaderAndIsr,
    assignment: ReplicaAssignment,
    view: BrokerView,
    unclean_leader_election_enabled: bool | None = None,
) -> ElectionOutcome:
    """Run ``strategy`` for one partition.

    For ``OfflineStrategy`` the unclean flag is ``unclean_leader_election_enabled`` when given
    (the controller passes the topic's effective setting), else ``strategy.allow_unclean``.
    """
    match strategy:
        case OfflineStrategy(allow_unclean=allow_unclean):
            unclean = allow_unclean if unclean_leader_election_enabled is None else unclean_leader_election_enabled
            return elect_offline(current, assignment.replicas, view.online, unclean)
        case ReassignStrategy():
            return elect_reassign(current, assignment, view.online)
        case PreferredStrategy():
            return elect_preferred(current, assignment.replicas, view.online)
        case ControlledShutdownStrategy():
            return elect_controlled_shutdown(
                current, assignment.replicas, view.online_or_shutting_down, view.shutting_down
            )
