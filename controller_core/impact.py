"""Impact preview: what happens to every partition if some brokers fail now, or are shut down.

Pure functions of a snapshot (no ZooKeeper, no clock), so the dashboard can run them on the state it
read and tests can run them on hand-made states. The decisions are the controller's own:

* *failure* (``FAILURE``): the brokers' replicas go offline. A partition they lead is re-elected with
  ``election.elect_offline`` (the offline strategy, honouring the topic's
  ``unclean.leader.election.enable``); when no replica qualifies it goes offline. A partition they
  only follow keeps its leader and drops them from its ISR (replica state machine, OfflineReplica).
* *controlled shutdown* (``SHUTDOWN``): like ``Controller._on_controlled_shutdown``, partitions with a
  single replica are skipped (they go offline when the broker stops); led partitions are re-elected
  with ``election.elect_controlled_shutdown``; when no other live in-sync replica exists the leader
  stays on the shutting-down broker until it stops, so the partition goes offline then. Followed
  partitions drop the brokers from the ISR.

A partition "falls under min ISR" when its ISR afterwards is smaller than its topic's
``min.insync.replicas`` while it still has a leader (producers with ``acks=all`` are refused); one
already under it beforehand is reported as such, not as a new loss.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from controller_core.election import elect_controlled_shutdown, elect_offline
from controller_core.model import LeaderAndIsr, TopicPartition

FAILURE: Final = "failure"
SHUTDOWN: Final = "shutdown"
MODES: Final = (FAILURE, SHUTDOWN)
NO_LEADER: Final = -1


@dataclass(frozen=True, slots=True)
class PartitionSnapshot:
    """One partition as read from ZooKeeper: assignment, leader/ISR/epoch and its topic's settings."""

    replicas: tuple[int, ...]
    leader: int = NO_LEADER
    isr: tuple[int, ...] = ()
    leader_epoch: int = 0
    min_isr: int = 1
    unclean: bool = False


@dataclass(frozen=True, slots=True)
class PartitionImpact:
    """What one partition would go through. ``new_leader`` is None when it would have none."""

    topic: str
    partition: int
    replicas: tuple[int, ...]
    leader: int
    isr: tuple[int, ...]
    new_leader: int | None
    new_isr: tuple[int, ...]
    min_isr: int
    effect: str  # "offline", "leader_moves", "isr_shrinks", "stays_until_stop", "already_offline"
    unclean: bool = False

    @property
    def under_min_isr(self) -> bool:
        return self.effect in ("leader_moves", "isr_shrinks") and len(self.new_isr) < self.min_isr

    @property
    def was_under_min_isr(self) -> bool:
        return self.leader >= 0 and len(self.isr) < self.min_isr

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "replicas": list(self.replicas),
            "leader": self.leader,
            "isr": list(self.isr),
            "new_leader": self.new_leader,
            "new_isr": list(self.new_isr),
            "min_isr": self.min_isr,
            "effect": self.effect,
            "unclean": self.unclean,
            "under_min_isr": self.under_min_isr,
            "was_under_min_isr": self.was_under_min_isr,
        }


