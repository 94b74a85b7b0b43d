"""What an analytics run reads: its configuration, each cluster's files, and the records in them.

Why a module of its own: the command, the Celery runner and the job all validate a window and find
its input before anything expensive starts (a bad date or a missing directory must fail before a
Spark session is opened), and that needs no Spark beyond the one reading function at the end.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession

from workers.analytics import records as R
from workers.analytics.transforms import ReportWindow

logger = logging.getLogger(__name__)

RUNS_DIR = "runs"
STATE_DIR = "_state"
MANIFESTS_DIR = "_manifests"
# About 70,000 records of JSON: a quiet cluster's day, or a few minutes of a busy one. Below this a
# run's cost is Spark's per-job latency, not its data (docs/analytics.md, "What bounds it").
SMALL_INPUT_BYTES = 32 * 1024 * 1024
#: Runs reading at most this many records, all JSON, take the Python engine (``workers.analytics.small``)
#: instead of Spark: a cursor run of a few minutes costs Spark ~20 jobs' latency whatever its size.
PYTHON_MAX_RECORDS = 5_000


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
    #: A cursor run: count from this instant (the previous run's end), seeded with the state that
    #: run saved there (``<output>/_state/at=<from_ms>/``), reading only the window's last day.
    from_ms: int | None = None
    #: Per cluster, a file to read instead of the last day's log: the bytes up to the position the
    #: cursor will record (a cursor run: only those after the previous position).
    snapshots: tuple[tuple[str, Path], ...] = ()
    #: Save the state at the window's effective end (``_state/at=<ms>/``) for the next cursor run.
    save_state: bool = False
    #: Inputs (bytes of log and compacted files read) up to this size run as a small run (``job``).
    small_input_bytes: int = SMALL_INPUT_BYTES
    #: Inputs of at most this many records (JSON only) run in Python, without Spark; 0: always Spark.
    python_max_records: int = PYTHON_MAX_RECORDS

    def validate(self) -> None:
        if self.since > self.until:
            raise JobInputError(f"--since {self.since} is after --until {self.until}")
        if self.from_ms is not None and not (_day_ms(self.until) <= self.from_ms <= self.window.effective_end_ms):
            raise JobInputError(f"a cursor run's start ({self.from_ms} ms) must lie in {self.until}, before now")
        if not self.input_dir.is_dir():
            raise JobInputError(f"input directory {self.input_dir} does not exist (expected <input>/<cluster>/*.jsonl)")
        if self.flapping_top < 1:
            raise JobInputError("the number of flapping partitions to keep per day must be at least 1")
        for name in self.clusters:
            if not name or "/" in name or name.startswith((".", "_")):
                raise JobInputError(f"{name!r} is not a cluster name")

    @property
    def window(self) -> ReportWindow:
        start = _day_ms(self.since)
        end = _day_ms(self.until + timedelta(days=1))
        now = self.now_ms if self.now_ms is not None else int(time.time() * 1000)
        return ReportWindow(start, end, max(start, min(end, now)), self.from_ms)

    @property
    def closed(self) -> bool:
        """Whether the window's last day is over (only then is its end state a valid checkpoint)."""
        window = self.window
        return window.effective_end_ms >= window.end_ms

    @property
    def run_dir(self) -> Path:
        name = f"{self.since.isoformat()}_{self.until.isoformat()}"
        # A cursor run's results are an increment, loaded once: never where a whole-day run's are.
        return self.output_dir / RUNS_DIR / (name if self.from_ms is None else f"{name}@{self.from_ms}")


def input_bytes(clusters: list[ClusterInput]) -> int:
    """How many bytes a run reads: the log files and compacted days of every cluster's read days."""
    total = 0
    for cluster in clusters:
        for day in cluster.read_days:
            kind, path = cluster.source(day)
            files = [path] if kind == "json" else [f for f in path.rglob("*") if f.is_file()]
            total += sum(f.stat().st_size for f in files)
    return total


def state_root(output_dir: Path, as_of: date | None = None, at_ms: int | None = None) -> Path:
    """A checkpoint's directory: end of the day ``as_of``, or the instant ``at_ms`` (a cursor's)."""
    name = f"as_of={as_of.isoformat()}" if as_of is not None else f"at={at_ms}"
    return output_dir / STATE_DIR / name


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
    state_dir: Path | None = None
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
    snapshots = dict(config.snapshots)
    if config.from_ms is not None and config.since != config.until:
        raise JobInputError("a cursor run covers one day (--since = --until)")
    inputs: list[ClusterInput] = []
    for name in names:
        cluster = ClusterInput(name)
        for path in (config.input_dir / name).iterdir():
            day = R.day_of_file_name(path.name)
            if day is not None and path.is_file():
                cluster.json_days[day] = path
        cluster.parquet_days = _compacted_days(config.compacted_dir, name)
        if name in snapshots:
            cluster.json_days[config.until] = snapshots[name]
            cluster.parquet_days.pop(config.until, None)
        all_days = sorted(set(cluster.json_days) | set(cluster.parquet_days))
        cluster.window_days = [d for d in window_days if d in cluster.json_days or d in cluster.parquet_days]
        if not cluster.window_days:
            logger.warning("cluster %s has no state-change files between %s and %s", name, config.since, config.until)
            continue
        if config.from_ms is not None:
            root = state_root(config.output_dir, at_ms=config.from_ms)
            if not (root / f"_complete-{name}").is_file():
                raise JobInputError(f"no saved state of cluster {name} at {config.from_ms} ms in {root.parent}")
            cluster.state_dir = root
            cluster.read_days = [config.until]
            inputs.append(cluster)
            continue
        earlier = [d for d in _checkpoints(config.output_dir, name) if d < config.since]
        cluster.checkpoint = earlier[-1] if earlier else None
        if cluster.checkpoint is not None:
            cluster.state_dir = state_root(config.output_dir, as_of=cluster.checkpoint)
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


def read_cluster_parts(spark: SparkSession, cluster: ClusterInput) -> tuple[DataFrame | None, DataFrame | None]:
    """Read a cluster's days as raw records (``RECORD_SCHEMA``): its JSON days and its Parquet days
    (either ``None`` when it has none), apart because a large run reads the two differently."""
    json_paths = [str(p) for kind, p in map(cluster.source, cluster.read_days) if kind == "json"]
    parquet_paths = [str(p) for kind, p in map(cluster.source, cluster.read_days) if kind == "parquet"]
    json_days = parquet_days = None
    if json_paths:
        # PERMISSIVE: a torn last line (the controller crashed mid-write) becomes nulls, not a failed run.
        json_days = spark.read.schema(R.RECORD_SCHEMA).option("mode", "PERMISSIVE").json(json_paths)
    if parquet_paths:
        parquet_days = spark.read.schema(R.RECORD_SCHEMA).parquet(*parquet_paths)
    return json_days, parquet_days


def read_cluster(spark: SparkSession, cluster: ClusterInput) -> DataFrame:
    """Read a cluster's days (JSON or Parquet per day) as raw records (``RECORD_SCHEMA``)."""
    frames = [frame for frame in read_cluster_parts(spark, cluster) if frame is not None]
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame
