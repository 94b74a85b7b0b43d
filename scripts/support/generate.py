"""Write synthetic state-change histories that look like a troubled month of a large cluster.

Why a simulator and not random records: the job's answers (outage intervals, MTTR, leader counts)
only mean something if the records obey the controller's rules: a partition goes Offline before it
is re-elected, an ISR shrinks before it expands, a reassignment starts before it completes. So this
module runs a small discrete-event model of the ZooKeeper-era controller (Kafka's broker failure,
controlled shutdown, preferred rebalance, AlterIsr, reassignment and failover sequences) and renders
every record in the exact shape ``controller_core.state_change_log`` writes.

Speed (10 million records, two cores): days are simulated independently, several processes at a
time. Each day starts from the cluster's settled state (every broker up, every leader preferred,
every ISR full), which the previous day also ends in, so no day needs another's result. Assignments
changed by reassignments are planned up front. Per-epoch sequence numbers are the one thing that
crosses days, so a count-only pass runs first and gives every day its starting ``seq``. Records are
formatted with ``%`` templates (faster than ``json.dumps`` for a fixed shape) and written in bulk.

Deterministic: the same spec (including ``seed``) writes byte-identical files, whatever the number
of processes. Leader epochs restart at ``1000 * day`` each day (still increasing); nothing else
reads them.

Usage::

    python -m scripts.support.generate --out var/bench --quick
    summary = generate(HistorySpec(cluster="bench"), Path("var/bench"))
"""

from __future__ import annotations

import argparse
import heapq
import json
import logging
import multiprocessing
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any, Final

logger = logging.getLogger(__name__)

DAY_MS: Final = 86_400_000.0
_RECORD_STEP_MS: Final = 0.02  # the controller's pace inside one event: ~50,000 records a second
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


def _plan(spec: HistorySpec) -> list[DayPlan]:
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


# --- rendering ----------------------------------------------------------------------------------------

# The brokers' zookeeper.session.timeout.ms (ControllerConfig.broker_session_timeout_s).
SESSION_TIMEOUT_MS: Final = 18_000.0
_HEADER: Final = '{"ts":%.3f,"controller_id":%d,"controller_epoch":%d,"seq":%d,"kind":"%s","event_id":"%s","cause":"%s"'
_PARTITION: Final = (
    _HEADER + ',"entity":"%s","topic":"%s","partition":%d,"replica":%s,"from_state":%s,"to_state":%s,'
    '"strategy":%s,"leader_before":%s,"leader_after":%s,"isr_before":%s,"isr_after":%s,'
    '"leader_epoch_before":%s,"leader_epoch_after":%s,"unclean":%s,"error":%s}'
)
_NULL: Final = "null"
_ONLINE, _OFFLINE, _NEW = '"OnlinePartition"', '"OfflinePartition"', '"NewPartition"'
_R_ONLINE, _R_OFFLINE, _R_NEW, _R_GONE = '"OnlineReplica"', '"OfflineReplica"', '"NewReplica"', '"NonExistentReplica"'
_R_DEL_START, _R_DEL_OK = '"ReplicaDeletionStarted"', '"ReplicaDeletionSuccessful"'


