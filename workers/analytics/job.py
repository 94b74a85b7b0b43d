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
   cache per cluster): every metric is computed from that cache, so the JSON is parsed once.
3. Aggregate the cache three ways at once (per partition and day, per controller epoch, and the
   rare kinds), then walk each partition's leadership records in order (the one sort).
4. Derive outage intervals, leader changes and reassignments from those, then write every table
   (independent writes in parallel), the manifests, and the checkpoint (closed windows only).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote

if __package__ in (None, ""):  # run as a script by spark-submit: make the repository importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from workers.analytics import actions as A
from workers.analytics import records as R
from workers.analytics import transforms as X

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[float, str], None]

RUNS_DIR = "runs"
STATE_DIR = "_state"
MANIFESTS_DIR = "_manifests"
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


# The job caches its narrow projection of the history once and scans that cache five times. Spark's
# compressed column cache decides each column's encoding by feeding every value through boxed Scala
# hash maps, which cost more CPU than the smaller cache saves: on the 10-million-record benchmark,
# after warm-up, filling the compressed cache took 117 JVM CPU-s against 108-110 uncompressed
# (docs/analytics.md, "Performance"), and the cache grows only from ~190 MB to ~320 MB.
UNCOMPRESSED_CACHE_CONF = "spark.sql.inMemoryColumnarStorage.compressed"


class JobInputError(ValueError):
    """The job cannot run with the input it was given (bad dates, missing directories, no files)."""


# --- configuration ---------------------------------------------------------------------------------


def parse_day(text: str, option: str = "date") -> date:
    """Parse ``YYYY-MM-DD`` or raise :class:`JobInputError` naming the option."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        raise JobInputError(f"{option} {text!r} is not a date: use YYYY-MM-DD, e.g. 2024-03-01") from None


def yesterday_utc(now: datetime | None = None) -> date:
    """The last closed UTC day, which the nightly run reports on."""
    return ((now or datetime.now(UTC)).astimezone(UTC) - timedelta(days=1)).date()


@dataclass(frozen=True, slots=True)
class JobConfig:
    """What to compute and where. ``since``/``until`` are inclusive UTC days.

    ``clusters`` empty means every sub-directory of ``input_dir``. ``now_ms`` (default: the clock)
    decides whether the window is closed and where open intervals stop.
    """

    input_dir: Path
    output_dir: Path
    since: date
    until: date
    clusters: tuple[str, ...] = ()
    compacted_dir: Path | None = None
    actions_dir: Path | None = None
    flapping_top: int = 100
    now_ms: int | None = None

    def validate(self) -> None:
        if self.since > self.until:
            raise JobInputError(f"--since {self.since} is after --until {self.until}")
        if not self.input_dir.is_dir():
            raise JobInputError(f"input directory {self.input_dir} does not exist (expected <input>/<cluster>/*.jsonl)")
        if self.flapping_top < 1:
            raise JobInputError("the number of flapping partitions to keep per day must be at least 1")
        for name in self.clusters:
            if not name or "/" in name or name.startswith((".", "_")):
                raise JobInputError(f"{name!r} is not a cluster name")

    @property
    def window(self) -> X.ReportWindow:
        start = _day_ms(self.since)
        end = _day_ms(self.until + timedelta(days=1))
        now = self.now_ms if self.now_ms is not None else int(time.time() * 1000)
        return X.ReportWindow(start, end, max(start, min(end, now)))

    @property
    def closed(self) -> bool:
        """Whether the window's last day is over (only then is its end state a valid checkpoint)."""
        window = self.window
        return window.effective_end_ms >= window.end_ms

    @property
    def run_dir(self) -> Path:
        return self.output_dir / RUNS_DIR / f"{self.since.isoformat()}_{self.until.isoformat()}"


def _day_ms(day: date) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


# --- discovery ---------------------------------------------------------------------------------------


@dataclass(slots=True)
class ClusterInput:
    """One cluster's files for this run, and the checkpoint it starts from (if any)."""

    name: str
    json_days: dict[date, Path] = field(default_factory=dict)
    parquet_days: dict[date, Path] = field(default_factory=dict)
    checkpoint: date | None = None
    read_days: list[date] = field(default_factory=list)
    window_days: list[date] = field(default_factory=list)

    def source(self, day: date) -> tuple[str, Path]:
        if day in self.parquet_days:
            return "parquet", self.parquet_days[day]
        return "json", self.json_days[day]


