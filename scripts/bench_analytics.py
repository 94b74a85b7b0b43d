"""Benchmark the analytics job on a warm Spark Connect server, the way the product runs it.

Figures (``--json`` keys), each measured in the same run against the same server:

* ``incremental_small_s``: a cursor run over the first 5 minutes of a demo-sized cluster's second day
  (only the bytes after the cursor, from the state saved there: day 1's checkpoint; "now" at the end
  of those 5 minutes): what beat's every-few-minutes run costs on ``scripts/run``'s cluster, load
  excluded;
* ``incremental_day_s``: the last day of the history alone, from the previous day's checkpoint (one
  day of the 10-million history is ~330,000 records);
* ``full_s``: the whole history recomputed (every day, every metric, Parquet results, checkpoint)
  the way a deployment recomputes it: every closed day read from its compacted Parquet (the nightly
  run compacts each day once), not from the JSON, on a server that has run the same recompute once
  before (timed too, as ``full_cold_s``), as the product's server has on every night but the first;
* ``full_cold_s``: that first recompute, on a server warmed by a demo-sized run only (the JVM still
  compiles the large-input paths); ``full_cold_ratio`` and ``full_cold_cpu_ratio`` its ratios (all
  three None with ``--quick``, whose two demo days take none of the large-input paths);
* ``full_json_s``: the same recompute reading the JSON (a history nobody compacted yet);
* ``compaction_s``: bringing the compacted copy of the history up to date before ``full_s`` (about
  0 when an earlier benchmark left it); ``compact_day_s``: compacting the last day again (what the
  nightly run adds per day);
* ``field_scan_s``: Spark parsing every field the job reads from the JSON files
  (``spark.read.schema(RECORD_SCHEMA).json(files).write.format("noop")``); ``full_ratio`` is
  ``full_s / field_scan_s`` (``full_json_ratio`` the same for ``full_json_s``, the same input on both
  sides); ``full_cpu_ratio`` and ``full_json_cpu_ratio`` are the same ratios of server CPU seconds.

The server is started for the benchmark on a free loopback port (``local[*]``) unless ``--remote``
names one; it is warmed up by an untimed run first, because the product's server is warm. It also
prints the server JVM's CPU seconds (when it started it) and the load average: the machine is shared.

Targets on the 2-core machine: incremental_small_s < 10, incremental_day_s < 20, full_s < 60,
full_ratio <= 2.5.

Usage::

    .venv/bin/python scripts/bench_analytics.py            # 10 million records, 30 days (heavy: flock)
    .venv/bin/python scripts/bench_analytics.py --quick    # the demo cluster's 2 days: the test suite's
    .venv/bin/python scripts/bench_analytics.py --json [--remote sc://127.0.0.1:15002]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from pyspark.sql import SparkSession  # noqa: E402 - after the path set-up above

from scripts.devservices import SparkConnectServer, free_port, process_cpu_seconds  # noqa: E402
from scripts.support.generate import GenerationSummary, HistorySpec, existing_summary, generate  # noqa: E402
from workers.analytics import cursor  # noqa: E402
from workers.analytics import records as R  # noqa: E402
from workers.analytics.compaction import compact  # noqa: E402
from workers.analytics.inputs import state_root  # noqa: E402
from workers.analytics.job import JobConfig, build_spark, run  # noqa: E402

TARGETS = {"incremental_small_s": 10.0, "incremental_day_s": 20.0, "full_s": 60.0, "full_ratio": 2.5}
SMALL_MINUTES = 5
SMALL_HISTORY_RECORDS = 100_000
# A demo-sized cluster (scripts/run: five brokers, two topics), about the 242 records of a quiet day.
DEMO_SPEC = HistorySpec(
    cluster="demo",
    topics=2,
    partitions_per_topic=6,
    brokers=5,
    days=2,
    target_records=2_000,
    failovers=1,
    rolling_restart_every_days=2,
    reassignment_every_days=1,
    reassignment_topics=1,
)


def tree_cpu_seconds(pid: int) -> float | None:
    """CPU seconds of a process and all its descendants (the server's bash wrappers and its JVM).

    ``None`` only when ``pid`` itself is gone: a thread or child that ends while the tree is walked
    (the JVM starts and ends threads all the time) is skipped, not allowed to void the figure.
    """
    try:
        total = process_cpu_seconds(pid)
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except (OSError, ValueError, IndexError):
        return None
    for task in tasks:
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            total += tree_cpu_seconds(int(child)) or 0.0
    return total


@contextlib.contextmanager
def spark_server(remote: str | None, base: Path) -> Iterator[tuple[str, int | None]]:
    """The Connect URL to use, and the server's pid when this benchmark started it."""
    if remote:
        yield remote, None
        return
    # A directory of this run's own: ``--dir`` may be shared (one generated history for several
    # checkouts), and a pid file there would let another run stop or adopt this server.
    server_dir = Path(tempfile.mkdtemp(prefix="spark-server-", dir=base))
    server = SparkConnectServer(host="127.0.0.1", port=free_port(), base_dir=server_dir, driver_memory="6g")
    try:
        server.start(timeout=240.0)
        yield server.remote, server.recorded_pid()
    finally:
        server.stop()
        shutil.rmtree(server_dir, ignore_errors=True)


def _day_ms(day: Any) -> int:
    return int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def byte_position(path: Path, cut_ms: int) -> tuple[int, int]:
    """Where the first record at or after ``cut_ms`` starts in a day's log, and how many come before it."""
    position = count = 0
    with open(path, "rb") as src:
        for line in src:
            if json.loads(line)["ts"] >= cut_ms:
                break
            position += len(line)
            count += 1
    return position, count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the analytics job on a warm Spark Connect server.")
    parser.add_argument("--quick", action="store_true", help="a small history instead of 10 million records")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--dir", type=Path, help="where the histories live (default var/analytics-bench[-quick])")
    parser.add_argument("--remote", help="an existing Spark Connect server (default: start one for the benchmark)")
    parser.add_argument("--keep", action="store_true", help="keep the job's results")
    args = parser.parse_args(argv)

    # --quick measures on the demo cluster's own history (every kind of incident; each run is the
    # job's fixed cost), so one history and one run fewer: its day-1 run is also the chain's.
    spec = DEMO_SPEC if args.quick else HistorySpec()
    base = args.dir or REPO_ROOT / "var" / ("analytics-bench-quick" if args.quick else "analytics-bench")
    source = base / "demo" if args.quick else base

    def log(message: str) -> None:
        if not args.json:
            print(message, flush=True)

    histories: dict[str, GenerationSummary] = {}
    for name, wanted, where in (("demo", DEMO_SPEC, base / "demo"), ("history", spec, source)):
        summary = histories.get("demo") if where == base / "demo" else None  # --quick: the same history
        summary = summary or existing_summary(wanted, where)
        if summary is None:
            log(f"generating {wanted.target_records:,} records under {where} ...")
            # A small history in this process: spawning worker processes costs more than it writes
            # (the demo's: 3 s with two processes, 0.03 s without).
            summary = generate(wanted, where, 1 if wanted.target_records <= SMALL_HISTORY_RECORDS else None)
        histories[name] = summary
        log(f"{name}: {summary.records:,} records, {summary.bytes / 1e6:.1f} MB in {summary.files} files")
    files = sorted(str(p) for p in (source / spec.cluster).glob("state-change-*.jsonl"))
    last = spec.start + timedelta(days=spec.days - 1)
    work = Path(tempfile.mkdtemp(prefix="results-", dir=base))
    load_before = os.getloadavg()
    figures: dict[str, Any] = {}
    cpu: dict[str, float | None] = {}
    try:
        with spark_server(args.remote, work) as (remote, pid):
            spark = build_spark(remote=remote, app_name="analytics-bench")

            def timed(name: str, action: Callable[[], Any]) -> Any:
                before = None if pid is None else tree_cpu_seconds(pid)
                started = time.perf_counter()
                value = action()
                figures[name] = round(time.perf_counter() - started, 2)
                after = None if pid is None else tree_cpu_seconds(pid)
                cpu[name] = None if before is None or after is None else round(after - before, 1)
                log(f"{name}: {figures[name]:.2f} s (server CPU {cpu[name]} s)")
                return value

            def job(
                out: str, since: Any, until: Any, inputs: Path = source, cluster: str = spec.cluster, **kw: Any
            ) -> Any:
                config = JobConfig(
                    input_dir=inputs, output_dir=work / out, since=since, until=until, clusters=(cluster,), **kw
                )
                return run(config, spark)

            # The demo cluster: day 1 checkpointed (also the warm-up), then the timed cursor run over
            # day 2's first 5 minutes, reading only those bytes. Its cursor is midnight, whose state is
            # day 1's checkpoint: the same files a cursor's saved state has, copied where one is read.
            demo = base / "demo"
            demo_day = DEMO_SPEC.start + timedelta(days=1)
            # In Spark (it would fit the Python engine): this run also warms the server.
            job("demo", DEMO_SPEC.start, DEMO_SPEC.start, demo, "demo", python_max_records=0)
            cut = _day_ms(demo_day)
            now = cut + SMALL_MINUTES * 60_000
            shutil.copytree(state_root(work / "demo", as_of=DEMO_SPEC.start), state_root(work / "demo", at_ms=cut))
            day_file = demo / "demo" / R.file_name_for(demo_day)
            (start, before), (end, upto) = byte_position(day_file, cut), byte_position(day_file, now)
            tail = cursor.write_slice(demo, "demo", demo_day, start, end, work / "slices")

            def cursor_run(**kw: Any) -> Any:
                return job(
                    "demo",
                    demo_day,
                    demo_day,
                    demo,
                    "demo",
                    now_ms=now,
                    from_ms=cut,
                    snapshots=(("demo", tail),),
                    save_state=True,
                    **kw,
                )

            # The same cursor run twice: as a deployment runs it (the Python engine: it is tiny), then
            # forced into Spark for comparison (both write the same files; the second replaces them).
            small = timed("incremental_small_s", cursor_run)
            figures["incremental_small_engine"] = small.engine
            timed("incremental_small_spark_s", lambda: cursor_run(python_max_records=0))
            small_records = upto - before
            figures["incremental_small_records"] = small.records

            # The closed days compacted as the nightly run leaves them (kept beside the history, like it),
            # then the full recompute from them; the same recompute from the JSON for comparison.
            compacted = base / "compacted"
            done = timed("compaction_s", lambda: compact(spark, source, compacted, (spec.cluster,), last))
            figures["compacted_days"] = done.days
            one_day = work / "one-day" / spec.cluster  # the last day's log alone (a link), compacted again
            one_day.mkdir(parents=True)
            (one_day / R.file_name_for(last)).symlink_to(source / spec.cluster / R.file_name_for(last))
            timed("compact_day_s", lambda: compact(spark, one_day.parent, work / "compact-day", (spec.cluster,)))
            # The same recompute twice: first on a server that has run only the demo-sized warm-up
            # (``full_cold_s``: the JVM still compiles the large-input paths), then again on the now
            # warm server (``full_s``): the product's server stays up between nightly runs.
            # --quick: only the second. The cold/warm split is about compiling the large-input paths,
            # which two demo days never take; the run would only add ~10 s of Spark to the test suite
            # (tests/integration/test_bench_analytics.py), which checks that the benchmark completes.
            if not args.quick:
                timed("full_cold_s", lambda: job("full-cold", spec.start, last, compacted_dir=compacted))
            full = timed("full_s", lambda: job("full", spec.start, last, compacted_dir=compacted))
            figures["full_records"] = full.records
            # In Spark always: the figure compares Spark's inputs (--quick's history would fit Python).
            full_json = timed("full_json_s", lambda: job("full-json", spec.start, last, python_max_records=0))
            figures["full_json_records"] = full_json.records
            timed("field_scan_s", lambda: _field_scan(spark, files))
            # The day before the last, checkpointed (not timed; from the compacted days), then the last
            # day from it, from its JSON. In --quick the demo's day-1 run above already left that checkpoint.
            chain = "demo" if args.quick else "chain"
            if not args.quick:
                job(chain, spec.start, last - timedelta(days=1), compacted_dir=compacted)
            day = timed("incremental_day_s", lambda: job(chain, last, last))
            figures["incremental_day_records"] = day.records
            figures["incremental_day_engine"] = day.engine  # --quick's day fits the Python engine
            figures["incremental_day_warm_up_days"] = day.warm_up_days
            spark.stop()
            figures["small_records_in_window"] = small_records
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    load_after = os.getloadavg()
    figures["full_ratio"] = round(figures["full_s"] / figures["field_scan_s"], 2)
    figures["full_json_ratio"] = round(figures["full_json_s"] / figures["field_scan_s"], 2)
    # The same ratios by the server's CPU seconds (None when the server is not this benchmark's): on a
    # shared machine wall time follows the load, CPU time much less.
    figures["full_cpu_ratio"] = _ratio(cpu.get("full_s"), cpu.get("field_scan_s"))
    figures["full_json_cpu_ratio"] = _ratio(cpu.get("full_json_s"), cpu.get("field_scan_s"))
    # None in --quick, which does not measure full_cold_s.
    figures["full_cold_ratio"] = _ratio(figures.setdefault("full_cold_s", None), figures["field_scan_s"])
    figures["full_cold_cpu_ratio"] = _ratio(cpu.get("full_cold_s"), cpu.get("field_scan_s"))
    figures.update(
        {
            "profile": "quick" if args.quick else "full",
            "records": histories["history"].records,
            "bytes": histories["history"].bytes,
            "days": spec.days,
            "partitions": spec.partitions,
            "cores": os.cpu_count(),
            "server_cpu_s": cpu,
            "targets": TARGETS,
            "meets_targets": {k: figures[k] < v if k != "full_ratio" else figures[k] <= v for k, v in TARGETS.items()},
            "load_average_before": [round(x, 2) for x in load_before],
            "load_average_after": [round(x, 2) for x in load_after],
        }
    )
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        log(
            f"\nincremental (5 min of the demo cluster) {figures['incremental_small_s']:.2f} s, "
            f"incremental (one day, {figures['incremental_day_records']:,} records) "
            f"{figures['incremental_day_s']:.2f} s, "
            f"full {figures['full_s']:.2f} s from Parquet ({figures['full_json_s']:.2f} s from JSON), "
            f"field scan {figures['field_scan_s']:.2f} s (full / field scan {figures['full_ratio']:.2f}x, "
            f"from JSON {figures['full_json_ratio']:.2f}x); targets met: {figures['meets_targets']}"
        )
        log(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} on {os.cpu_count()} cores")
    return 0


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return None if numerator is None or not denominator else round(numerator / denominator, 2)


def _field_scan(spark: SparkSession, files: list[str]) -> None:
    """Spark parsing every field the job reads, and nothing else (the ``noop`` sink writes nothing)."""
    spark.read.schema(R.RECORD_SCHEMA).json(files).write.format("noop").mode("overwrite").save()


if __name__ == "__main__":
    raise SystemExit(main())
