"""The analytics job: state-change history of one or more clusters in, Parquet metrics out.

Run it as ``spark-submit workers/analytics/job.py --input DIR --output DIR [--since D] [--until D]``
(on ``local[*]`` or any master), through ``manage.py run_analytics`` or from Python with
:func:`run`. It imports no Django: on a cluster the executors need nothing but Spark.

Input: the operator actions exported from the audit table (``--actions``, see ``actions.py``) and
``<input>/<cluster>/state-change-YYYY-MM-DD.jsonl`` (the controller's daily files) or, for a
day ``compaction`` has already converted, ``<compacted>/cluster=<cluster>/date=<day>/``. Output:
``<output>/runs/<since>_<until>/<table>/cluster=<cluster>/*.parquet`` plus a manifest per cluster
that ``load`` reads, and a checkpoint (``<output>/_state/``) of every partition's state at the end of
the window, so that tomorrow's run can start from it instead of re-reading the whole history.

How a run works:

1. Find the files: for each cluster the days of the window, plus "warm-up" days between the last
   checkpoint and the window (all earlier days when there is none), because a partition's state on
   the first morning depends on what happened before.
2. Read them with the explicit schema, project to the narrow ``events`` frame and cache it (one
   cache per cluster): every metric is computed from that cache, so the JSON is parsed once. A
   large run's compacted days are not cached: each step reads its columns of them (``_read_large``).
3. Aggregate the cache three ways at once (per partition and day, per controller epoch, and the
   rare kinds), then walk each partition's leadership records in order (the one sort).
4. Derive outage intervals, leader changes and reassignments from those, then write every table
   (independent writes in parallel), the manifests, and the checkpoint (closed windows only).
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

if __package__ in (None, ""):  # run as a script by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from workers.analytics import actions as A
from workers.analytics import collected
from workers.analytics import metrics as M
from workers.analytics import records as R
from workers.analytics import transforms as X
from workers.analytics.inputs import (
    MANIFESTS_DIR,
    RUNS_DIR,
    ClusterInput,
    JobConfig,
    JobInputError,
    discover,
    input_bytes,
    parse_day,
    read_cluster,
    read_cluster_parts,
    state_root,
    yesterday_utc,
)
from workers.analytics.session import (
    UNCOMPRESSED_CACHE_CONF,
    SessionSource,
    SparkUnavailableError,
    build_spark,
    resolve,
)
from workers.analytics.small import engine as small_engine
from workers.analytics.small.state import TABLE_SCHEMAS, write_state, write_table

__all__ = [
    "MANIFESTS_DIR",
    "RUNS_DIR",
    "TABLES",
    "UNCOMPRESSED_CACHE_CONF",
    "JobConfig",
    "JobInputError",
    "JobResult",
    "SparkUnavailableError",
    "build_spark",
    "discover",
    "main",
    "parse_day",
    "run",
    "yesterday_utc",
]

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[float, str], None]

STATE_PARTS = ("partitions", "controller", "reassignments", "brokers")
TABLES = (
    "unavailability_intervals",
    "partition_daily",
    "broker_daily",
    "topic_daily",
    "elections_daily",
    "unclean_elections",
    "leader_counts",
    "leader_skew",
    "failovers",
    "reassignments",
    "reassignment_actions",
    "election_actions",
    "isr_flapping",
)


def _union(frames: Iterable[DataFrame]) -> DataFrame | None:
    result: DataFrame | None = None
    for frame in frames:
        result = frame if result is None else result.unionByName(frame)
    return result


# --- checkpoints ------------------------------------------------------------------------------------------


def _state_path(root: Path, part: str, cluster: str | None = None) -> Path:
    path = root / part
    return path if cluster is None else path / f"cluster={cluster}"


_INTS = T.ArrayType(T.IntegerType())
STATE_SCHEMAS = {
    "partitions": T.StructType(
        [
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("state", T.IntegerType()),
            T.StructField("leader", T.IntegerType()),
            T.StructField("state_ms", T.DoubleType()),
            T.StructField("cause_broker", T.IntegerType()),
            T.StructField("estimated_ms", T.DoubleType()),
        ]
    ),
    "controller": T.StructType(
        [
            T.StructField("epoch", T.LongType()),
            T.StructField("controller_id", T.IntegerType()),
            T.StructField("last_ms", T.DoubleType()),
        ]
    ),
    "reassignments": T.StructType(
        [
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("started_ms", T.DoubleType()),
            T.StructField("action_id", T.StringType()),
            T.StructField("origin_replicas", _INTS),
            T.StructField("target_replicas", _INTS),
        ]
    ),
    "brokers": T.StructType([T.StructField("broker", T.IntegerType())]),
}


def _read_state(
    spark: SparkSession, config: JobConfig, clusters: Sequence[ClusterInput], part: str
) -> DataFrame | None:
    # Explicit schemas: a part with no rows is an empty directory, which Spark cannot infer from.
    frames = [
        spark.read.schema(STATE_SCHEMAS[part])
        .parquet(str(_state_path(c.state_dir, part, c.name)))
        .withColumn("cluster", F.lit(c.name))
        for c in clusters
        if c.state_dir is not None
    ]
    return _union(frames)


# --- the run ---------------------------------------------------------------------------------------------


@dataclass(slots=True)
class JobResult:
    """What a run did: where its tables are, how many rows each has, how long it took."""

    since: str
    until: str
    clusters: list[str]
    output: str
    records: int
    rows: dict[str, int]
    seconds: float
    checkpoint: bool
    warm_up_days: dict[str, int]
    #: Where the end state was saved for the next cursor run (``_state/at=<ms>``), if it was.
    state_ms: int | None = None
    #: Which engine computed it: ``spark``, or ``python`` for a tiny run (``workers.analytics.small``).
    engine: str = "spark"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class _Progress:
    def __init__(self, callback: ProgressCallback | None, steps: int) -> None:
        self._callback = callback
        self._steps = steps
        self._done = 0

    def step(self, message: str) -> None:
        self._done += 1
        logger.info("analytics: %s", message)
        if self._callback is not None:
            self._callback(min(1.0, self._done / self._steps), message)


def run(
    config: JobConfig,
    spark: SessionSource | None = None,
    progress: ProgressCallback | None = None,
) -> JobResult:
    """Compute every metric for ``config``'s window and write the results; return a summary.

    A tiny run (at most ``config.python_max_records`` records, all JSON) takes the Python engine
    (``workers.analytics.small``): the same tables and saved state, no Spark. ``spark`` may be a
    function that opens the session, so a run that needs none never connects."""
    started = time.perf_counter()
    clusters = discover(config)
    if small_engine.eligible(config, clusters):
        return small_engine.run(config, progress)
    spark = build_spark() if spark is None else resolve(spark)
    window = config.window
    # A small input (a cursor run's few minutes, a quiet day) costs Spark's per-job and per-stage
    # overhead, not its data: one task per shuffle instead of the session's several, no separate job
    # checking the 64-bit partition key (walking by name gives the same rows), no adaptive
    # execution, and the tables and state fetched in a few jobs and written by the driver
    # (``_write_collected``) instead of one job each.
    small = input_bytes(clusters) <= config.small_input_bytes
    saves = (1 if config.closed else 0) + (1 if config.save_state else 0)
    report = _Progress(progress, steps=6 if small else 5 + len(TABLES) + saves)
    names = [c.name for c in clusters]
    report.step(f"found input for {len(clusters)} cluster(s): {', '.join(names)}")

    seeds = {part: _read_state(spark, config, clusters, part) for part in STATE_PARTS}

    cached: list[DataFrame] = []

    def keep(frame: DataFrame) -> DataFrame:
        cached.append(frame.persist(StorageLevel.MEMORY_AND_DISK))
        return frame

    # Independent Spark jobs run side by side: most of them are small, and a small job spends its
    # time in scheduling and commit latency that another job can overlap (Spark's scheduler is
    # thread-safe; progress is reported from this thread only).
    pool = ThreadPoolExecutor(max_workers=SMALL_RUN_THREADS if small else THREADS, thread_name_prefix="analytics")
    restore = _small_run_settings(spark) if small else {}
    try:
        # 1. Parse JSON once. One cache per cluster, with the cluster name added on top rather than
        #    stored: a constant column would still cost a value per cached row.
        #    A large run reads the records with an ``extra`` apart and does not cache its compacted
        #    days: each step reads the columns it needs from the Parquet (``_read_large``).
        rare_parts: list[tuple[str, DataFrame]] = []
        if small:
            parsed = [(c.name, keep(_prepared(read_cluster(spark, c), window))) for c in clusters]
        else:
            parsed, rare_parts = _read_large(spark, clusters, window, keep)
        # A large run fills each cache before the next step reads it (one pass over the JSON); a
        # small run does not wait: each wait is a round of job latency, and its caches fill with the
        # first job that reads them. It counts its records in the jobs that fetch its results.
        barriers = not small
        counting = [(name, pool.submit(frame.count)) for name, frame in parsed] if barriers else []
        for _, count in counting:
            count.result()
        events = _union(frame.withColumn("cluster", F.lit(name)) for name, frame in parsed)
        assert events is not None  # discover() returned at least one cluster
        if barriers:
            report.step(f"read {sum(count.result() for _, count in counting):,} state-change records")
        else:
            report.step("reading the state-change records")

        # 2. The three aggregates of the whole cache, in parallel; then the walk.
        rare = _union(frame.withColumn("cluster", F.lit(name)) for name, frame in rare_parts)
        special = keep(X.rare_rows(events) if rare is None else rare)
        days = keep(X.partition_days(events))
        epochs = keep(M.controller_epochs(events, seeds["controller"]))
        if barriers:
            _materialise(pool, special, days, epochs)
        inventory = keep(X.partition_inventory(special, days, seeds["partitions"]))
        hashed = not small and X.partition_keys_are_unique(inventory)
        if not hashed and not small:
            logger.warning("partition hash collision: walking partitions by name (slower)")
        walked = keep(X.walk_partitions(X.leadership_stream(events, days, seeds["partitions"]), hashed_key=hashed))
        if barriers:
            walked.count()
        report.step("walked every partition's leadership history")

        # 3. What several tables share (cached; filled by the first write that needs each).
        intervals = keep(
            X.with_estimated_starts(
                X.unavailability_intervals(walked, hashed_key=hashed), X.session_losses(special), seeds["partitions"]
            )
        )
        deltas = keep(M.leader_deltas(walked, window))
        pairs = keep(M.reassignments(M.reassignment_rows(special, seeds["reassignments"])))
        in_window = X.overlapping(intervals, window)
        facts = keep(M.outage_facts(in_window, window))
        brokers = keep(M.known_brokers(special, deltas, seeds["brokers"]))
        counts = keep(M.leader_counts(deltas, brokers, window))
        moved = X.overlapping(pairs, window, "started_ms", "ended_ms")
        # The operator actions (audit export): who asked for each move, and elections per action.
        exported = A.read_actions(spark, config.actions_dir, names)
        moved = keep(A.attribute_reassignments(moved, exported))
        action_elections = A.election_actions(
            X.rare(special, R.KIND_ELECTION).where(F.col("strategy") == A.STRATEGY_PREFERRED), exported
        )
        action_elections = action_elections.where(
            (F.col("requested_ms") >= F.lit(float(window.counted_from_ms)))
            & (F.col("requested_ms") < F.lit(float(window.end_ms)))
        )

        # 4. Every table, in parallel.
        tables: dict[str, DataFrame] = {
            "unavailability_intervals": X.with_dates(
                in_window.withColumn("start_date", X.epoch_day("start_ms")), "start_date"
            ),
            "partition_daily": X.with_dates(M.partition_daily(facts)),
            "broker_daily": X.with_dates(M.broker_daily(facts)),
            "topic_daily": X.with_dates(M.topic_daily(facts, inventory, window)),
            "elections_daily": X.with_dates(M.elections_daily(special, window)),
            "unclean_elections": X.with_dates(M.unclean_elections(special, window)),
            "leader_counts": X.minute_timestamps(counts),
            "leader_skew": X.minute_timestamps(M.leader_skew(counts)),
            "failovers": M.failovers(special, epochs, window),
            "reassignments": moved,
            "reassignment_actions": M.reassignment_actions(moved),
            "election_actions": action_elections,
            # Beat's runs of today keep every partition's counts: a later increment is added to each
            # and the load ranks them (only a whole-day recompute keeps just the top).
            "isr_flapping": X.with_dates(
                M.isr_flapping(days, window, 2**31 - 1 if config.save_state else config.flapping_top)
            ),
        }
        state = {
            "partitions": X.checkpoint_partitions(walked, intervals, inventory),
            "controller": X.checkpoint_controller(epochs),
            "reassignments": X.checkpoint_reassignments(pairs),
            "brokers": brokers,
        }
        roots = []
        if config.closed:
            roots.append(state_root(config.output_dir, as_of=config.until))
        if config.save_state:
            roots.append(state_root(config.output_dir, at_ms=window.effective_end_ms))
        writer = _Writer(config, names)
        saving: list[_Checkpoint] = []  # a small run's state is written with its tables
        if small:
            per_cluster = _write_collected(pool, config, names, tables, state, roots, events)
            report.step(f"computed every table in {SMALL_RUN_FETCHES} Spark jobs and wrote them")
        else:
            futures = {pool.submit(writer.write, name, frame): name for name, frame in tables.items()}
            # The state's parts go in the same queue: small jobs overlap each other's latency.
            saving = [_Checkpoint(pool, root, names, state) for root in roots]
            for future in as_completed(futures):
                future.result()
                report.step(f"wrote {futures[future].replace('_', ' ')}")
            per_cluster = dict.fromkeys(names, 0)
            for name, count in counting:
                per_cluster[name] += count.result()
        rows = writer.finish(config, per_cluster)
        report.step(f"wrote {sum(rows.values()):,} result rows to {config.run_dir}")
        for checkpoint in saving:
            checkpoint.finish()
            report.step(f"saved each partition's state ({checkpoint.root.name}) for the next run")
        records = sum(per_cluster.values())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        # Latest first: a frame cached on top of another goes before it. Uncaching a frame makes
        # Spark re-plan each cached frame that reads it and whose data is not loaded yet
        # (CacheManager's recache), so first-cached-first could re-plan a later frame once per
        # frame below it.
        for frame in reversed(cached):
            frame.unpersist()
        _restore_settings(spark, restore)

    result = JobResult(
        since=config.since.isoformat(),
        until=config.until.isoformat(),
        clusters=names,
        output=str(config.run_dir),
        records=records,
        rows=rows,
        seconds=round(time.perf_counter() - started, 2),
        checkpoint=config.closed,
        warm_up_days={c.name: len(c.read_days) - len(c.window_days) for c in clusters},
        state_ms=window.effective_end_ms if config.save_state else None,
    )
    report.step(f"done in {result.seconds:.1f} s")
    return result


def _before_end(events: DataFrame, window: X.ReportWindow) -> DataFrame:
    return events.where(F.col("ts") < F.lit(float(window.end_ms)))


def _prepared(records: DataFrame, window: X.ReportWindow) -> DataFrame:
    return _before_end(X.prepare_events(records), window)


def _read_large(
    spark: SparkSession,
    clusters: Sequence[ClusterInput],
    window: X.ReportWindow,
    keep: Callable[[DataFrame], DataFrame],
) -> tuple[list[tuple[str, DataFrame]], list[tuple[str, DataFrame]]]:
    """A large run's input: the bulk (every record, no ``extra``) and the records with an ``extra``
    (not cached here: the run caches them all together), each as (cluster, frame) pairs.

    Compacted days are read twice, the bulk without the rare kinds' columns and those kinds alone
    (``transforms.prepare_rare``); JSON days once, with ``extra``, which the bulk's scans then skip.
    Measured on the benchmark history's first ten compacted days (3.8 million records; a local[2]
    JVM, warm, load 3.5-4, the two ways alternated, three rounds each): reading and caching, the
    three aggregates and the walk took 12.5 executor CPU-s (19.8 JVM CPU-s) this way, against 16.3
    (28.0) with ``extra`` in the one cache.

    The compacted bulk is not cached: each of its readers (the partition-day aggregate, the epochs,
    the walk's stream, the record count) reads from the Parquet only the columns it needs, and only
    the first decodes the ISR arrays. Filling the cache cost more than those reads: on the same ten
    days (``local[2]``, warm, load 2.5-3), projecting the bulk took 2.95 executor CPU-s, 1.15 without
    the ISR comparisons, and projecting and caching it 6.66; a whole recompute on a warm Spark Connect
    server (alternated with the cached bulk, three rounds, load 3.3-4.2) took 69.4-77.2 server CPU-s
    against 76.1-89.3. (Before the bulk dropped ``extra``, reading every column again for each step
    had cost more than the cache: 123.8 against 118.0 server CPU-s for the full history.)"""
    parsed: list[tuple[str, DataFrame]] = []
    rare_parts: list[tuple[str, DataFrame]] = []
    for cluster in clusters:
        json_days, parquet_days = read_cluster_parts(spark, cluster)
        if json_days is not None:
            frame = keep(_prepared(json_days, window))
            parsed.append((cluster.name, frame.drop("extra")))
            rare_parts.append((cluster.name, X.rare_rows(frame)))
        if parquet_days is not None:
            parsed.append((cluster.name, _prepared(parquet_days, window).drop("extra")))
            rare_parts.append((cluster.name, _before_end(X.prepare_rare(parquet_days), window)))
    return parsed, rare_parts


# A small run's shuffles: one task each. Measured on the benchmark's cursor run (2 records; warm
# server, shared 2-core machine at load 6-7, runs alternated): with the key check skipped too,
# 7.4-11.0 server CPU-s and 8.2-11.2 s wall, against 10.6-12.7 CPU-s and 9.6-14.7 s with 8 tasks.
# And no adaptive execution: it makes every shuffle stage a job of its own and re-plans the rest of
# the query after each, which a run of a few thousand records pays for and never gains from. The
# same cursor run (``local[2]`` server, warm, load 2.5-3, runs alternated) took 29 jobs, 52 stages,
# 6.5-7.6 s and 10.2-13.3 server CPU-s without it, against 66 jobs, 65 stages, 8.3-8.9 s and
# 14.8-15.8 CPU-s with it.
SMALL_RUN_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false"}
#: Spark jobs submitted side by side (a small run's wait on scheduling and commit latency). Eight
#: instead of four gained nothing measurable on the benchmark's cursor run.
THREADS = 4
SMALL_RUN_THREADS = 4
#: A small run fetches its tables and state parts (``collected``) in this many jobs side by side,
#: without waiting for its caches first. The demo cluster's two days recomputed (1,986 records,
#: 17,345 result rows; ``local[2]`` server, warm, load 6, runs alternated): 10 jobs, 31 stages,
#: 7.0-7.5 s and 10.9-12.8 server CPU-s, against 28 jobs, 50 stages, 8.2-11.4 s and 12.9-16.1 CPU-s
#: writing each table as a job with waits (no adaptive execution in either). One fetch job instead
#: of four: 8.4-11.8 s (its whole plan is prepared and compiled on one driver thread).
SMALL_RUN_FETCHES = 4


def _small_run_settings(spark: SparkSession) -> dict[str, str | None]:
    """Apply :data:`SMALL_RUN_CONF` to the session; return the values to restore afterwards."""
    restore = {key: spark.conf.get(key, None) for key in SMALL_RUN_CONF}
    for key, value in SMALL_RUN_CONF.items():
        spark.conf.set(key, value)
    return restore


def _restore_settings(spark: SparkSession, restore: dict[str, str | None]) -> None:
    for key, value in restore.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def _write_collected(
    pool: ThreadPoolExecutor,
    config: JobConfig,
    names: Sequence[str],
    tables: dict[str, DataFrame],
    state: dict[str, DataFrame],
    roots: Sequence[Path],
    events: DataFrame,
) -> dict[str, int]:
    """A small run's tables and saved state fetched in a few jobs and written here (``collected``),
    its records counted in the same jobs. Returns the records per cluster."""
    frames = {**tables, **{f"_state/{part}": frame for part, frame in state.items()}}
    frames["_records"] = events.groupBy("cluster").agg(F.count(F.lit(1)).alias("records"))
    keys = list(frames)
    groups = [keys[i::SMALL_RUN_FETCHES] for i in range(SMALL_RUN_FETCHES)]
    fetched: dict[str, pa.Table] = {}
    for part in pool.map(lambda group: collected.collect({key: frames[key] for key in group}), groups):
        fetched.update(part)
    for name in TABLES:
        write_table(config.run_dir / name, names, fetched[name], TABLE_SCHEMAS[name])
    for root in roots:
        write_state(root, names, {part: fetched[f"_state/{part}"] for part in STATE_PARTS})
    per_cluster = {row["cluster"]: int(row["records"]) for row in fetched["_records"].to_pylist()}
    return {name: per_cluster.get(name, 0) for name in names}


def _materialise(pool: ThreadPoolExecutor, *frames: DataFrame) -> None:
    """Fill several caches at once (each ``count`` is one job)."""
    for future in [pool.submit(frame.count) for frame in frames]:
        future.result()


class _Writer:
    """Write result tables under the run directory, replacing only this run's clusters."""

    def __init__(self, config: JobConfig, clusters: Sequence[str]) -> None:
        self._root = config.run_dir
        self._clusters = list(clusters)

    def write(self, table: str, frame: DataFrame) -> None:
        path = self._root / table
        # A cluster that has no rows this time must not keep last run's files.
        for cluster in self._clusters:
            shutil.rmtree(path / f"cluster={cluster}", ignore_errors=True)
        frame.write.mode("append").partitionBy("cluster").parquet(str(path))

    def _counts(self) -> dict[tuple[str, str], int]:
        """Rows per (table, cluster), from the Parquet footers just written (no Spark job: the
        driver writes the manifests to the same directory, so it can read the footers too)."""
        counted: dict[tuple[str, str], int] = {}
        for table in TABLES:
            for cluster in self._clusters:
                files = (self._root / table / f"cluster={cluster}").glob("*.parquet")
                counted[(table, cluster)] = sum(
                    pq.ParquetFile(f).metadata.num_rows for f in files if not f.name.startswith((".", "_"))
                )
        return counted

    def finish(self, config: JobConfig, records: dict[str, int]) -> dict[str, int]:
        """Count each table's rows per cluster and write the manifests ``load`` reads."""
        counted = self._counts()
        totals = {table: sum(counted[(table, c)] for c in self._clusters) for table in TABLES}
        manifests = self._root / MANIFESTS_DIR
        manifests.mkdir(parents=True, exist_ok=True)
        for cluster in self._clusters:
            manifest = {
                "cluster": cluster,
                "since": config.since.isoformat(),
                "until": config.until.isoformat(),
                "window_start_ms": config.window.counted_from_ms,
                "window_end_ms": config.window.end_ms,
                "effective_end_ms": config.window.effective_end_ms,
                # An increment (a cursor run): its daily figures are added to the stored ones.
                "increment": config.from_ms is not None,
                "records": records.get(cluster, 0),
                "rows": {table: counted[(table, cluster)] for table in TABLES},
                "written_at": datetime.now(UTC).isoformat(),
            }
            tmp = manifests / f".{cluster}.json.tmp"
            tmp.write_text(json.dumps(manifest, indent=2) + "\n")
            tmp.replace(manifests / f"{cluster}.json")  # atomic: load never sees half a manifest
        return totals


class _Checkpoint:
    """Write a checkpoint's parts (submitted at once to the pool); ``finish`` marks it complete."""

    def __init__(
        self, pool: ThreadPoolExecutor, root: Path, clusters: Sequence[str], parts: dict[str, DataFrame]
    ) -> None:
        self.root = root
        self._clusters = list(clusters)
        for cluster in clusters:
            (root / f"_complete-{cluster}").unlink(missing_ok=True)
        self._futures = [pool.submit(self._write, part, frame) for part, frame in parts.items()]

    def _write(self, part: str, frame: DataFrame) -> None:
        path = _state_path(self.root, part)
        for cluster in self._clusters:
            shutil.rmtree(path / f"cluster={cluster}", ignore_errors=True)
        frame.write.mode("append").partitionBy("cluster").parquet(str(path))

    def finish(self) -> None:
        for future in self._futures:
            future.result()
        for cluster in self._clusters:
            # A part with no rows for a cluster has no directory; create it so the next run can read it.
            for part in STATE_PARTS:
                _state_path(self.root, part, cluster).mkdir(parents=True, exist_ok=True)
            # Written last: only a complete checkpoint is ever used.
            (self.root / f"_complete-{cluster}").write_text(datetime.now(UTC).isoformat() + "\n")


# --- command line ---------------------------------------------------------------------------------------


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="job.py", description="Compute availability and leadership analytics from state-change logs."
    )
    parser.add_argument("--input", type=Path, required=True, help="base directory with one sub-directory per cluster")
    parser.add_argument("--output", type=Path, required=True, help="results directory")
    parser.add_argument("--compacted", type=Path, help="compacted Parquet directory (see compaction.py)")
    parser.add_argument(
        "--actions", type=Path, help="exported operator actions (manage.py export_audit): <dir>/<cluster>/*.jsonl"
    )
    parser.add_argument("--since", help="first day, YYYY-MM-DD (default: yesterday, UTC)")
    parser.add_argument("--until", help="last day, YYYY-MM-DD (default: --since)")
    parser.add_argument("--cluster", action="append", default=[], help="only this cluster (repeatable)")
    parser.add_argument("--master", help="Spark master URL (default: the spark-submit one, else local[*])")
    parser.add_argument("--remote", help="Spark Connect server, sc://host:port (instead of a JVM in this process)")
    parser.add_argument("--flapping-top", type=int, default=100, help="flapping partitions kept per day")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def config_from_args(args: argparse.Namespace) -> JobConfig:
    since = parse_day(args.since, "--since") if args.since else yesterday_utc()
    until = parse_day(args.until, "--until") if args.until else since
    return JobConfig(
        input_dir=args.input,
        output_dir=args.output,
        since=since,
        until=until,
        clusters=tuple(args.cluster),
        compacted_dir=args.compacted,
        actions_dir=args.actions,
        flapping_top=args.flapping_top,
    )


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = argument_parser().parse_args(argv)
    try:
        config = config_from_args(args)
        discover(config)  # fail on bad input before starting a JVM
    except JobInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    spark = build_spark(args.master, remote=args.remote)
    result = run(config, spark, lambda fraction, message: print(f"[{fraction:4.0%}] {message}", flush=True))
    if args.json:
        print(json.dumps(result.as_dict(), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
