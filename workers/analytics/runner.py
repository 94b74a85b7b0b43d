"""Run the whole pipeline for one ``AnalyticsRun`` row: compact, compute, load, and record progress.

Shared by the Celery tasks and ``manage.py run_analytics`` so that a run started from the page, by
the nightly schedule or by hand behaves the same and shows up the same on the page.

Settings (Django setting if defined, else environment variable, else the default):

| name | default |
|---|---|
| ``ANALYTICS_OUTPUT_DIR`` | ``<VAR_DIR>/analytics/results`` |
| ``ANALYTICS_COMPACTED_DIR`` | ``<VAR_DIR>/analytics/compacted`` |
| ``ANALYTICS_AUDIT_DIR`` | ``<VAR_DIR>/analytics/audit``: the exported operator actions |
| ``SPARK_REMOTE`` | ``sc://127.0.0.1:15002``: the warm Spark Connect server; empty: a JVM here |
| ``ANALYTICS_SPARK_MASTER`` | ``local[*]`` (only without ``SPARK_REMOTE``) |
| ``ANALYTICS_SPARK_DRIVER_MEMORY`` | ``4g`` (a local run's whole heap) |
| ``ANALYTICS_COMPACT`` | ``1``: compact closed days before each run |
| ``ANALYTICS_FLAPPING_TOP`` | ``100`` partitions per day |
| ``ANALYTICS_STALE_RUN_S`` | ``43200``: a "running" row older than this is presumed dead |

The input is ``STATE_CHANGE_LOG_DIR`` (one sub-directory per cluster).
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from pyspark.sql import SparkSession

from dashboard.analytics import audit_export
from dashboard.analytics.models import AnalyticsCursor, AnalyticsRun
from dashboard.lib.env import env_bool, env_int, env_str
from workers.analytics import compaction, cursor, load
from workers.analytics.inputs import STATE_DIR, state_root
from workers.analytics.job import JobConfig, JobInputError, SparkUnavailableError, build_spark, discover
from workers.analytics.job import run as run_job

logger = logging.getLogger(__name__)

Reporter = Callable[[AnalyticsRun], None]


@dataclass(frozen=True, slots=True)
class PipelineSettings:
    input_dir: Path
    output_dir: Path
    compacted_dir: Path
    audit_dir: Path
    remote: str
    master: str
    driver_memory: str
    compact: bool
    flapping_top: int
    stale_run_s: int

    @classmethod
    def from_django(cls, **overrides: object) -> PipelineSettings:
        var = Path(settings.VAR_DIR)

        def setting(name: str, default: str) -> str:
            return str(getattr(settings, name, None) or env_str(name, default))

        values: dict[str, object] = {
            "input_dir": Path(settings.STATE_CHANGE_LOG_DIR),
            "output_dir": Path(setting("ANALYTICS_OUTPUT_DIR", str(var / "analytics" / "results"))),
            "compacted_dir": Path(setting("ANALYTICS_COMPACTED_DIR", str(var / "analytics" / "compacted"))),
            "audit_dir": audit_export.default_audit_dir(),
            "remote": getattr(settings, "SPARK_REMOTE", None)
            if getattr(settings, "SPARK_REMOTE", None) is not None
            else env_str("SPARK_REMOTE", "sc://127.0.0.1:15002"),
            "master": setting("ANALYTICS_SPARK_MASTER", "local[*]"),
            "driver_memory": setting("ANALYTICS_SPARK_DRIVER_MEMORY", "4g"),
            "compact": getattr(settings, "ANALYTICS_COMPACT", None)
            if getattr(settings, "ANALYTICS_COMPACT", None) is not None
            else env_bool("ANALYTICS_COMPACT", True),
            "flapping_top": int(
                getattr(settings, "ANALYTICS_FLAPPING_TOP", 0) or env_int("ANALYTICS_FLAPPING_TOP", 100)
            ),
            "stale_run_s": int(
                getattr(settings, "ANALYTICS_STALE_RUN_S", 0) or env_int("ANALYTICS_STALE_RUN_S", 43200)
            ),
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)  # type: ignore[arg-type]


def _update(run: AnalyticsRun, **fields: object) -> None:
    for name, value in fields.items():
        setattr(run, name, value)
    AnalyticsRun.objects.filter(pk=run.pk).update(**fields)


def active_run(stale_after_s: int) -> AnalyticsRun | None:
    """A queued run, or one running for less than ``stale_after_s`` (older ones are presumed dead)."""
    horizon = timezone.now() - timedelta(seconds=stale_after_s)
    return (
        AnalyticsRun.objects.filter(status=AnalyticsRun.Status.RUNNING, started_at__gte=horizon).first()
        or AnalyticsRun.objects.filter(status=AnalyticsRun.Status.QUEUED, created_at__gte=horizon).first()
    )


def _claim(run: AnalyticsRun, stale_after_s: int) -> str | None:
    """Mark ``run`` running; return why it may not run (another live run), or ``None``.

    A conditional update, so a task redelivered after a worker crash cannot start the same row
    twice: only the delivery that moves it from queued wins.
    """
    horizon = timezone.now() - timedelta(seconds=stale_after_s)
    busy = (
        AnalyticsRun.objects.filter(status=AnalyticsRun.Status.RUNNING, started_at__gte=horizon)
        .exclude(pk=run.pk)
        .first()
    )
    if busy is not None:
        return f"another analytics run (#{busy.pk}, {busy.since}..{busy.until}) is still running"
    now = timezone.now()
    claimed = AnalyticsRun.objects.filter(pk=run.pk, status=AnalyticsRun.Status.QUEUED).update(
        status=AnalyticsRun.Status.RUNNING, started_at=now, progress=0.0, message="starting", error=""
    )
    if claimed != 1:  # someone else (a redelivery) already took this row
        return f"run #{run.pk} is not queued any more"
    run.refresh_from_db()
    return None


def execute(
    run: AnalyticsRun,
    pipeline: PipelineSettings | None = None,
    spark: SparkSession | None = None,
    report: Reporter | None = None,
    echo: Callable[[str], None] | None = None,
    now_ms: int | None = None,
    positions: Mapping[str, cursor.Position] | None = None,
) -> AnalyticsRun:
    """Run ``run`` end to end and leave its row succeeded or failed (never running).

    Steps: 1. claim the row; 2. export the audit table (operator actions) up to the window's end;
    3. compact closed days (optional); 4. compute; 5. load, one transaction per cluster. ``spark`` is
    stopped at the end only if this function started it. With ``positions`` (beat's run of today,
    :func:`execute_current`) step 4 and 5 are cursor runs (:func:`_compute_current`).
    """
    pipeline = pipeline or PipelineSettings.from_django()
    refusal = _claim(run, pipeline.stale_run_s)
    if refusal is not None:
        _update(run, status=AnalyticsRun.Status.FAILED, error=refusal, finished_at=timezone.now())
        return run
    started = time.monotonic()
    own_session = spark is None
    # Opened on first use: a run whose jobs all take the Python engine (beat's tiny cursor runs) and
    # that has no day to compact never connects to Spark.
    opened: list[SparkSession] = [] if spark is None else [spark]

    def session() -> SparkSession:
        if not opened:
            opened.append(
                build_spark(pipeline.master, driver_memory=pipeline.driver_memory, remote=pipeline.remote or None)
            )
        return opened[0]

    def progress(fraction: float, message: str) -> None:
        _update(run, progress=round(fraction, 3), message=message[:255])
        if echo is not None:
            echo(f"[{fraction:4.0%}] {message}")
        if report is not None:
            report(run)

    try:
        config = JobConfig(
            input_dir=pipeline.input_dir,
            output_dir=pipeline.output_dir,
            since=run.since,
            until=run.until,
            clusters=tuple(run.cluster_list),
            compacted_dir=pipeline.compacted_dir,
            actions_dir=pipeline.audit_dir,
            flapping_top=pipeline.flapping_top,
            now_ms=now_ms,
        )
        if positions is None:
            discover(config)  # bad input fails here, before a JVM starts
        # Every action, not just the window's: a reassignment started last week may end today.
        exported = audit_export.export_actions(pipeline.audit_dir, None, run.cluster_list)
        progress(0.01, exported.describe())
        if pipeline.compact:
            progress(0.02, "compacting closed days to Parquet")
            done = compaction.compact(
                session,
                pipeline.input_dir,
                pipeline.compacted_dir,
                run.cluster_list,
                until=run.until,
                progress=lambda m: progress(0.04, m),
            )
            progress(0.05, f"compacted {done.days} day(s), {done.up_to_date} already up to date")
        if positions is None:
            result = run_job(config, session, lambda f, m: progress(0.05 + 0.75 * min(f, 0.999), m))
            records = result.records
            _update(run, records=records)
            progress(0.8, "loading the results into the database")
            with transaction.atomic():
                loaded = load.load_run(
                    pipeline.output_dir, run.since, run.until, run.cluster_list, lambda m: progress(0.85, m)
                )
                # These days now hold a whole-day recompute: a cursor into them would add its
                # increment on top, so the next every-few-minutes run starts again from midnight.
                AnalyticsCursor.objects.filter(
                    cluster__in=list(loaded), day__gte=run.since, day__lte=run.until
                ).delete()
        else:
            records, loaded = _compute_current(run, pipeline, session, positions, now_ms, progress)
            _update(run, records=records)
        _update(
            run,
            status=AnalyticsRun.Status.SUCCEEDED,
            progress=1.0,
            message=f"{records:,} records, {sum(sum(t.values()) for t in loaded.values()):,} rows loaded",
            rows_loaded=loaded,
        )
    except (JobInputError, SparkUnavailableError) as exc:
        _update(run, status=AnalyticsRun.Status.FAILED, error=str(exc), message="bad input or no Spark")
    except Exception as exc:
        logger.exception("analytics run %s failed", run.pk)
        _update(run, status=AnalyticsRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}"[:5000], message="failed")
    finally:
        _update(run, finished_at=timezone.now(), duration_s=round(time.monotonic() - started, 2))
        if report is not None:
            report(run)
        if own_session and opened:
            opened[0].stop()
    return run


def execute_current(
    today: date,
    pipeline: PipelineSettings | None = None,
    spark: SparkSession | None = None,
    report: Reporter | None = None,
    task_id: str = "",
    now_ms: int | None = None,
) -> dict[str, object]:
    """Compute ``today`` so far for the clusters whose log grew since their cursor (beat's frequent run).

    Nothing happens when no log grew, or while another run is active (the next tick comes within
    minutes, so a slow run cannot pile up a backlog). Cursors move only after a successful run.
    """
    pipeline = pipeline or PipelineSettings.from_django()
    if active_run(pipeline.stale_run_s) is not None:
        return {"skipped": "another analytics run is active"}
    saved = {row.cluster: cursor.Position(row.day, row.bytes, row.state_ms) for row in AnalyticsCursor.objects.all()}
    moved = cursor.grown(pipeline.input_dir, today, saved)
    if not moved:
        return {"skipped": "no new state changes"}
    run = create_run(today, today, sorted(moved), trigger=AnalyticsRun.Trigger.CURRENT)
    AnalyticsRun.objects.filter(pk=run.pk).update(task_id=task_id)
    return execute(run, pipeline, spark=spark, report=report, now_ms=now_ms, positions=moved).as_status()


class StaleCursorError(RuntimeError):
    """Another run moved a cluster's cursor while this one computed: its increment is not added."""


@dataclass(frozen=True, slots=True)
class _CursorJob:
    config: JobConfig
    #: Per cluster: the cursor's instant the job counts from (``None``: from midnight) and where it ends.
    moves: dict[str, tuple[int | None, cursor.Position]]


def _plan_current(
    run: AnalyticsRun, pipeline: PipelineSettings, positions: Mapping[str, cursor.Position], now_ms: int | None
) -> list[_CursorJob]:
    """One cursor job per cluster with a usable cursor for the day; one job from midnight for the rest."""
    day = run.since
    # One "now" for the whole run: the state saved, the manifest and the next cursor must agree.
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    slices = pipeline.output_dir / cursor.SLICES_DIR / f"run-{run.pk}"
    saved = {row.cluster: row for row in AnalyticsCursor.objects.filter(cluster__in=list(positions))}
    base = JobConfig(
        input_dir=pipeline.input_dir,
        output_dir=pipeline.output_dir,
        since=day,
        until=day,
        compacted_dir=pipeline.compacted_dir,
        actions_dir=pipeline.audit_dir,
        flapping_top=pipeline.flapping_top,
        now_ms=now_ms,
        save_state=True,
    )
    jobs: list[_CursorJob] = []
    fresh: dict[str, tuple[int | None, cursor.Position]] = {}
    snapshots: list[tuple[str, Path]] = []
    for name, position in sorted(positions.items()):
        row = saved.get(name)
        usable = (
            row is not None
            and row.day == position.day
            and row.bytes <= position.bytes
            and row.state_ms <= base.window.effective_end_ms
            and (state_root(pipeline.output_dir, at_ms=row.state_ms) / f"_complete-{name}").is_file()
        )
        if row is not None and usable:
            tail = cursor.write_slice(pipeline.input_dir, name, day, row.bytes, position.bytes, slices)
            config = dataclasses.replace(base, clusters=(name,), from_ms=row.state_ms, snapshots=((name, tail),))
            jobs.append(_CursorJob(config, {name: (row.state_ms, position)}))
        else:
            whole = cursor.write_slice(pipeline.input_dir, name, day, 0, position.bytes, slices)
            snapshots.append((name, whole))
            fresh[name] = (None, position)
    if fresh:
        config = dataclasses.replace(base, clusters=tuple(fresh), snapshots=tuple(snapshots))
        jobs.insert(0, _CursorJob(config, fresh))
    for job in jobs:
        discover(job.config)  # bad input fails before any job runs
    return jobs


def _compute_current(
    run: AnalyticsRun,
    pipeline: PipelineSettings,
    spark: Callable[[], SparkSession],
    positions: Mapping[str, cursor.Position],
    now_ms: int | None,
    progress: Callable[[float, str], None],
) -> tuple[int, dict[str, dict[str, int]]]:
    """Today's runs from each cluster's cursor: compute, then load and move the cursor in one transaction."""
    jobs = _plan_current(run, pipeline, positions, now_ms)
    records = 0
    loaded: dict[str, dict[str, int]] = {}
    try:
        for index, job in enumerate(jobs):
            share = 0.75 / len(jobs)
            start = 0.05 + share * index
            result = run_job(job.config, spark, _scaled(progress, start, share))
            records += result.records
            assert result.state_ms is not None  # save_state
            progress(start + share, "loading the results into the database")
            with transaction.atomic():
                for name, (from_ms, _) in job.moves.items():
                    row = AnalyticsCursor.objects.select_for_update().filter(cluster=name).first()
                    if from_ms is not None and (row is None or row.state_ms != from_ms):
                        raise StaleCursorError(f"the cursor of {name} moved during this run; its results are dropped")
                loaded.update(load.load_directory(job.config.run_dir, run.since, run.until, list(job.moves)))
                for name, (_, position) in job.moves.items():
                    AnalyticsCursor.objects.update_or_create(
                        cluster=name,
                        defaults={"day": position.day, "bytes": position.bytes, "state_ms": result.state_ms},
                    )
            for name in job.moves:
                _prune_states(pipeline.output_dir, name, keep_ms=result.state_ms)
            if job.config.from_ms is not None:
                shutil.rmtree(job.config.run_dir, ignore_errors=True)  # loaded once; never again
    finally:
        cursor.remove_slices(pipeline.output_dir, f"run-{run.pk}")
    return records, loaded


def _scaled(progress: Callable[[float, str], None], start: float, share: float) -> Callable[[float, str], None]:
    """One job's progress (0..1) as its share of the run's bar."""
    return lambda fraction, message: progress(start + share * min(fraction, 0.999), message)


def _prune_states(output_dir: Path, cluster: str, keep_ms: int) -> None:
    """Remove a cluster's cursor states other than ``keep_ms`` (and directories nobody needs any more)."""
    root = output_dir / STATE_DIR
    for path in root.glob("at=*") if root.is_dir() else ():
        if path.name == f"at={keep_ms}":
            continue
        (path / f"_complete-{cluster}").unlink(missing_ok=True)
        for part in path.iterdir():
            if part.is_dir():
                shutil.rmtree(part / f"cluster={cluster}", ignore_errors=True)
        if not any(path.glob("_complete-*")):
            shutil.rmtree(path, ignore_errors=True)


def create_run(
    since: date,
    until: date,
    clusters: Sequence[str] = (),
    trigger: str = AnalyticsRun.Trigger.PAGE,
    user_id: int | None = None,
) -> AnalyticsRun:
    if since > until:
        raise JobInputError(f"--since {since} is after --until {until}")
    return AnalyticsRun.objects.create(
        since=since, until=until, clusters=",".join(clusters), trigger=trigger, requested_by_id=user_id
    )
