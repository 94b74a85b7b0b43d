"""The Python engine for tiny runs equals the Spark job, table by table and state part by state part.

Each case runs one job twice from the same output directory (the same saved state): once in Spark,
once in Python (``workers.analytics.small``), and compares every result table and saved-state part
row for row (floats to the microsecond, ``topics`` as a set: Spark's ``collect_set`` has no order)
and column types. The cuts are random (the seed is in the failure message): a day's first run from
midnight without a cursor, then cursor runs, on the hand-computed history (every kind of incident,
operator actions) and on the demo cluster's generated day.
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from scripts.support.generate import generate
from tests.integration.analytics_history import CLUSTER, D1, D2, ms
from tests.integration.conftest import SharedDir
from workers.analytics import cursor
from workers.analytics import job as J
from workers.analytics import records as R
from workers.analytics import transforms as X
from workers.analytics.inputs import JobConfig, state_root
from workers.analytics.small import engine
from workers.analytics.small import events as E
from workers.analytics.small.state import STATE_PARTS
from workers.analytics.transforms import DAY_MS

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


def _seed() -> int:
    return int(datetime.now(UTC).timestamp())


def _normal(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, 6)
    if isinstance(value, datetime):
        return value.replace(tzinfo=None).isoformat()
    if isinstance(value, list):
        return [_normal(v) for v in value]
    return value


def _read(directory: Path) -> tuple[list[tuple[Any, ...]], dict[str, str]]:
    files = sorted(p for p in directory.rglob("*.parquet") if not p.name.startswith((".", "_")))
    rows: list[tuple[Any, ...]] = []
    types: dict[str, str] = {}
    for path in files:
        table = pq.read_table(path)
        for field in table.schema:
            kind = field.type
            types[field.name] = "timestamp" if pa.types.is_timestamp(kind) else str(kind).replace(" not null", "")
        for row in table.to_pylist():
            if "topics" in row and row["topics"] is not None:
                row["topics"] = sorted(row["topics"])
            rows.append(tuple(sorted((k, _normal(v)) for k, v in row.items())))
    return sorted(rows, key=repr), types


def differences(spark_out: Path, python_out: Path, config: JobConfig, cluster: str) -> list[str]:
    """What differs between the two runs' tables and saved states (empty when they are equal)."""
    found = []
    run_name = config.run_dir.relative_to(config.output_dir)
    places = [(f"table {t}", run_name / t / f"cluster={cluster}") for t in J.TABLES]
    roots = []
    if config.closed:
        roots.append(state_root(Path(), as_of=config.until))
    if config.save_state:
        roots.append(state_root(Path(), at_ms=config.window.effective_end_ms))
    places += [
        (f"state {root.name} {part}", root / part / f"cluster={cluster}") for root in roots for part in STATE_PARTS
    ]
    for label, place in places:
        want, want_types = _read(spark_out / place)
        got, got_types = _read(python_out / place)
        if want != got:
            missing = [r for r in want if r not in got][:3]
            extra = [r for r in got if r not in want][:3]
            found.append(
                f"{label}: {len(want)} rows in Spark, {len(got)} in Python; Spark only {missing}; Python only {extra}"
            )
        elif want and want_types != got_types:
            found.append(f"{label}: column types {want_types} (Spark) != {got_types} (Python)")
    for root in roots:
        if not (python_out / root / f"_complete-{cluster}").is_file():
            found.append(f"state {root.name}: not marked complete")
    return found


def both_engines(spark: SparkSession, config: JobConfig, work: Path) -> tuple[Path, Path]:
    """Run ``config`` in Spark and in Python, each on its own copy of its output directory."""
    spark_out, python_out = work / "spark", work / "python"
    for target in (spark_out, python_out):
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(config.output_dir, target)
    clusters = J.discover(dataclasses.replace(config, output_dir=python_out))
    assert engine.eligible(dataclasses.replace(config, python_max_records=10_000), clusters)
    J.run(dataclasses.replace(config, output_dir=spark_out, python_max_records=0), spark)
    engine.run(dataclasses.replace(config, output_dir=python_out))
    return spark_out, python_out


def _position(lines: list[bytes], cut: float) -> int:
    """Bytes of the whole lines written before ``cut`` (a torn line ends the log)."""
    upto = 0
    for line in lines:
        try:
            if json.loads(line)["ts"] >= cut:
                break
        except ValueError:
            break
        upto += len(line)
    return upto


def _chain(
    spark: SparkSession,
    log: Path,
    day: date,
    cluster: str,
    start_ms: int | None,
    cuts: list[float],
    work: Path,
    seed: int,
    **kw: Any,
) -> None:
    """Beat's runs of ``day`` at ``cuts``, each compared: from the state saved at ``start_ms`` under
    ``work/out`` (None: the first from midnight, without a cursor), then from each one's cursor."""
    output = work / "out"
    lines = (log / cluster / f"state-change-{day.isoformat()}.jsonl").read_bytes().splitlines(keepends=True)
    previous_ms = start_ms
    previous_bytes = 0 if start_ms is None else _position(lines, start_ms)
    for index, cut in enumerate(cuts):
        upto = _position(lines, cut)
        tail = cursor.write_slice(log, cluster, day, previous_bytes, upto, work / "slices" / str(index))
        config = JobConfig(
            input_dir=log,
            output_dir=output,
            since=day,
            until=day,
            clusters=(cluster,),
            now_ms=int(cut),
            from_ms=previous_ms,
            snapshots=((cluster, tail),),
            save_state=True,
            **kw,
        )
        spark_out, python_out = both_engines(spark, config, work / f"cut-{index}")
        problems = differences(spark_out, python_out, config, cluster)
        assert not problems, f"seed {seed}, cut {cut} ({index}): " + "\n".join(problems)
        # The next run (both engines) starts from the state the Python engine saved: Spark reads it too.
        shutil.rmtree(output)
        shutil.copytree(python_out, output)
        previous_ms, previous_bytes = int(cut), upto