def _compacted_days(compacted_dir: Path | None, cluster: str) -> dict[date, Path]:
    days: dict[date, Path] = {}
    root = None if compacted_dir is None else compacted_dir / f"cluster={cluster}"
    if root is None or not root.is_dir():
        return days
    for child in root.iterdir():
        if not child.name.startswith("date="):
            continue
        try:
            day = date.fromisoformat(child.name.removeprefix("date="))
        except ValueError:
            continue
        if (child / "_SUCCESS").is_file():  # written last: anything else is a crashed compaction
            days[day] = child
    return days


def _checkpoints(output_dir: Path, cluster: str) -> list[date]:
    root = output_dir / STATE_DIR
    found: list[date] = []
    if not root.is_dir():
        return found
    for child in root.iterdir():
        if child.name.startswith("as_of=") and (child / f"_complete-{cluster}").is_file():
            try:
                found.append(date.fromisoformat(child.name.removeprefix("as_of=")))
            except ValueError:
                continue
    return sorted(found)


def discover(config: JobConfig) -> list[ClusterInput]:
    """List each cluster's input for the window; raise :class:`JobInputError` when there is none."""
    config.validate()
    available = sorted(p.name for p in config.input_dir.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    if config.clusters:
        missing = sorted(set(config.clusters) - set(available))
        if missing:
            raise JobInputError(
                f"no directory for cluster(s) {', '.join(missing)} in {config.input_dir} "
                f"(found: {', '.join(available) or 'none'})"
            )
        names = list(dict.fromkeys(config.clusters))
    else:
        names = available
    if not names:
        raise JobInputError(f"{config.input_dir} has no cluster directories (expected <input>/<cluster>/*.jsonl)")

    window_days = [config.since + timedelta(days=i) for i in range((config.until - config.since).days + 1)]
    inputs: list[ClusterInput] = []
    for name in names:
        cluster = ClusterInput(name)
        for path in (config.input_dir / name).iterdir():
            day = R.day_of_file_name(path.name)
            if day is not None and path.is_file():
                cluster.json_days[day] = path
        cluster.parquet_days = _compacted_days(config.compacted_dir, name)
        all_days = sorted(set(cluster.json_days) | set(cluster.parquet_days))
        cluster.window_days = [d for d in window_days if d in cluster.json_days or d in cluster.parquet_days]
        if not cluster.window_days:
            logger.warning("cluster %s has no state-change files between %s and %s", name, config.since, config.until)
            continue
        earlier = [d for d in _checkpoints(config.output_dir, name) if d < config.since]
        cluster.checkpoint = earlier[-1] if earlier else None
        warm_from = cluster.checkpoint + timedelta(days=1) if cluster.checkpoint else date.min
        warm_up = [d for d in all_days if warm_from <= d < config.since]
        if warm_up:
            logger.info(
                "cluster %s: reading %d earlier day(s) (%s..%s) to know each partition's state on %s",
                name,
                len(warm_up),
                warm_up[0],
                warm_up[-1],
                config.since,
            )
        cluster.read_days = warm_up + cluster.window_days
        inputs.append(cluster)
    if not inputs:
        raise JobInputError(
            f"no state-change files between {config.since} and {config.until} for "
            f"{', '.join(names)} in {config.input_dir}"
        )
    return inputs


# --- Spark ----------------------------------------------------------------------------------------------


def build_spark(
    master: str | None = None,
    app_name: str = "kcp-analytics",
    driver_memory: str | None = None,
    shuffle_partitions: int | None = None,
    extra: dict[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    """Return a SparkSession: a Spark Connect client when ``remote`` is given, else an in-process one.

    ``remote`` (``sc://host:port``, e.g. ``SPARK_REMOTE``) is how the product runs: the warm server
    started by ``scripts/services`` (or one in front of a real cluster) does the work and this process
    starts no JVM. Without it, the active session is returned, or one is started (``local[*]`` unless
    ``master`` says otherwise); a local session binds to the loopback interface and has no UI. Under
    ``spark-submit`` the submitter's master, memory and network settings stand unless ``master`` is
    given explicitly.
    """
    if remote:
        return _connect(remote, app_name, shuffle_partitions, extra)
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    submitted = master is None and "PYSPARK_GATEWAY_PORT" in os.environ
    local = not submitted and (master or "local[*]").startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    if not submitted:
        builder = builder.master(master or "local[*]")
    if local:
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
        )
    if driver_memory and not submitted:
        builder = builder.config("spark.driver.memory", driver_memory)
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    context = spark.sparkContext
    if spark.conf.get(UNCOMPRESSED_CACHE_CONF, None) is None:  # unless the submitter chose
        spark.conf.set(UNCOMPRESSED_CACHE_CONF, "false")
    if shuffle_partitions:
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    elif (context.master or "").startswith("local") and not context.getConf().contains("spark.sql.shuffle.partitions"):
        # Spark's default of 200 is for clusters; on a laptop it turns every small stage into 200 tasks.
        spark.conf.set("spark.sql.shuffle.partitions", str(context.defaultParallelism * 4))
    return spark


# Session settings the job relies on (runtime SQL settings, so a Connect client can set them too).
SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
}


class SparkUnavailableError(RuntimeError):
    """The Spark Connect server named by ``SPARK_REMOTE`` does not answer."""


def remote_address(remote: str) -> tuple[str, int]:
    """``(host, port)`` of an ``sc://host[:port][/;params]`` URL (Spark's default port is 15002)."""
    if not remote.startswith("sc://"):
        raise JobInputError(f"SPARK_REMOTE {remote!r} is not a Spark Connect URL (expected sc://host:port)")
    authority = remote.removeprefix("sc://").split("/", 1)[0].split(";", 1)[0]
    host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "15002")
    try:
        return host, int(port)
    except ValueError:
        raise JobInputError(f"SPARK_REMOTE {remote!r} has no valid port") from None


