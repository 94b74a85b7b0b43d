"""What a synthetic history is (``HistorySpec``) and its plan: which faults happen on which day.

Split from ``generate`` (which runs the days and writes the files); see its docstring for why the
history is simulated and how days stay independent.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from datetime import date
from typing import Any, Final

DAY_MS: Final = 86_400_000.0
RECORD_STEP_MS: Final = 0.02  # the controller's pace inside one event: ~50,000 records a second
_TOPIC_PREFIXES: Final = ("orders", "payments", "clicks", "audit", "inventory", "sessions", "metrics", "billing")
MARKER_FILE: Final = "_generated.json"


@dataclass(frozen=True, slots=True)
class HistorySpec:
    """What to generate. The defaults are the benchmark's: 1,000 topics, 50,000 partitions, 30 days."""

    cluster: str = "bench"
    topics: int = 1000
    partitions_per_topic: int = 50
    brokers: int = 12
    replication_factor: int = 3
    days: int = 30
    start: date = date(2024, 1, 1)
    target_records: int = 10_000_000
    seed: int = 7
    failovers: int = 5
    rolling_restart_every_days: int = 7
    hard_failures_per_day: float = 1.5
    reassignment_every_days: int = 3
    reassignment_topics: int = 2
    unclean_topic_fraction: float = 0.05
    isr_collapse_fraction: float = 0.02

    @property
    def partitions(self) -> int:
        return self.topics * self.partitions_per_topic

    @classmethod
    def quick(cls, **overrides: Any) -> HistorySpec:
        """A small history with every kind of incident (about 300,000 records over 3 days)."""
        base = cls(topics=100, partitions_per_topic=20, brokers=6, days=3, target_records=300_000, failovers=1)
        return replace(base, rolling_restart_every_days=3, reassignment_every_days=2, **overrides)

    def validate(self) -> None:
        """Raise ``ValueError`` for a spec the simulator cannot honour."""
        if self.brokers < self.replication_factor or self.replication_factor < 2:
            raise ValueError("need replication_factor >= 2 and at least replication_factor brokers")
        if self.topics < 1 or self.partitions_per_topic < 1 or self.days < 1:
            raise ValueError("topics, partitions_per_topic and days must be positive")
        if not self.cluster or "/" in self.cluster or self.cluster.startswith("."):
            raise ValueError(f"cluster name {self.cluster!r} cannot be a directory name")


@dataclass(frozen=True, slots=True)
class Reassignment:
    """One reassignment request: every listed partition moves to its target replicas."""

    partitions: tuple[int, ...]
    targets: tuple[tuple[int, ...], ...]
    start_s: float
    cancel: bool


@dataclass(frozen=True, slots=True)
class DayPlan:
    """Everything one day's simulation needs; picklable so worker processes can run it."""

    index: int
    controller_id: int
    controller_epoch: int
    seq_start: int
    overrides: dict[int, tuple[int, ...]]
    failover: tuple[float, int] | None  # (second of day, new controller id)
    rolling_restart: bool
    hard_failures: tuple[tuple[int, float, float], ...]  # (broker, second of day, downtime s)
    reassignments: tuple[Reassignment, ...]
    flaps: int = 0


@dataclass(slots=True)
class DayResult:
    """What a day produced: record counts (before/after a failover) and bytes written."""

    index: int
    records: int = 0
    records_after_failover: int = 0
    bytes: int = 0
    kinds: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GenerationSummary:
    cluster: str
    directory: str
    records: int
    files: int
    bytes: int
    seconds: float
    kinds: dict[str, int]


# --- the plan ---------------------------------------------------------------------------------------


def topic_name(spec: HistorySpec, index: int) -> str:
    return f"{_TOPIC_PREFIXES[index % len(_TOPIC_PREFIXES)]}-{index:04d}"


def base_assignment(spec: HistorySpec, partition_id: int) -> tuple[int, ...]:
    """Kafka's rack-unaware assignment: a rotating first replica and a per-topic shift for the rest."""
    brokers = spec.brokers
    topic, partition = divmod(partition_id, spec.partitions_per_topic)
    first = (topic * 7 + partition) % brokers
    shift = topic % (brokers - 1)
    replicas = [first] + [
        (first + 1 + (shift + k - 1) % (brokers - 1)) % brokers for k in range(1, spec.replication_factor)
    ]
    return tuple(r + 1 for r in replicas)  # broker ids start at 1


def plan_days(spec: HistorySpec) -> list[DayPlan]:
    """Decide every day's incidents up front, so that days can be simulated independently."""
    rng = random.Random(f"plan:{spec.seed}:{spec.cluster}")
    brokers = list(range(1, spec.brokers + 1))
    failover_days = set(rng.sample(range(spec.days), min(spec.failovers, spec.days)))
    overrides: dict[int, tuple[int, ...]] = {}
    controller_id, epoch = brokers[0], 1
    plans: list[DayPlan] = []
    for day in range(spec.days):
        every = spec.rolling_restart_every_days
        rolling = every > 0 and day % every == min(2, every - 1)
        # Hard failures: non-overlapping windows after any rolling restart, all back by 23:00.
        whole = int(spec.hard_failures_per_day)
        count = whole + (1 if rng.random() < spec.hard_failures_per_day - whole else 0)
        earliest = 6 * 3600.0 if rolling else 1800.0
        failures: list[tuple[int, float, float]] = []
        cursor = earliest
        for drawn in sorted(rng.uniform(earliest, 20 * 3600.0) for _ in range(count)):
            start = max(drawn, cursor)
            downtime = rng.uniform(120.0, 2400.0)
            if start + downtime > 23 * 3600.0:
                break
            failures.append((rng.choice(brokers), start, downtime))
            cursor = start + downtime + 900.0
        reassignments: list[Reassignment] = []
        if spec.reassignment_every_days > 0 and day % spec.reassignment_every_days == 1 % spec.reassignment_every_days:
            for topic in rng.sample(range(spec.topics), min(spec.reassignment_topics, spec.topics)):
                parts = tuple(range(topic * spec.partitions_per_topic, (topic + 1) * spec.partitions_per_topic))
                targets = []
                for p in parts:
                    origin = overrides.get(p) or base_assignment(spec, p)
                    spare = [b for b in brokers if b not in origin]
                    targets.append((*origin[:-1], rng.choice(spare)))
                cancel = rng.random() < 0.15
                reassignments.append(Reassignment(parts, tuple(targets), rng.uniform(7 * 3600.0, 17 * 3600.0), cancel))
        failover = None
        if day in failover_days:
            new_id = rng.choice([b for b in brokers if b != controller_id])
            failover = (rng.uniform(3600.0, 22 * 3600.0), new_id)
        plans.append(
            DayPlan(
                index=day,
                controller_id=controller_id,
                controller_epoch=epoch,
                seq_start=0,
                overrides=dict(overrides),
                failover=failover,
                rolling_restart=rolling,
                hard_failures=tuple(failures),
                reassignments=tuple(reassignments),
            )
        )
        for r in reassignments:
            if not r.cancel:
                overrides.update(zip(r.partitions, r.targets, strict=True))
        if failover is not None:
            controller_id, epoch = failover[1], epoch + 1
    return plans
