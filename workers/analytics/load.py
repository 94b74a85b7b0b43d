"""Copy a run's Parquet results into the dashboard's tables, replacing what the run covers.

Idempotent by construction: for each cluster, in one transaction, the rows the window owns are
deleted and the run's rows inserted, so loading the same run twice leaves the same rows, and a
crash leaves the previous rows intact. What a window "owns":

* day-keyed tables (availability, outages per partition/broker, elections, unclean elections,
  ISR flapping): the days ``since..until``;
* per-minute tables (leader counts, skew): the minutes of the window;
* failovers: those whose new epoch began in the window (and any row with the same epoch);
* intervals and reassignments: merged by key (partition, start) instead. Each row of the run
  replaces the stored row with its key, including ones that started before the window and ended in
  it (an outage across midnight); stored rows that started in the window and that the run no longer
  produces are deleted; and an open row never replaces a closed one that ends after the window
  (rerunning an old window must not forget an outage's end that a later run saw).

Parquet is read through Spark (the worker already has a session; the web process never loads).
Timestamps are selected as epoch milliseconds and converted here in UTC, because PySpark turns
timestamp values into naive datetimes in the Python process's local zone.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from django.db import models, transaction
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from dashboard.analytics import models as M
from workers.analytics.job import MANIFESTS_DIR, RUNS_DIR, JobInputError
from workers.analytics.transforms import AUDIT_PREFIX

logger = logging.getLogger(__name__)

BATCH = 5_000


def _dt(ms: float | None) -> datetime | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000.0, tz=UTC)


def _at(ms: float) -> datetime:
    """A required timestamp (the job never writes these null)."""
    return datetime.fromtimestamp(ms / 1000.0, tz=UTC)


def _s(ms: float | None) -> float | None:
    return None if ms is None else ms / 1000.0


def _ids(values: Sequence[int] | None) -> str:
    return "" if not values else ",".join(str(v) for v in values)


def _ms(column: str) -> Column:
    return F.unix_millis(F.col(column)).cast("double").alias(column)


@dataclass(frozen=True, slots=True)
class _Table:
    """How one Parquet table becomes rows of one model."""

    name: str
    model: type[models.Model]
    columns: tuple[str, ...]
    build: Callable[[str, Row], models.Model]
    millis: tuple[str, ...] = ()  # timestamp columns to read as epoch milliseconds

    def select(self) -> list[str | Column]:
        return [_ms(c) if c in self.millis else c for c in self.columns]


def _outage_fields(row: Row) -> dict[str, Any]:
    return {
        "outages": row.outages,
        "recoveries": row.recoveries,
        "leaderless_s": row.leaderless_ms / 1000.0,
        "recovery_s": row.recovery_ms / 1000.0,
        "mttr_s": _s(row.mttr_ms),
    }


_OUTAGE_COLUMNS = ("day", "outages", "recoveries", "leaderless_ms", "recovery_ms", "mttr_ms")

TABLES: tuple[_Table, ...] = (
    _Table(
        "topic_daily",
        M.TopicAvailability,
        (*_OUTAGE_COLUMNS, "topic", "partitions", "availability"),
        lambda c, r: M.TopicAvailability(
            cluster=c,
            day=r.day,
            topic=r.topic,
            partitions=r.partitions,
            availability=r.availability,
            **_outage_fields(r),
        ),
    ),
    _Table(
        "partition_daily",
        M.PartitionOutage,
        (*_OUTAGE_COLUMNS, "topic", "partition"),
        lambda c, r: M.PartitionOutage(cluster=c, day=r.day, topic=r.topic, partition=r.partition, **_outage_fields(r)),
    ),
    _Table(
        "broker_daily",
        M.BrokerOutage,
        (*_OUTAGE_COLUMNS, "broker"),
        lambda c, r: M.BrokerOutage(cluster=c, day=r.day, broker=r.broker, **_outage_fields(r)),
    ),
    _Table(
        "unavailability_intervals",
        M.UnavailabilityInterval,
        (
            "topic",
            "partition",
            "start_ms",
            "estimated_start_ms",
            "end_ms",
            "duration_ms",
            "outage_ms",
            "cause_broker",
            "end_reason",
        ),
        lambda c, r: M.UnavailabilityInterval(
            cluster=c,
            topic=r.topic,
            partition=r.partition,
            started_at=_at(r.start_ms),
            estimated_started_at=_dt(r.estimated_start_ms),
            ended_at=_dt(r.end_ms),
            duration_s=_s(r.duration_ms),
            outage_s=_s(r.outage_ms),
            cause_broker=r.cause_broker,
            end_reason=r.end_reason or "",
        ),
    ),
    _Table(
        "elections_daily",
        M.ElectionCount,
        ("day", "strategy", "cause", "elections", "unclean"),
        lambda c, r: M.ElectionCount(
            cluster=c, day=r.day, strategy=r.strategy, cause=r.cause, elections=r.elections, unclean=r.unclean or 0
        ),
    ),
    _Table(
        "unclean_elections",
        M.UncleanElection,
        (
            "day",
            "ts",
            "epoch",
            "topic",
            "partition",
            "strategy",
            "cause",
            "leader_before",
            "leader_after",
            "isr_before",
            "isr_after",
        ),
        lambda c, r: M.UncleanElection(
            cluster=c,
            day=r.day,
            at=_at(r.ts),
            controller_epoch=r.epoch,
            topic=r.topic,
            partition=r.partition,
            strategy=r.strategy or "",
            cause=r.cause or "",
            leader_before=r.leader_before,
            leader_after=r.leader_after,
            isr_before=_ids(r.isr_before),
            isr_after=_ids(r.isr_after),
        ),
    ),
    _Table(
        "leader_counts",
        M.LeaderCount,
        ("minute", "broker", "leaders"),
        lambda c, r: M.LeaderCount(
            cluster=c, minute=_at(r.minute), epoch_minute=int(r.minute // 60_000), broker=r.broker, leaders=r.leaders
        ),
        millis=("minute",),
    ),
    _Table(
        "leader_skew",
        M.LeaderSkew,
        ("minute", "max_leaders", "min_leaders", "mean_leaders", "brokers", "skew"),
        lambda c, r: M.LeaderSkew(
            cluster=c,
            minute=_at(r.minute),
            epoch_minute=int(r.minute // 60_000),
            max_leaders=r.max_leaders,
            min_leaders=r.min_leaders,
            mean_leaders=r.mean_leaders,
            brokers=r.brokers,
            skew=r.skew,
        ),
        millis=("minute",),
    ),
    _Table(
        "failovers",
        M.ControllerFailover,
        (
            "controller_epoch",
            "controller_id",
            "previous_epoch",
            "previous_controller_id",
            "previous_last_ms",
            "first_ms",
            "gap_ms",
            "elected_at_ms",
            "completed_at_ms",
            "failover_ms",
        ),
        lambda c, r: M.ControllerFailover(
            cluster=c,
            controller_epoch=r.controller_epoch,
            controller_id=r.controller_id,
            previous_epoch=r.previous_epoch,
            previous_controller_id=r.previous_controller_id,
            previous_last_at=_dt(r.previous_last_ms),
            first_at=_at(r.first_ms),
            gap_s=_s(r.gap_ms),
            elected_at=_dt(r.elected_at_ms),
            completed_at=_dt(r.completed_at_ms),
            failover_s=_s(r.failover_ms),
        ),
    ),
    _Table(
        "reassignments",
        M.Reassignment,
        (
            "topic",
            "partition",
            "action_id",
            "audit_action_id",
            "started_ms",
            "ended_ms",
            "duration_ms",
            "status",
            "origin_replicas",
            "target_replicas",
        ),
        lambda c, r: M.Reassignment(
            cluster=c,
            topic=r.topic,
            partition=r.partition,
            # The audit Action this move was matched to ("audit:<id>"), else the controller's request id.
            action_id=(f"{AUDIT_PREFIX}{r.audit_action_id}" if r.audit_action_id is not None else r.action_id or "")[
                :64
            ],
            started_at=_at(r.started_ms),
            ended_at=_dt(r.ended_ms),
            duration_s=_s(r.duration_ms),
            status=r.status,
            origin_replicas=_ids(r.origin_replicas),
            target_replicas=_ids(r.target_replicas),
        ),
    ),
    _Table(
        "isr_flapping",
        M.IsrFlapping,
        ("day", "topic", "partition", "shrinks", "expands", "flaps", "rank"),
        lambda c, r: M.IsrFlapping(
            cluster=c,
            day=r.day,
            topic=r.topic,
            partition=r.partition,
            shrinks=r.shrinks,
            expands=r.expands,
            flaps=r.flaps,
            rank=r.rank,
        ),
    ),
)


@dataclass(frozen=True, slots=True)
class Manifest:
    cluster: str
    since: date
    until: date
    start: datetime
    end: datetime
    rows: dict[str, int]

    @classmethod
    def read(cls, path: Path) -> Manifest:
        data = json.loads(path.read_text())
        return cls(
            cluster=data["cluster"],
            since=date.fromisoformat(data["since"]),
            until=date.fromisoformat(data["until"]),
            start=datetime.fromtimestamp(data["window_start_ms"] / 1000.0, tz=UTC),
            end=datetime.fromtimestamp(data["window_end_ms"] / 1000.0, tz=UTC),
            rows=dict(data["rows"]),
        )


def run_directory(output_dir: Path, since: date, until: date) -> Path:
    return output_dir / RUNS_DIR / f"{since.isoformat()}_{until.isoformat()}"


def manifests(output_dir: Path, since: date, until: date, clusters: Sequence[str] = ()) -> list[Manifest]:
    """Return the manifests of a finished run; raise :class:`JobInputError` when there are none."""
    root = run_directory(output_dir, since, until) / MANIFESTS_DIR
    found = sorted(root.glob("*.json")) if root.is_dir() else []
    result = [Manifest.read(p) for p in found if not clusters or p.stem in clusters]
    if not result:
        raise JobInputError(f"no finished analytics run for {since}..{until} in {output_dir}")
    return result


def _rows(spark: SparkSession, path: Path, table: _Table) -> Iterator[Row]:
    if not path.is_dir():
        return iter(())
    frame: DataFrame = spark.read.parquet(str(path)).select(*table.select())
    return frame.toLocalIterator()


def _batched(items: Iterable[models.Model]) -> Iterator[list[models.Model]]:
    batch: list[models.Model] = []
    for item in items:
        batch.append(item)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _delete_owned(table: _Table, manifest: Manifest) -> None:
    """Delete the rows this window owns (intervals and reassignments are merged by key instead)."""
    objects = table.model._default_manager.filter(cluster=manifest.cluster)
    if table.model in (M.LeaderCount, M.LeaderSkew):
        first = int(manifest.start.timestamp() // 60)
        last = int(manifest.end.timestamp() // 60)
        objects.filter(epoch_minute__gte=first, epoch_minute__lt=last).delete()
    elif table.model is M.ControllerFailover:
        objects.filter(first_at__gte=manifest.start, first_at__lt=manifest.end).delete()
    elif table.model not in (M.UnavailabilityInterval, M.Reassignment):
        objects.filter(day__gte=manifest.since, day__lte=manifest.until).delete()


_Key = tuple[str, int, datetime]


class _KeyedMerge:
    """Merge rows keyed by (topic, partition, started_at) into a cluster's stored rows.

    Each row replaces the stored row with its key, except that an open row (no ``ended_at``) never
    replaces a closed one that ends after the window: a later run saw that end, this one cannot.
    Stored rows that started in the window and that the run no longer produces are deleted.
    """

    def __init__(self, model: type[models.Model], manifest: Manifest) -> None:
        self.model = model
        self.manifest = manifest
        objects = model._default_manager.filter(cluster=manifest.cluster)
        self.objects = objects
        self.in_window: dict[_Key, tuple[int, datetime | None]] = {
            (topic, partition, started): (pk, ended)
            for pk, topic, partition, started, ended in objects.filter(
                started_at__gte=manifest.start, started_at__lt=manifest.end
            ).values_list("pk", "topic", "partition", "started_at", "ended_at")
        }
        self.seen: set[_Key] = set()

    def _stored(self, key: _Key) -> tuple[int, datetime | None] | None:
        if key in self.in_window:
            return self.in_window[key]
        found = self.objects.filter(topic=key[0], partition=key[1], started_at=key[2]).values_list("pk", "ended_at")
        return next(iter(found), None)

    def rows_to_insert(self, batch: list[Any]) -> list[Any]:
        insert: list[Any] = []
        replaced: list[int] = []
        for row in batch:
            key = (row.topic, row.partition, row.started_at)
            self.seen.add(key)
            stored = self._stored(key)
            if stored is not None:
                pk, ended = stored
                if row.ended_at is None and ended is not None and ended >= self.manifest.end:
                    continue
                replaced.append(pk)
            insert.append(row)
        self._delete(replaced)
        return insert

    def finish(self) -> None:
        self._delete([pk for key, (pk, _) in self.in_window.items() if key not in self.seen])

    def _delete(self, pks: list[int]) -> None:
        for start in range(0, len(pks), 900):  # stay under SQLite's bound-parameter limit
            self.objects.filter(pk__in=pks[start : start + 900]).delete()


def load_cluster(
    spark: SparkSession, run_dir: Path, manifest: Manifest, progress: Callable[[str], None] | None = None
) -> dict[str, int]:
    """Replace one cluster's rows for the manifest's window, in one transaction; return rows per table."""
    loaded: dict[str, int] = {}
    with transaction.atomic():
        for table in TABLES:
            _delete_owned(table, manifest)
            merge = (
                _KeyedMerge(table.model, manifest)
                if table.model in (M.UnavailabilityInterval, M.Reassignment)
                else None
            )
            path = run_dir / table.name / f"cluster={manifest.cluster}"
            count = 0
            for built in _batched(table.build(manifest.cluster, row) for row in _rows(spark, path, table)):
                batch = built if merge is None else merge.rows_to_insert(built)
                if table.model is M.ControllerFailover:
                    epochs = [getattr(r, "controller_epoch") for r in batch]  # noqa: B009 - any model
                    M.ControllerFailover.objects.filter(cluster=manifest.cluster, controller_epoch__in=epochs).delete()
                table.model._default_manager.bulk_create(batch, batch_size=1000)
                count += len(batch)
            if merge is not None:
                merge.finish()
            loaded[table.name] = count
            if progress is not None:
                progress(f"loaded {count:,} {table.name.replace('_', ' ')} rows for {manifest.cluster}")
    return loaded


def load_run(
    spark: SparkSession,
    output_dir: Path,
    since: date,
    until: date,
    clusters: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, int]]:
    """Load every cluster of the finished run ``since..until``; return rows loaded per cluster and table."""
    run_dir = run_directory(output_dir, since, until)
    result: dict[str, dict[str, int]] = {}
    for manifest in manifests(output_dir, since, until, clusters):
        result[manifest.cluster] = load_cluster(spark, run_dir, manifest, progress)
        logger.info("loaded analytics for %s %s..%s: %s", manifest.cluster, since, until, result[manifest.cluster])
    return result