def _connect(remote: str, app_name: str, shuffle_partitions: int | None, extra: dict[str, str] | None) -> SparkSession:
    """A Spark Connect session: settings are per session on the server, so each client sets its own."""
    import socket

    host, port = remote_address(remote)
    try:
        socket.create_connection((host, port), timeout=5.0).close()
    except OSError as exc:
        # Fail fast and say what to do: the client would otherwise retry for minutes.
        raise SparkUnavailableError(
            f"no Spark Connect server answers at {remote} ({exc}): start one with `scripts/services up` "
            "(or `scripts/run`), or point SPARK_REMOTE at yours"
        ) from None
    spark = SparkSession.builder.remote(remote).appName(app_name).getOrCreate()
    settings = dict(SESSION_CONF)
    if spark.conf.get(UNCOMPRESSED_CACHE_CONF, None) is None:  # unless the server was started with a choice
        settings[UNCOMPRESSED_CACHE_CONF] = "false"
    if shuffle_partitions:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    elif str(spark.conf.get("spark.master", "")).startswith("local") and spark.conf.get(
        "spark.sql.shuffle.partitions", None
    ) in (None, "200"):
        # A local server on this machine: Spark's 200 shuffle tasks are for clusters.
        settings["spark.sql.shuffle.partitions"] = str((os.cpu_count() or 2) * 4)
    settings.update(extra or {})
    for key, value in settings.items():
        spark.conf.set(key, value)
    return spark


def read_cluster(spark: SparkSession, cluster: ClusterInput) -> DataFrame:
    """Read a cluster's days (JSON or Parquet per day) as raw records (``RECORD_SCHEMA``)."""
    json_paths = [str(p) for kind, p in map(cluster.source, cluster.read_days) if kind == "json"]
    parquet_paths = [str(p) for kind, p in map(cluster.source, cluster.read_days) if kind == "parquet"]
    frames: list[DataFrame] = []
    if json_paths:
        # PERMISSIVE: a torn last line (the controller crashed mid-write) becomes nulls, not a failed run.
        frames.append(spark.read.schema(R.RECORD_SCHEMA).option("mode", "PERMISSIVE").json(json_paths))
    if parquet_paths:
        frames.append(spark.read.schema(R.RECORD_SCHEMA).parquet(*parquet_paths))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame


def _union(frames: Iterable[DataFrame]) -> DataFrame | None:
    result: DataFrame | None = None
    for frame in frames:
        result = frame if result is None else result.unionByName(frame)
    return result


# --- checkpoints ------------------------------------------------------------------------------------------