class _Out:
    """Number, count and (when ``path`` is given) render and write one day's records in order."""

    def __init__(self, plan: DayPlan, day_start_ms: float, path: Path | None) -> None:
        self.controller_id = plan.controller_id
        self.epoch = plan.controller_epoch
        self.seq = plan.seq_start
        self.clock = day_start_ms
        self.result = DayResult(plan.index)
        self.after_failover = False
        self.render = path is not None
        self._path = path
        self._tmp = None if path is None else path.with_suffix(".jsonl.tmp")
        self._file = None if self._tmp is None else open(self._tmp, "w", encoding="utf-8")  # noqa: SIM115
        self._lines: list[str] = []
        self._isr_text: dict[tuple[int, ...], str] = {}

    def advance_to(self, t_ms: float) -> None:
        self.clock = max(self.clock, t_ms)

    def _next(self, kind: str) -> float:
        self.seq += 1
        self.clock += _RECORD_STEP_MS
        kinds = self.result.kinds
        kinds[kind] = kinds.get(kind, 0) + 1
        self.result.records += 1
        if self.after_failover:
            self.result.records_after_failover += 1
        return self.clock

    def isr(self, isr: tuple[int, ...]) -> str:
        text = self._isr_text.get(isr)
        if text is None:
            text = self._isr_text[isr] = "[" + ",".join(map(str, isr)) + "]"
        return text

    def partition(
        self,
        kind: str,
        cause: str,
        event_id: str,
        entity: str,
        topic: str,
        partition: int,
        replica: str,
        from_state: str,
        to_state: str,
        strategy: str = _NULL,
        leader_before: str = _NULL,
        leader_after: str = _NULL,
        isr_before: str = _NULL,
        isr_after: str = _NULL,
        epoch_before: str = _NULL,
        epoch_after: str = _NULL,
        unclean: str = _NULL,
        error: str = _NULL,
    ) -> None:
        ts = self._next(kind)
        if self.render:
            self._lines.append(
                _PARTITION
                % (
                    ts,
                    self.controller_id,
                    self.epoch,
                    self.seq,
                    kind,
                    event_id,
                    cause,
                    entity,
                    topic,
                    partition,
                    replica,
                    from_state,
                    to_state,
                    strategy,
                    leader_before,
                    leader_after,
                    isr_before,
                    isr_after,
                    epoch_before,
                    epoch_after,
                    unclean,
                    error,
                )
            )
            if len(self._lines) >= 50_000:
                self._flush()

    def other(self, kind: str, cause: str, event_id: str, fields: str | Callable[[], str]) -> None:
        """A non-partition record; ``fields`` is the JSON tail (a callable when costly to build)."""
        ts = self._next(kind)
        if self.render:
            tail = fields() if callable(fields) else fields
            head = _HEADER % (ts, self.controller_id, self.epoch, self.seq, kind, event_id, cause)
            self._lines.append(f"{head},{tail}}}" if tail else head + "}")

    def switch_controller(self, controller_id: int) -> None:
        self.controller_id = controller_id
        self.epoch += 1
        self.seq = 0
        self.after_failover = True

    def _flush(self) -> None:
        if self._file is not None and self._lines:
            text = "\n".join(self._lines) + "\n"
            self._file.write(text)
            self.result.bytes += len(text)
        self._lines.clear()

    def close(self) -> None:
        self._flush()
        if self._file is not None and self._tmp is not None and self._path is not None:
            self._file.close()
            os.replace(self._tmp, self._path)


# --- the day simulation ---------------------------------------------------------------------------------