def test_cursor_runs_of_the_hand_computed_history(
    spark: SparkSession, history: Path, audit: Path, tmp_path: Path
) -> None:
    seed = _seed()
    rng = random.Random(seed)
    # Day 1 from midnight (no state: no earlier day), then cursor runs; day 2 from day 1's checkpoint.
    cuts = sorted(rng.uniform(ms(D1, 0, 0, 1), ms(D1, 23, 59, 59)) for _ in range(2))
    (tmp_path / "d1" / "out").mkdir(parents=True)
    _chain(spark, history, D1, CLUSTER, None, cuts, tmp_path / "d1", seed, actions_dir=audit)

    output = tmp_path / "d2" / "out"
    J.run(JobConfig(input_dir=history, output_dir=output, since=D1, until=D1, actions_dir=audit), spark)
    midnight = int(ms(D2, 0, 0))
    shutil.copytree(state_root(output, as_of=D1), state_root(output, at_ms=midnight))
    # One cut on day 2: its run starts from a closed day's checkpoint (with the outage open across
    # midnight), the case day 1's runs do not have; a second would start from a mid-day cursor state,
    # which day 1's second cut and the demo day's second cut already compare. Each Spark run is
    # ~10 server CPU-s of the suite's busiest stretch.
    cuts = [rng.uniform(midnight + 1, ms(D2, 23, 59, 59))]
    _chain(spark, history, D2, CLUSTER, midnight, cuts, tmp_path / "d2", seed, actions_dir=audit)


def test_cursor_runs_of_the_demo_clusters_generated_day(
    spark: SparkSession, shared_dir: SharedDir, tmp_path: Path
) -> None:
    """The benchmark's demo-sized cluster (~1,000 records a day, every kind of incident the generator
    makes): day 1 from midnight, then day 2 in cursor runs from day 1's checkpoint."""
    from scripts.bench_analytics import DEMO_SPEC

    def build(where: Path) -> None:
        generate(DEMO_SPEC, where, 1)

    log = shared_dir("demo-history", build)
    seed = _seed()
    rng = random.Random(seed)
    first = DEMO_SPEC.start
    second = first + timedelta(days=1)
    start = int(datetime(first.year, first.month, first.day, tzinfo=UTC).timestamp() * 1000)
    cuts = sorted(rng.uniform(start + 1, start + DAY_MS) for _ in range(1))
    (tmp_path / "d1" / "out").mkdir(parents=True)
    _chain(spark, log, first, DEMO_SPEC.cluster, None, cuts, tmp_path / "d1", seed)

    output = tmp_path / "d2" / "out"
    J.run(JobConfig(input_dir=log, output_dir=output, since=first, until=first), spark)
    midnight = start + DAY_MS
    shutil.copytree(state_root(output, as_of=first), state_root(output, at_ms=midnight))
    cuts = sorted(rng.uniform(midnight + 1, midnight + DAY_MS) for _ in range(2))
    _chain(spark, log, second, DEMO_SPEC.cluster, midnight, cuts, tmp_path / "d2", seed)


EDGE_LINES = [
    {"ts": 1.0, "kind": None, "leader_after": -1, "topic": "t", "partition": 0},
    {"ts": 2.0, "kind": R.KIND_PARTITION_TRANSITION, "leader_after": 3, "topic": "t", "partition": 0},
    {"ts": 3.0, "leader_after": 3, "topic": "t", "partition": 0},
    {"ts": 4.0, "kind": R.KIND_ISR_CHANGE, "entity": "orders-eu-3@5", "isr_before": [1, 2], "isr_after": [2, 4]},
    {"ts": 5.0, "kind": R.KIND_ISR_CHANGE, "entity": "orders-99999999999", "isr_before": [1]},
    {"ts": 6.0, "kind": R.KIND_STATE_SNAPSHOT, "partition_states": {"Online": ["a-0"], "Offline": None}},
    {"ts": 7.0, "kind": R.KIND_ELECTION, "partition": 1.5, "controller_epoch": True, "unclean": "yes"},
    {"ts": "soon", "kind": R.KIND_ELECTION},
    {
        "ts": 8.0,
        "kind": R.KIND_BROKER_CHANGE,
        "new_brokers": [1, None],
        "session_lost_brokers": [2],
        "session_lost_ms": 7.5,
    },
    {"ts": 9.0, "kind": R.KIND_REASSIGNMENT, "event_id": "e1", "phase": "started", "topic": "t", "partition": 2},
]


def test_records_are_read_and_projected_as_spark_does(spark: SparkSession, tmp_path: Path) -> None:
    """Edge cases of reading and ``prepare_events`` (SQL nulls, wrong types, torn line), one Spark query."""
    log = tmp_path / "edge.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in EDGE_LINES) + '{"ts": 10.0, "ki')
    frame = X.prepare_events(spark.read.schema(R.RECORD_SCHEMA).option("mode", "PERMISSIVE").json(str(log)))
    want = sorted((row.asDict(recursive=True) for row in frame.collect()), key=lambda r: r["ts"])
    got = [e for e in (E.prepare(r, "c") for r in E.read_lines([log])) if e is not None]
    for event in got:
        del event["cluster"]
    assert [e["ts"] for e in got] == [r["ts"] for r in want]
    for mine, spark_row in zip(got, want, strict=True):
        assert mine == spark_row, mine["ts"]