@dataclass(frozen=True, slots=True)
class Impact:
    mode: str
    brokers: tuple[int, ...]
    live_brokers: tuple[int, ...]
    partitions_total: int
    affected: list[PartitionImpact] = field(default_factory=list)

    @property
    def offline(self) -> list[PartitionImpact]:
        return [p for p in self.affected if p.effect in ("offline", "stays_until_stop")]

    @property
    def already_offline(self) -> list[PartitionImpact]:
        return [p for p in self.affected if p.effect == "already_offline"]

    @property
    def leader_moves(self) -> list[PartitionImpact]:
        return [p for p in self.affected if p.effect == "leader_moves"]

    @property
    def under_min_isr(self) -> list[PartitionImpact]:
        return [p for p in self.affected if p.under_min_isr and not p.was_under_min_isr]

    @property
    def isr_shrinks(self) -> list[PartitionImpact]:
        return [p for p in self.affected if p.effect == "isr_shrinks"]

    def leaders_gained(self) -> dict[int, int]:
        """Broker id → how many partitions it would start leading."""
        out: dict[int, int] = {}
        for p in self.leader_moves:
            if p.new_leader is not None:
                out[p.new_leader] = out.get(p.new_leader, 0) + 1
        return dict(sorted(out.items()))

    def summary(self) -> dict[str, Any]:
        return {
            "partitions_hosted": len(self.affected),
            "offline": len(self.offline),
            "leader_moves": len(self.leader_moves),
            "unclean_elections": sum(1 for p in self.leader_moves if p.unclean),
            "under_min_isr": len(self.under_min_isr),
            "isr_shrinks": len(self.isr_shrinks),
            "already_offline": len(self.already_offline),
            "leaders_gained": {str(b): n for b, n in self.leaders_gained().items()},
        }

    def as_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "brokers": list(self.brokers),
            "live_brokers": list(self.live_brokers),
            "partitions_total": self.partitions_total,
            "summary": self.summary(),
            "offline": [p.as_dict() for p in self.offline],
            "leader_moves": [p.as_dict() for p in self.leader_moves],
            "under_min_isr": [p.as_dict() for p in self.under_min_isr],
            "isr_shrinks": [p.as_dict() for p in self.isr_shrinks],
            "already_offline": [p.as_dict() for p in self.already_offline],
        }


def brokers_in_rack(racks: Mapping[int, str | None], rack: str) -> tuple[int, ...]:
    """The registered brokers whose rack is ``rack``."""
    return tuple(sorted(b for b, r in racks.items() if r == rack))


def _one(
    tp: TopicPartition, snap: PartitionSnapshot, mode: str, down: frozenset[int], live: frozenset[int]
) -> PartitionImpact | None:
    if not down.intersection(snap.replicas):
        return None

    def row(new_leader: int | None, new_isr: Iterable[int], effect: str, unclean: bool = False) -> PartitionImpact:
        return PartitionImpact(
            tp.topic, tp.partition, snap.replicas, snap.leader, snap.isr, new_leader, tuple(new_isr),
            snap.min_isr, effect, unclean,
        )  # fmt: skip

    if snap.leader < 0 or snap.leader not in live:
        return row(None, snap.isr, "already_offline")
    current = LeaderAndIsr(snap.leader, snap.leader_epoch, snap.isr)
    remaining_isr = tuple(r for r in snap.isr if r not in down)
    if mode == SHUTDOWN and len(snap.replicas) <= 1:
        # The controller skips single-replica partitions: they stay led until the broker stops.
        return row(snap.leader, snap.isr, "stays_until_stop")
    if snap.leader not in down:
        return row(snap.leader, remaining_isr, "isr_shrinks")
    if mode == FAILURE:
        online = live - down
        outcome = elect_offline(current, snap.replicas, online, snap.unclean)
        if outcome.leader_and_isr is None:
            return row(None, (), "offline")
        chosen = outcome.leader_and_isr
        return row(chosen.leader, chosen.isr, "leader_moves", outcome.unclean)
    outcome = elect_controlled_shutdown(current, snap.replicas, live, down)
    if outcome.leader_and_isr is None:
        return row(snap.leader, snap.isr, "stays_until_stop")
    chosen = outcome.leader_and_isr
    return row(chosen.leader, chosen.isr, "leader_moves")


def compute_impact(
    partitions: Mapping[TopicPartition, PartitionSnapshot],
    live_brokers: Collection[int],
    brokers: Collection[int],
    mode: str,
) -> Impact:
    """The effect on ``partitions`` of ``brokers`` failing (``FAILURE``) or shutting down (``SHUTDOWN``)
    while ``live_brokers`` are registered. Raises ``ValueError`` for an unknown mode or no brokers."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    down = frozenset(int(b) for b in brokers)
    if not down:
        raise ValueError("name at least one broker")
    live = frozenset(live_brokers)
    affected = []
    for tp in sorted(partitions, key=lambda t: (t.topic, t.partition)):
        one = _one(tp, partitions[tp], mode, down, live)
        if one is not None:
            affected.append(one)
    return Impact(mode, tuple(sorted(down)), tuple(sorted(live)), len(partitions), affected)