class _Day:
    """One day of the cluster: state arrays, an event heap and Kafka's handling of each incident."""

    def __init__(self, spec: HistorySpec, plan: DayPlan, out: _Out) -> None:
        self.spec = spec
        self.plan = plan
        self.out = out
        self.rng = random.Random(f"day:{spec.seed}:{spec.cluster}:{plan.index}")
        self.day_start_ms = out.clock
        n = spec.partitions
        ppt = spec.partitions_per_topic
        self.topic_of = [topic_name(spec, p // ppt) for p in range(n)]
        self.entity = [f"{self.topic_of[p]}-{p % ppt}" for p in range(n)]
        self.unclean_topics = {
            t
            for t in range(spec.topics)
            if random.Random(f"unclean:{spec.seed}:{t}").random() < spec.unclean_topic_fraction
        }
        self.assign = [plan.overrides.get(p) or base_assignment(spec, p) for p in range(n)]
        self.leader = [a[0] for a in self.assign]
        self.isr = list(self.assign)
        self.lepoch = [1000 * plan.index] * n
        self.alive = set(range(1, spec.brokers + 1))
        self.led: dict[int, set[int]] = {b: set() for b in self.alive}
        self.hosted: dict[int, set[int]] = {b: set() for b in self.alive}
        self.replica_down: dict[int, set[int]] = {b: set() for b in self.alive}
        for p, replicas in enumerate(self.assign):
            self.led[replicas[0]].add(p)
            for r in replicas:
                self.hosted[r].add(p)
        self.offline: set[int] = set()
        self.reassigning: dict[int, tuple[tuple[int, ...], tuple[int, ...], str]] = {}
        hot = max(1, n // 50)
        self.hot_partitions = self.rng.sample(range(n), hot)
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = 0

    # -- scheduling --

    def at(self, second_of_day: float, action: Callable[..., None], *args: Any) -> None:
        self.at_ms(self.day_start_ms + second_of_day * 1000.0, action, *args)

    def at_ms(self, t_ms: float, action: Callable[..., None], *args: Any) -> None:
        self._order += 1
        heapq.heappush(self._heap, (t_ms, self._order, action, args))

    def run(self) -> None:
        plan, spec, rng = self.plan, self.spec, self.rng
        if plan.rolling_restart:
            for i, broker in enumerate(range(1, spec.brokers + 1)):
                self.at(2 * 3600.0 + i * 600.0, self.controlled_shutdown, broker)
        for broker, start, downtime in plan.hard_failures:
            self.at(start - 5.0, self.collapse_isr, broker)
            self.at(start, self.fail, broker)
            self.at(start + downtime, self.restart, broker)
        for r in plan.reassignments:
            self.at(r.start_s, self.reassign_start, r)
        if plan.failover is not None:
            self.at(plan.failover[0], self.resign, plan.failover[1])
        for _ in range(plan.flaps):
            self.at(rng.uniform(60.0, 23.5 * 3600.0), self.flap)
        self.at(23.75 * 3600.0, self.settle)
        while self._heap:
            t_ms, _, action, args = heapq.heappop(self._heap)
            self.out.advance_to(t_ms)
            action(*args)

    def event_id(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    # -- record helpers --

    def _batch(self, cause: str, eid: str, partitions: int) -> None:
        self.out.other(
            "request_batch",
            cause,
            eid,
            f'"request_controller_epoch":{self.out.epoch},"leader_and_isr":{{}},'
            f'"update_metadata":{{"brokers":[],"partitions":{partitions}}},"stop_replica":{{}}',
        )

    def _replica(self, cause: str, eid: str, p: int, broker: int, from_state: str, to_state: str) -> None:
        self.out.partition(
            "replica_transition",
            cause,
            eid,
            f"{self.entity[p]}@{broker}",
            self.topic_of[p],
            p % self.spec.partitions_per_topic,
            str(broker),
            from_state,
            to_state,
        )

    def _set_leader(self, p: int, leader: int) -> None:
        old = self.leader[p]
        if old > 0:
            self.led[old].discard(p)
        if leader > 0:
            self.led[leader].add(p)
        self.leader[p] = leader

    def _isr_change(self, cause: str, eid: str, p: int, leader: int, isr: tuple[int, ...], replica: int | None) -> None:
        out = self.out
        before_leader, before_isr, before_epoch = self.leader[p], self.isr[p], self.lepoch[p]
        after_epoch = before_epoch + 1 if leader != before_leader else before_epoch
        entity = self.entity[p] if replica is None else f"{self.entity[p]}@{replica}"
        out.partition(
            "isr_change",
            cause,
            eid,
            entity,
            self.topic_of[p],
            p % self.spec.partitions_per_topic,
            _NULL if replica is None else str(replica),
            _NULL,
            _NULL,
            leader_before=str(before_leader),
            leader_after=str(leader),
            isr_before=out.isr(before_isr),
            isr_after=out.isr(isr),
            epoch_before=str(before_epoch),
            epoch_after=str(after_epoch),
        )
        self._set_leader(p, leader)
        self.isr[p] = isr
        self.lepoch[p] = after_epoch

    def _election(
        self,
        cause: str,
        eid: str,
        p: int,
        strategy: str,
        from_state: str,
        leader: int,
        isr: tuple[int, ...],
        unclean: bool,
    ) -> None:
        out = self.out
        before_epoch = self.lepoch[p]
        out.partition(
            "election",
            cause,
            eid,
            self.entity[p],
            self.topic_of[p],
            p % self.spec.partitions_per_topic,
            _NULL,
            from_state,
            _ONLINE,
            strategy=f'"{strategy}"',
            leader_before=str(self.leader[p]),
            leader_after=str(leader),
            isr_before=out.isr(self.isr[p]),
            isr_after=out.isr(isr),
            epoch_before=str(before_epoch),
            epoch_after=str(before_epoch + 1),
            unclean="true" if unclean else "false",
        )
        self._set_leader(p, leader)
        self.isr[p] = isr
        self.lepoch[p] = before_epoch + 1
        self.offline.discard(p)

    def _elect_offline(self, cause: str, eid: str, p: int) -> None:
        """Kafka's offline election: a live ISR member, else (if the topic allows) any live replica."""
        replicas, isr, alive = self.assign[p], self.isr[p], self.alive
        leader = next((r for r in replicas if r in alive and r in isr), None)
        unclean = False
        if leader is None and (p // self.spec.partitions_per_topic) in self.unclean_topics:
            leader = next((r for r in replicas if r in alive), None)
            unclean = leader is not None
        if leader is None:
            self.out.partition(
                "failed_change",
                cause,
                eid,
                self.entity[p],
                self.topic_of[p],
                p % self.spec.partitions_per_topic,
                _NULL,
                _OFFLINE,
                _ONLINE,
                strategy='"offline"',
                error=f'"StateChangeFailedError: No live in-sync replica of partition {self.entity[p]}"',
            )
            return
        new_isr = (leader,) if unclean else tuple(r for r in isr if r in alive)
        self._election(cause, eid, p, "offline", _OFFLINE, leader, new_isr, unclean)

    # -- incidents --

    def collapse_isr(self, broker: int) -> None:
        """A struggling leader drops its followers first: a few partitions are left with ISR = {leader}."""
        led = sorted(self.led[broker])
        if not led:
            return
        eid = self.event_id()
        for p in self.rng.sample(led, max(1, int(len(led) * self.spec.isr_collapse_fraction))):
            if len(self.isr[p]) > 1 and p not in self.offline and p not in self.reassigning:
                self._isr_change("AlterIsrReceived", eid, p, broker, (broker,), None)

    def fail(self, broker: int, expired: bool = True) -> None:
        """Broker loss (Kafka's onBrokerFailure): leaders first, then replicas and ISRs.

        ``expired``: the broker died and its ZooKeeper session expired, so the controller records the
        estimated loss (noticed minus the brokers' 18 s session timeout), as ``Controller`` does; not
        after a controlled shutdown, whose registration goes when the broker closes its session.
        """
        if broker not in self.alive:
            return
        out, cause, eid = self.out, "BrokerChange", self.event_id()
        self.alive.discard(broker)
        tail = f'"new_brokers":[],"dead_brokers":[{broker}],"bounced_brokers":[]'
        if expired:
            lost = f',"session_lost_brokers":[{broker}],"session_lost_estimated":true,"session_lost_ms":'
            out.other("broker_change", cause, eid, lambda: f"{tail}{lost}{out.clock - SESSION_TIMEOUT_MS:.3f}")
        else:
            out.other("broker_change", cause, eid, tail)
        led = sorted(self.led[broker])
        ppt = self.spec.partitions_per_topic
        for p in led:
            if p not in self.offline:
                out.partition(
                    "partition_transition",
                    cause,
                    eid,
                    self.entity[p],
                    self.topic_of[p],
                    p % ppt,
                    _NULL,
                    _ONLINE,
                    _OFFLINE,
                )
                self.offline.add(p)
        for p in led:
            self._elect_offline(cause, eid, p)
        down = self.replica_down[broker]
        hosted = sorted(self.hosted[broker])
        for p in hosted:
            if p not in down:
                self._replica(cause, eid, p, broker, _R_ONLINE, _R_OFFLINE)
                down.add(p)
        for p in hosted:
            isr = self.isr[p]
            if broker in isr:
                leader = -1 if self.leader[p] == broker else self.leader[p]
                self._isr_change(
                    cause, eid, p, leader, isr if len(isr) == 1 else tuple(r for r in isr if r != broker), broker
                )
        self._batch(cause, eid, len(hosted))

    def restart(self, broker: int) -> None:
        """Broker startup: replicas online, offline partitions re-elected, catch-up, then rebalance."""
        if broker in self.alive:
            return
        out, cause, eid = self.out, "BrokerChange", self.event_id()
        self.alive.add(broker)
        out.other("broker_change", cause, eid, f'"new_brokers":[{broker}],"dead_brokers":[],"bounced_brokers":[]')
        down = self.replica_down[broker]
        for p in sorted(down):
            self._replica(cause, eid, p, broker, _R_OFFLINE, _R_ONLINE)
        down.clear()
        for p in sorted(self.offline):
            self._elect_offline(cause, eid, p)
        self._batch(cause, eid, len(self.hosted[broker]))
        lagging = sorted(p for p in self.hosted[broker] if broker not in self.isr[p])
        for i in range(10):
            self.at_ms(out.clock + 5000.0 * (i + 1), self.catch_up, broker, lagging[i::10])
        self.at_ms(out.clock + 300_000.0, self.preferred, broker)

    def catch_up(self, broker: int, partitions: Sequence[int]) -> None:
        """AlterIsr from the leaders: ``broker`` is back in sync for ``partitions``."""
        if broker not in self.alive:
            return
        eid = self.event_id()
        for p in partitions:
            self._expand(eid, p, broker)

    def _expand(self, eid: str, p: int, broker: int) -> None:
        isr, leader = self.isr[p], self.leader[p]
        if broker in isr or leader < 0 or leader not in self.alive or broker not in self.assign[p]:
            return
        new_isr = tuple(r for r in self.assign[p] if r in isr or r == broker)
        self._isr_change("AlterIsrReceived", eid, p, leader, new_isr, None)

    def preferred(self, broker: int) -> None:
        """Auto rebalance: give ``broker`` back the partitions it is the preferred leader of."""
        if broker not in self.alive:
            return
        cause, eid = "AutoPreferredReplicaLeaderElection", self.event_id()
        moved = 0
        for p in sorted(self.hosted[broker]):
            if self.assign[p][0] == broker and self.leader[p] not in (broker, -1) and broker in self.isr[p]:
                self._election(cause, eid, p, "preferred", _ONLINE, broker, self.isr[p], False)
                moved += 1
        if moved:
            self._batch(cause, eid, moved)

    def controlled_shutdown(self, broker: int) -> None:
        """Rolling restart step: move leadership off ``broker``, stop its followers, then it leaves."""
        if broker not in self.alive:
            return
        out, cause, eid = self.out, "ControlledShutdown", self.event_id()
        out.other("controlled_shutdown", cause, eid, f'"broker_id":{broker}')
        for p in sorted(self.led[broker]):
            isr = self.isr[p]
            leader = next((r for r in self.assign[p] if r in isr and r in self.alive and r != broker), None)
            if leader is not None:
                self._election(
                    cause, eid, p, "controlled_shutdown", _ONLINE, leader, tuple(r for r in isr if r != broker), False
                )
        down = self.replica_down[broker]
        for p in sorted(self.hosted[broker]):
            if self.leader[p] != broker and p not in down:
                self._replica(cause, eid, p, broker, _R_ONLINE, _R_OFFLINE)
                down.add(p)
                if broker in self.isr[p] and len(self.isr[p]) > 1:
                    self._isr_change(
                        cause, eid, p, self.leader[p], tuple(r for r in self.isr[p] if r != broker), broker
                    )
        self._batch(cause, eid, len(self.hosted[broker]))
        self.at_ms(out.clock + 10_000.0, self.fail, broker, False)
        self.at_ms(out.clock + self.rng.uniform(60_000.0, 120_000.0), self.restart, broker)

    def flap(self) -> None:
        """A follower falls out of the ISR for a moment (mostly on a few hot partitions)."""
        rng = self.rng
        for _ in range(3):
            p = rng.choice(self.hot_partitions) if rng.random() < 0.8 else rng.randrange(self.spec.partitions)
            isr, leader = self.isr[p], self.leader[p]
            if leader < 0 or leader not in self.alive or len(isr) < 2 or p in self.reassigning:
                continue
            follower = rng.choice([r for r in isr if r != leader])
            self._isr_change(
                "AlterIsrReceived", self.event_id(), p, leader, tuple(r for r in isr if r != follower), None
            )
            self.at_ms(self.out.clock + rng.uniform(2000.0, 90_000.0), self.unflap, p, follower)
            return

    def unflap(self, p: int, follower: int) -> None:
        if follower in self.alive:
            self._expand(self.event_id(), p, follower)

    def reassign_start(self, r: Reassignment) -> None:
        out, cause, eid = self.out, "ZkPartitionReassignment", self.event_id()
        ppt = self.spec.partitions_per_topic
        for p, target in zip(r.partitions, r.targets, strict=True):
            origin = self.assign[p]
            out.other(
                "reassignment",
                cause,
                eid,
                f'"phase":"started","entity":"{self.entity[p]}","topic":"{self.topic_of[p]}","partition":{p % ppt},'
                f'"origin_replicas":{out.isr(origin)},"target_replicas":{out.isr(target)}',
            )
            for b in target:
                if b not in origin:
                    self._replica(cause, eid, p, b, _R_GONE, _R_NEW)
            self.reassigning[p] = (origin, target, eid)
            if not r.cancel:
                self.at_ms(out.clock + self.rng.uniform(30_000.0, 300_000.0), self.reassign_complete, p)
        if r.cancel:
            self.at_ms(out.clock + self.rng.uniform(10_000.0, 25_000.0), self.reassign_cancel, r)

    def reassign_complete(self, p: int, force: bool = False) -> None:
        """New replicas caught up (AlterIsr), then phase B: leader into the targets, old replicas removed."""
        if p not in self.reassigning:
            return
        origin, target, _ = self.reassigning[p]
        adding = [b for b in target if b not in origin]
        if not force and any(b not in self.alive for b in adding):
            self.at_ms(self.out.clock + 60_000.0, self.reassign_complete, p)
            return
        leader = self.leader[p]
        if leader > 0:
            catch_up = self.event_id()
            for b in adding:
                if b in self.alive:
                    self._isr_change("AlterIsrReceived", catch_up, p, leader, (*self.isr[p], b), None)
        cause, eid = "PartitionReassignmentIsrChange", self.event_id()
        for b in adding:
            self._replica(cause, eid, p, b, _R_NEW, _R_ONLINE)
            self.hosted[b].add(p)
        if self.leader[p] not in target:
            new_leader = next((b for b in target if b in self.isr[p] and b in self.alive), None)
            if new_leader is not None:
                self._election(cause, eid, p, "reassign", _ONLINE, new_leader, self.isr[p], False)
        for b in origin:
            if b in target:
                continue
            self._replica(cause, eid, p, b, _R_ONLINE, _R_OFFLINE)
            if b in self.isr[p] and len(self.isr[p]) > 1:
                self._isr_change(cause, eid, p, self.leader[p], tuple(r for r in self.isr[p] if r != b), b)
            self._replica(cause, eid, p, b, _R_OFFLINE, _R_DEL_START)
            self._replica(cause, eid, p, b, _R_DEL_START, _R_DEL_OK)
            self._replica(cause, eid, p, b, _R_DEL_OK, _R_GONE)
            self.hosted[b].discard(p)
            self.replica_down[b].discard(p)
        self.assign[p] = target
        self._reassignment_end(p, "completed", origin, target, cause, eid)

    def reassign_cancel(self, r: Reassignment) -> None:
        cause, eid = "ZkPartitionReassignment", self.event_id()
        for p in r.partitions:
            if p not in self.reassigning:
                continue
            origin, target, _ = self.reassigning[p]
            for b in target:
                if b not in origin:
                    self._replica(cause, eid, p, b, _R_NEW, _R_OFFLINE)
                    self._replica(cause, eid, p, b, _R_OFFLINE, _R_GONE)
            self._reassignment_end(p, "cancelled", origin, target, cause, eid)

    def _reassignment_end(
        self, p: int, phase: str, origin: tuple[int, ...], target: tuple[int, ...], cause: str, eid: str
    ) -> None:
        out = self.out
        del self.reassigning[p]
        out.other(
            "reassignment",
            cause,
            eid,
            f'"phase":"{phase}","entity":"{self.entity[p]}","topic":"{self.topic_of[p]}",'
            f'"partition":{p % self.spec.partitions_per_topic},"origin_replicas":{out.isr(origin)},'
            f'"target_replicas":{out.isr(target)}',
        )

    def resign(self, new_controller: int) -> None:
        """Controller failover: the old one resigns, the new one takes over a few seconds later."""
        self.out.other("resignation", "Expire", self.event_id(), f'"controller_epoch_resigned":{self.out.epoch}')
        self.at_ms(self.out.clock + self.rng.uniform(2000.0, 8000.0), self.take_over, new_controller)

    def take_over(self, controller_id: int) -> None:
        out = self.out
        elected_at = out.clock
        out.switch_controller(controller_id)
        eid = self.event_id()
        out.clock += self.rng.uniform(300.0, 1500.0)  # reading every znode of a big cluster takes a while
        n = self.spec.partitions
        out.other("states_initialized", "Reelect", eid, f'"machine":"replica","counts":{{"OnlineReplica":{3 * n}}}')
        out.other("states_initialized", "Reelect", eid, f'"machine":"partition","counts":{{"OnlinePartition":{n}}}')
        out.other(
            "failover",
            "Reelect",
            eid,
            f'"elected_at_ms":{elected_at:.3f},"completed_at_ms":{out.clock:.3f},'
            f'"duration_ms":{out.clock - elected_at:.3f},'
            f'"live_brokers":{out.isr(tuple(sorted(self.alive)))},"partitions":{n},"endpoint":"127.0.0.1:9{controller_id:03d}"',
        )
        out.other("state_snapshot", "Reelect", eid, self._snapshot)

    def _snapshot(self) -> str:
        states: dict[str, list[str]] = {}
        for p, entity in enumerate(self.entity):
            states.setdefault("OfflinePartition" if p in self.offline else "OnlinePartition", []).append(entity)
        replicas: dict[str, list[str]] = {}
        for p, replicas_of_p in enumerate(self.assign):
            for b in replicas_of_p:
                state = "OfflineReplica" if p in self.replica_down[b] else "OnlineReplica"
                replicas.setdefault(state, []).append(f"{self.entity[p]}@{b}")
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        return f'"partition_states":{dumps(states)},"replica_states":{dumps(replicas)}'

    def settle(self) -> None:
        """End of day: finish reassignments, fill ISRs, restore preferred leaders (the next day's start)."""
        for p in sorted(self.reassigning):
            self.reassign_complete(p, force=True)
        eid = self.event_id()
        for b in sorted(self.alive):
            for p in sorted(self.hosted[b]):
                self._expand(eid, p, b)
        cause, eid = "AutoPreferredReplicaLeaderElection", self.event_id()
        for p in range(self.spec.partitions):
            preferred = self.assign[p][0]
            if self.leader[p] != preferred and preferred in self.isr[p]:
                self._election(cause, eid, p, "preferred", _ONLINE, preferred, self.isr[p], False)
            if self.isr[p] != self.assign[p]:
                self.isr[p] = self.assign[p]  # a reordered ISR is the same set; keep tomorrow's start canonical


def _run_day(args: tuple[HistorySpec, DayPlan, str | None]) -> DayResult:
    spec, plan, path = args
    start = datetime.combine(spec.start + timedelta(days=plan.index), datetime.min.time(), tzinfo=UTC)
    out = _Out(plan, start.timestamp() * 1000.0, None if path is None else Path(path))
    try:
        _Day(spec, plan, out).run()
    finally:
        out.close()
    return out.result


# --- driver ---------------------------------------------------------------------------------------------


def _map_days(spec: HistorySpec, plans: Sequence[DayPlan], directory: Path | None, processes: int) -> list[DayResult]:
    tasks = [
        (spec, plan, None if directory is None else str(directory / _file_name(spec, plan.index))) for plan in plans
    ]
    if processes <= 1 or len(tasks) == 1:
        return [_run_day(t) for t in tasks]
    # spawn, never fork: callers (tests, Celery workers, the benchmark) hold threads (kazoo, py4j,
    # logging) whose locks a forked child would inherit held, and such a child can hang forever.
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        return list(pool.imap(_run_day, tasks, chunksize=1))


def _file_name(spec: HistorySpec, index: int) -> str:
    return f"state-change-{(spec.start + timedelta(days=index)).isoformat()}.jsonl"


def generate(spec: HistorySpec, base_dir: Path, processes: int | None = None) -> GenerationSummary:
    """Write ``spec``'s history under ``base_dir/<cluster>/`` and return what was written.

    Steps:
    1. plan every day's incidents;
    2. simulate every day without writing, to learn how many records the incidents make and so how
       many ISR flaps fill up to ``target_records``;
    3. simulate again with the flaps, still without writing, to count records per controller epoch
       and so give each day its first sequence number;
    4. simulate and write every day, in parallel.
    """
    spec.validate()
    started = time.perf_counter()
    processes = processes or min(os.cpu_count() or 1, spec.days)
    directory = base_dir / spec.cluster
    directory.mkdir(parents=True, exist_ok=True)

    plans = _plan(spec)
    base = _map_days(spec, plans, None, processes)
    remaining = max(0, spec.target_records - sum(r.records for r in base))
    per_day, extra = divmod(remaining // 2, spec.days)
    plans = [replace(p, flaps=per_day + (1 if p.index < extra else 0)) for p in plans]
    counted = _map_days(spec, plans, None, processes)
    seq = 0
    numbered: list[DayPlan] = []
    for plan, result in zip(plans, counted, strict=True):
        numbered.append(replace(plan, seq_start=seq))
        seq = result.records_after_failover if plan.failover is not None else seq + result.records
    results = _map_days(spec, numbered, directory, processes)

    kinds: dict[str, int] = {}
    for r in results:
        for kind, n in r.kinds.items():
            kinds[kind] = kinds.get(kind, 0) + n
    summary = GenerationSummary(
        cluster=spec.cluster,
        directory=str(directory),
        records=sum(r.records for r in results),
        files=len(results),
        bytes=sum(r.bytes for r in results),
        seconds=round(time.perf_counter() - started, 2),
        kinds=dict(sorted(kinds.items())),
    )
    marker = {"spec": {**asdict(spec), "start": spec.start.isoformat()}, "summary": asdict(summary)}
    (directory / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
    return summary


def existing_summary(spec: HistorySpec, base_dir: Path) -> GenerationSummary | None:
    """Return the summary of an earlier ``generate`` of the same spec into ``base_dir``, if complete."""
    marker = base_dir / spec.cluster / MARKER_FILE
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if data.get("spec") != {**asdict(spec), "start": spec.start.isoformat()}:
        return None
    for index in range(spec.days):
        if not (base_dir / spec.cluster / _file_name(spec, index)).is_file():
            return None
    return GenerationSummary(**data["summary"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="base directory (one sub-directory per cluster)")
    parser.add_argument("--quick", action="store_true", help="a small history (3 days, 2,000 partitions)")
    parser.add_argument("--cluster", default="bench")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--records", type=int, help="target number of records")
    parser.add_argument("--days", type=int)
    parser.add_argument("--start", type=date.fromisoformat, help="first day, YYYY-MM-DD")
    parser.add_argument("--processes", type=int)
    args = parser.parse_args(argv)
    spec = (
        HistorySpec.quick(cluster=args.cluster, seed=args.seed)
        if args.quick
        else HistorySpec(cluster=args.cluster, seed=args.seed)
    )
    if args.records is not None:
        spec = replace(spec, target_records=args.records)
    if args.days is not None:
        spec = replace(spec, days=args.days)
    if args.start is not None:
        spec = replace(spec, start=args.start)
    summary = generate(spec, args.out, args.processes)
    json.dump(asdict(summary), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
