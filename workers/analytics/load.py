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
  (rerunning an old window must not forget an outage's end that a later run saw);
* a cursor run's increment (manifest ``"increment": true``): its daily figures are added to the
  stored ones and what derives from them recomputed (:class:`_SummedMerge`); its minutes, failovers
  and unclean elections are replaced from its cursor on. The runner loads each increment once, in
  the transaction that moves the cursor.

Parquet is read with pyarrow in this process, not through Spark: a run's result tables are small
(days, minutes, intervals of one window), and reading them through the Spark session cost one
planned job per table, a large part of a small run's fixed cost. The output directory is already
read here (the manifests), so this needs nothing the worker did not have. Timestamps are read as
epoch milliseconds and converted here in UTC.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.dataset as ds
from django.db import models, transaction

from dashboard.analytics import models as M
from workers.analytics.inputs import MANIFESTS_DIR, RUNS_DIR, JobInputError
from workers.analytics.metrics import AUDIT_PREFIX

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


@dataclass(frozen=True, slots=True)
class _From:
    """A model field computed from one Parquet column (``convert`` is applied to its value)."""

    column: str
    convert: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class _Derived:
    """A model field computed from several Parquet columns of the row."""

    columns: tuple[str, ...]
    compute: Callable[[Row], Any]


Row = dict[str, Any]
_Source = str | _From | _Derived


@dataclass(frozen=True, slots=True)
class _Table:
    """How one Parquet table becomes rows of one model: each model field and where it comes from.

    One declaration per table gives both the columns to read and the rows to build, so the two
    cannot disagree. A plain string copies that column as it is.
    """

    name: str
    model: type[models.Model]
    fields: dict[str, _Source]
    millis: tuple[str, ...] = ()  # timestamp columns to read as epoch milliseconds

    @property
    def columns(self) -> tuple[str, ...]:
        found: list[str] = []
        for source in self.fields.values():
            if isinstance(source, str):
                found.append(source)
            elif isinstance(source, _From):
                found.append(source.column)
            else:
                found.extend(source.columns)
        return tuple(dict.fromkeys(found))

    def build(self, cluster: str, row: Row) -> models.Model:
        values: dict[str, Any] = {}
        for name, source in self.fields.items():
            if isinstance(source, str):
                values[name] = row[source]
            elif isinstance(source, _From):
                values[name] = source.convert(row[source.column])
            else:
                values[name] = source.compute(row)
        return self.model(cluster=cluster, **values)


def _or(default: Any) -> Callable[[Any], Any]:
    return lambda value: default if value is None else value


_OUTAGE_FIELDS: dict[str, _Source] = {
    "day": "day",
    "outages": "outages",
    "recoveries": "recoveries",
    "leaderless_s": _From("leaderless_ms", _s),
    "recovery_s": _From("recovery_ms", _s),
    "mttr_s": _From("mttr_ms", _s),
}
_EPOCH_MINUTE = _From("minute", lambda ms: int(ms // 60_000))


def _action_id(row: Row) -> str:
    """The audit Action this move was matched to (``audit:<id>``), else the controller's request id."""
    if row["audit_action_id"] is not None:
        return f"{AUDIT_PREFIX}{row['audit_action_id']}"[:64]
    return (row["action_id"] or "")[:64]


TABLES: tuple[_Table, ...] = (
    _Table(
        "topic_daily",
        M.TopicAvailability,
        {**_OUTAGE_FIELDS, "topic": "topic", "partitions": "partitions", "availability": "availability"},
    ),
    _Table("partition_daily", M.PartitionOutage, {**_OUTAGE_FIELDS, "topic": "topic", "partition": "partition"}),
    _Table("broker_daily", M.BrokerOutage, {**_OUTAGE_FIELDS, "broker": "broker"}),
    _Table(
        "unavailability_intervals",
        M.UnavailabilityInterval,
        {
            "topic": "topic",
            "partition": "partition",
            "started_at": _From("start_ms", _at),
            "estimated_started_at": _From("estimated_start_ms", _dt),
            "ended_at": _From("end_ms", _dt),
            "duration_s": _From("duration_ms", _s),
            "outage_s": _From("outage_ms", _s),
            "cause_broker": "cause_broker",
            "end_reason": _From("end_reason", _or("")),
        },
    ),
    _Table(
        "elections_daily",
        M.ElectionCount,
        {
            "day": "day",
            "strategy": "strategy",
            "cause": "cause",
            "elections": "elections",
            "unclean": _From("unclean", _or(0)),
        },
    ),
    _Table(
        "unclean_elections",
        M.UncleanElection,
        {
            "day": "day",
            "at": _From("ts", _at),
            "controller_epoch": "epoch",
            "topic": "topic",
            "partition": "partition",
            "strategy": _From("strategy", _or("")),
            "cause": _From("cause", _or("")),
            "leader_before": "leader_before",
            "leader_after": "leader_after",
            "isr_before": _From("isr_before", _ids),
            "isr_after": _From("isr_after", _ids),
        },
    ),
    _Table(
        "leader_counts",
        M.LeaderCount,
        {"minute": _From("minute", _at), "epoch_minute": _EPOCH_MINUTE, "broker": "broker", "leaders": "leaders"},
        millis=("minute",),
    ),
    _Table(
        "leader_skew",
        M.LeaderSkew,
        {
            "minute": _From("minute", _at),
            "epoch_minute": _EPOCH_MINUTE,
            "max_leaders": "max_leaders",
            "min_leaders": "min_leaders",
            "mean_leaders": "mean_leaders",
            "brokers": "brokers",
            "skew": "skew",
        },
        millis=("minute",),
    ),
    _Table(
        "failovers",
        M.ControllerFailover,
        {
            "controller_epoch": "controller_epoch",
            "controller_id": "controller_id",
            "previous_epoch": "previous_epoch",
            "previous_controller_id": "previous_controller_id",
            "previous_last_at": _From("previous_last_ms", _dt),
            "first_at": _From("first_ms", _at),
            "gap_s": _From("gap_ms", _s),
            "elected_at": _From("elected_at_ms", _dt),
            "completed_at": _From("completed_at_ms", _dt),
            "failover_s": _From("failover_ms", _s),
        },
    ),
    _Table(
        "reassignments",
        M.Reassignment,
        {
            "topic": "topic",
            "partition": "partition",
            "action_id": _Derived(("action_id", "audit_action_id"), _action_id),
            "started_at": _From("started_ms", _at),
            "ended_at": _From("ended_ms", _dt),
            "duration_s": _From("duration_ms", _s),
            "status": "status",
            "origin_replicas": _From("origin_replicas", _ids),
            "target_replicas": _From("target_replicas", _ids),
        },
    ),
    _Table(
        "isr_flapping",
        M.IsrFlapping,
        {
            "day": "day",
            "topic": "topic",
            "partition": "partition",
            "shrinks": "shrinks",
            "expands": "expands",
            "flaps": "flaps",
            "rank": "rank",
        },
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
    #: A cursor run's results: daily figures to add to the stored ones (see :class:`_SummedMerge`).
    increment: bool = False
    effective_end_ms: int | None = None

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
            increment=bool(data.get("increment", False)),
            effective_end_ms=data.get("effective_end_ms"),
        )


def run_directory(output_dir: Path, since: date, until: date) -> Path:
    return output_dir / RUNS_DIR / f"{since.isoformat()}_{until.isoformat()}"


def manifests(output_dir: Path, since: date, until: date, clusters: Sequence[str] = ()) -> list[Manifest]:
    """Return the manifests of a finished run; raise :class:`JobInputError` when there are none."""
    return _manifests_in(run_directory(output_dir, since, until), since, until, clusters)


def _manifests_in(run_dir: Path, since: date, until: date, clusters: Sequence[str] = ()) -> list[Manifest]:
    root = run_dir / MANIFESTS_DIR
    found = sorted(root.glob("*.json")) if root.is_dir() else []
    result = [Manifest.read(p) for p in found if not clusters or p.stem in clusters]
    if not result:
        raise JobInputError(f"no finished analytics run for {since}..{until} in {run_dir.parent.parent}")
    return result


def _rows(path: Path, table: _Table) -> Iterator[Row]:
    """The table's columns, row by row, from the Parquet files Spark wrote under ``path``."""
    files = sorted(str(p) for p in path.rglob("*.parquet") if not p.name.startswith((".", "_")))
    if not files:
        return
    for batch in ds.dataset(files, format="parquet").to_batches(columns=list(table.columns)):
        columns = {
            name: _epoch_ms(batch.column(name)) if name in table.millis else batch.column(name)
            for name in table.columns
        }
        yield from pa.Table.from_pydict(columns).to_pylist()


def _epoch_ms(column: pa.Array) -> pa.Array:
    """A timestamp column as epoch milliseconds (a double), whatever unit Spark stored it in."""
    return column.cast(pa.timestamp("ms"), safe=False).cast(pa.int64()).cast(pa.float64())


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
    elif manifest.increment and table.model is M.UncleanElection:
        objects.filter(at__gte=manifest.start, at__lt=manifest.end).delete()
    elif manifest.increment and table.model in _SUMMED:
        return  # added to, not replaced
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


_OUTAGE_SUMS = ("outages", "recoveries", "leaderless_s", "recovery_s")
#: Per model of the daily tables: its key within a cluster and the figures an increment adds.
_SUMMED: dict[type[models.Model], tuple[tuple[str, ...], tuple[str, ...]]] = {
    M.TopicAvailability: (("day", "topic"), _OUTAGE_SUMS),
    M.PartitionOutage: (("day", "topic", "partition"), _OUTAGE_SUMS),
    M.BrokerOutage: (("day", "broker"), _OUTAGE_SUMS),
    M.ElectionCount: (("day", "strategy", "cause"), ("elections", "unclean")),
    M.IsrFlapping: (("day", "topic", "partition"), ("shrinks", "expands")),
}
_DAY_MS = 86_400_000


class _SummedMerge:
    """Add a cursor run's daily figures to the stored ones; recompute what derives from them.

    Every daily figure the job writes is a sum over the records of the day (outages started,
    recoveries, leaderless and recovery time, elections, ISR shrinks and expands), and a cursor run
    counts only the records after its cursor, so the day's figure is the stored one plus the run's.
    What is not a sum is derived here from the sums: MTTR, availability (over the day up to the
    run's end), flaps, and the day's flapping rank (every partition of an increment's day is kept,
    so the rank is exact; the nightly run keeps the top ``ANALYTICS_FLAPPING_TOP`` again).
    """

    def __init__(self, model: type[models.Model], manifest: Manifest) -> None:
        self.model = model
        self.manifest = manifest
        self.key, self.sums = _SUMMED[model]

    def _key(self, row: Any) -> tuple[Any, ...]:
        return tuple(getattr(row, name) for name in self.key)

    def _covered_s(self, day: date) -> float:
        start = datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000
        end = min(start + _DAY_MS, float(self.manifest.effective_end_ms or start + _DAY_MS))
        return max(0.0, end - start) / 1000.0

    def _derive(self, row: Any) -> None:
        if "recoveries" in self.sums:
            row.mttr_s = row.recovery_s / row.recoveries if row.recoveries > 0 else None
        if self.model is M.TopicAvailability:
            covered = self._covered_s(row.day)
            row.availability = (
                max(0.0, 1.0 - row.leaderless_s / (row.partitions * covered))
                if covered > 0 and row.partitions
                else None
            )
        if self.model is M.IsrFlapping:
            row.flaps = min(row.shrinks, row.expands)

    def apply(self, rows: list[Any]) -> int:
        days = {row.day for row in rows}
        stored: dict[tuple[Any, ...], Any] = {
            self._key(row): row
            for row in self.model._default_manager.filter(cluster=self.manifest.cluster, day__in=days)
        }
        changed: dict[int, Any] = {}
        new: list[Any] = []
        for row in rows:
            old = stored.get(self._key(row))
            if old is None:
                stored[self._key(row)] = row
                new.append(row)
                target = row
            else:
                for name in self.sums:
                    setattr(old, name, getattr(old, name) + getattr(row, name))
                if self.model is M.TopicAvailability:
                    old.partitions = row.partitions  # every partition known by the run's end
                changed[old.pk] = target = old
            self._derive(target)
        fields = [*self.sums, "mttr_s", "partitions", "availability", "flaps", "rank"]
        if self.model is M.IsrFlapping:
            for day in days:
                ranked = sorted(
                    (r for r in stored.values() if r.day == day),
                    key=lambda r: (-r.flaps, -(r.shrinks + r.expands), r.topic, r.partition),
                )
                for rank, row in enumerate(ranked, start=1):
                    if row.rank != rank and row.pk is not None:
                        changed[row.pk] = row
                    row.rank = rank
        present = {f.name for f in self.model._meta.concrete_fields}
        if changed:
            self.model._default_manager.bulk_update(
                list(changed.values()), [f for f in fields if f in present], batch_size=1000
            )
        self.model._default_manager.bulk_create(new, batch_size=1000)
        return len(rows)


def load_cluster(run_dir: Path, manifest: Manifest, progress: Callable[[str], None] | None = None) -> dict[str, int]:
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
            if manifest.increment and table.model in _SUMMED:
                loaded[table.name] = _SummedMerge(table.model, manifest).apply(
                    [table.build(manifest.cluster, row) for row in _rows(path, table)]
                )
                continue
            count = 0
            for built in _batched(table.build(manifest.cluster, row) for row in _rows(path, table)):
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
    output_dir: Path,
    since: date,
    until: date,
    clusters: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, int]]:
    """Load every cluster of the finished run ``since..until``; return rows loaded per cluster and table."""
    return load_directory(run_directory(output_dir, since, until), since, until, clusters, progress)


def load_directory(
    run_dir: Path,
    since: date,
    until: date,
    clusters: Sequence[str] = (),
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, int]]:
    """Load the run written to ``run_dir`` (a cursor run's increment must be loaded once: ``runner``)."""
    result: dict[str, dict[str, int]] = {}
    for manifest in _manifests_in(run_dir, since, until, clusters):
        result[manifest.cluster] = load_cluster(run_dir, manifest, progress)
        logger.info("loaded analytics for %s %s..%s: %s", manifest.cluster, since, until, result[manifest.cluster])
    return result