def _state_path(output_dir: Path, as_of: date, part: str, cluster: str | None = None) -> Path:
    path = output_dir / STATE_DIR / f"as_of={as_of.isoformat()}" / part
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
        .parquet(str(_state_path(config.output_dir, c.checkpoint, part, c.name)))
        .withColumn("cluster", F.lit(c.name))
        for c in clusters
        if c.checkpoint is not None
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


def run(config: JobConfig, spark: SparkSession | None = None, progress: ProgressCallback | None = None) -> JobResult:
    """Compute every metric for ``config``'s window and write the results; return a summary."""
    started = time.perf_counter()
    clusters = discover(config)
    spark = spark or build_spark()
    window = config.window
    report = _Progress(progress, steps=5 + len(TABLES) + (1 if config.closed else 0))
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
    pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="analytics")
    try:
        # 1. Parse once. One cache per cluster, with the cluster name added on top rather than
        #    stored: a constant column would still cost a value per cached row.
        parsed = [
            keep(X.prepare_events(read_cluster(spark, c)).where(F.col("ts") < F.lit(float(window.end_ms))))
            for c in clusters
        ]
        per_cluster = dict(zip(names, pool.map(lambda frame: frame.count(), parsed), strict=True))
        records = sum(per_cluster.values())
        events = _union(frame.withColumn("cluster", F.lit(c.name)) for frame, c in zip(parsed, clusters, strict=True))
        assert events is not None  # discover() returned at least one cluster
        report.step(f"read {records:,} state-change records")

        # 2. The three aggregates of the whole cache, in parallel; then the walk.
        special = keep(events.where(F.col("extra").isNotNull()))
        days = keep(X.partition_days(events))
        epochs = keep(X.controller_epochs(events, seeds["controller"]))
        _materialise(pool, special, days, epochs)
        inventory = keep(X.partition_inventory(special, days, seeds["partitions"]))
        hashed = X.partition_keys_are_unique(inventory)
        if not hashed:
            logger.warning("partition hash collision: walking partitions by name (slower)")
        walked = keep(X.walk_partitions(X.leadership_stream(events, days, seeds["partitions"]), hashed_key=hashed))
        walked.count()
        report.step("walked every partition's leadership history")

        # 3. What several tables share (cached; filled by the first write that needs each).
        intervals = keep(
            X.with_estimated_starts(X.unavailability_intervals(walked, hashed_key=hashed), X.session_losses(special))
        )
        deltas = keep(X.leader_deltas(walked, window))
        pairs = keep(X.reassignments(X.reassignment_rows(special, seeds["reassignments"])))
        in_window = X.overlapping(intervals, window)
        facts = keep(X.outage_facts(in_window, window))
        brokers = keep(X.known_brokers(special, deltas, seeds["brokers"]))
        counts = keep(X.leader_counts(deltas, brokers, window))
        moved = X.overlapping(pairs, window, "started_ms", "ended_ms")
        # The operator actions (audit export): who asked for each move, and elections per action.
        exported = A.read_actions(spark, config.actions_dir, names)
        moved = keep(A.attribute_reassignments(moved, exported))
        action_elections = A.election_actions(
            X.rare(special, R.KIND_ELECTION).where(F.col("strategy") == A.STRATEGY_PREFERRED), exported
        )
        action_elections = action_elections.where(
            (F.col("requested_ms") >= F.lit(float(window.start_ms)))
            & (F.col("requested_ms") < F.lit(float(window.end_ms)))
        )

        # 4. Every table, in parallel.
        tables: dict[str, DataFrame] = {
            "unavailability_intervals": X.with_dates(
                in_window.withColumn("start_date", X.epoch_day("start_ms")), "start_date"
            ),
            "partition_daily": X.with_dates(X.partition_daily(facts)),
            "broker_daily": X.with_dates(X.broker_daily(facts)),
            "topic_daily": X.with_dates(X.topic_daily(facts, inventory, window)),
            "elections_daily": X.with_dates(X.elections_daily(special, window)),
            "unclean_elections": X.with_dates(X.unclean_elections(special, window)),
            "leader_counts": X.minute_timestamps(counts),
            "leader_skew": X.minute_timestamps(X.leader_skew(counts)),
            "failovers": X.failovers(special, epochs, window),
            "reassignments": moved,
            "reassignment_actions": X.reassignment_actions(moved),
            "election_actions": action_elections,
            "isr_flapping": X.with_dates(X.isr_flapping(days, window, config.flapping_top)),
        }
        writer = _Writer(spark, config, names)
        futures = {pool.submit(writer.write, name, frame): name for name, frame in tables.items()}
        for future in as_completed(futures):
            future.result()
            report.step(f"wrote {futures[future].replace('_', ' ')}")
        rows = writer.finish(config, per_cluster)
        report.step(f"wrote {sum(rows.values()):,} result rows to {config.run_dir}")

        if config.closed:
            _write_checkpoint(
                pool,
                config,
                names,
                {
                    "partitions": X.checkpoint_partitions(walked, intervals, inventory),
                    "controller": X.checkpoint_controller(epochs),
                    "reassignments": X.checkpoint_reassignments(pairs),
                    "brokers": brokers,
                },
            )
            report.step(f"saved each partition's state as of {config.until} for the next run")
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for frame in cached:
            frame.unpersist()

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
    )
    report.step(f"done in {result.seconds:.1f} s")
    return result


def _materialise(pool: ThreadPoolExecutor, *frames: DataFrame) -> None:
    """Fill several caches at once (each ``count`` is one job)."""
    for future in [pool.submit(frame.count) for frame in frames]:
        future.result()


class _Writer:
    """Write result tables under the run directory, replacing only this run's clusters."""

    def __init__(self, spark: SparkSession, config: JobConfig, clusters: Sequence[str]) -> None:
        self._spark = spark
        self._root = config.run_dir
        self._clusters = list(clusters)

    def write(self, table: str, frame: DataFrame) -> None:
        path = self._root / table
        # A cluster that has no rows this time must not keep last run's files.
        for cluster in self._clusters:
            shutil.rmtree(path / f"cluster={cluster}", ignore_errors=True)
        frame.write.mode("append").partitionBy("cluster").parquet(str(path))

    def _counts(self) -> dict[tuple[str, str], int]:
        """Rows per (table, cluster), in one Spark job: the file each row came from names both."""
        paths = [
            str(self._root / table / f"cluster={cluster}")
            for table in TABLES
            for cluster in self._clusters
            if (self._root / table / f"cluster={cluster}").is_dir()
        ]
        counted: dict[tuple[str, str], int] = {}
        if paths:
            # Only the file-path metadata column is read, so the tables' different schemas never meet.
            files = self._spark.read.parquet(*paths).select(F.col("_metadata.file_path").alias("path"))
            pattern = r"/([a-z_]+)/cluster=([^/]+)/[^/]+$"
            rows = (
                files.groupBy(
                    F.regexp_extract("path", pattern, 1).alias("table"),
                    F.regexp_extract("path", pattern, 2).alias("cluster"),
                )
                .count()
                .collect()
            )
            counted = {(row["table"], unquote(row["cluster"])): int(row["count"]) for row in rows}
        return {(t, c): counted.get((t, c), 0) for t in TABLES for c in self._clusters}

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
                "window_start_ms": config.window.start_ms,
                "window_end_ms": config.window.end_ms,
                "records": records.get(cluster, 0),
                "rows": {table: counted[(table, cluster)] for table in TABLES},
                "written_at": datetime.now(UTC).isoformat(),
            }
            tmp = manifests / f".{cluster}.json.tmp"
            tmp.write_text(json.dumps(manifest, indent=2) + "\n")
            tmp.replace(manifests / f"{cluster}.json")  # atomic: load never sees half a manifest
        return totals


def _write_checkpoint(
    pool: ThreadPoolExecutor, config: JobConfig, clusters: Sequence[str], parts: dict[str, DataFrame]
) -> None:
    def write(part: str, frame: DataFrame) -> None:
        path = _state_path(config.output_dir, config.until, part)
        for cluster in clusters:
            shutil.rmtree(path / f"cluster={cluster}", ignore_errors=True)
        frame.write.mode("append").partitionBy("cluster").parquet(str(path))

    for future in [pool.submit(write, part, frame) for part, frame in parts.items()]:
        future.result()
    root = config.output_dir / STATE_DIR / f"as_of={config.until.isoformat()}"
    for cluster in clusters:
        # A part with no rows for a cluster has no directory; create it so the next run can read it.
        for part in STATE_PARTS:
            _state_path(config.output_dir, config.until, part, cluster).mkdir(parents=True, exist_ok=True)
        # Written last: only a complete checkpoint is ever used.
        (root / f"_complete-{cluster}").write_text(datetime.now(UTC).isoformat() + "\n")


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
