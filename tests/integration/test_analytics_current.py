"""Beat's every-few-minutes runs (cursor runs) against the hand-computed history.

A module of its own so that pytest-xdist runs it on another worker than ``test_analytics_job.py``
(``--dist loadgroup``, one group per Spark module): its five job runs overlap the other module's.
The history and the one-run-over-both-days fixture are shared (``analytics_history.py``).
"""

from __future__ import annotations

import dataclasses
import json
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from dashboard.analytics import models as M
from tests.integration.analytics_history import (
    AFTER_BOTH_DAYS_MS,
    CLUSTER,
    D1,
    D2,
    ms,
    pipeline_settings,
    store_actions,
)
from workers.analytics import load, runner

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


# --- today's analytics, every few minutes -------------------------------------------------------------


def _snapshot() -> dict[str, list[tuple[Any, ...]]]:
    """Every result row of the cluster, field by field (floats to the microsecond), without ids."""
    got: dict[str, list[tuple[Any, ...]]] = {}
    for t in load.TABLES:
        fields = [f.attname for f in t.model._meta.concrete_fields if f.attname != "id"]
        rows = t.model._default_manager.filter(cluster=CLUSTER).values_list(*fields)
        got[t.name] = sorted((tuple(round(v, 6) if isinstance(v, float) else v for v in row) for row in rows), key=repr)
    return got


@pytest.mark.django_db
def test_runs_every_few_minutes_equal_a_full_recompute_whatever_the_cuts(
    spark: SparkSession, history: Path, both_days: Path, tmp_path: Path
) -> None:
    """Beat's run of today so far, at random moments, then the nightly one: the loaded tables end
    exactly as one run over both days leaves them; at a chosen moment, the hand-computed figures."""
    seed = int(datetime.now(UTC).timestamp())
    rng = random.Random(seed)
    lines = {
        day: (history / CLUSTER / f"state-change-{day.isoformat()}.jsonl").read_text().splitlines(keepends=True)
        for day in (D1, D2)
    }
    log_dir = tmp_path / "log" / CLUSTER
    log_dir.mkdir(parents=True)

    def write_until(cut_ms: float | None) -> None:
        """The log as the controller had written it by ``cut_ms`` (everything, torn line too, if None)."""
        for day, day_lines in lines.items():
            kept = []
            for line in day_lines:
                try:
                    if cut_ms is not None and json.loads(line)["ts"] >= cut_ms:
                        break
                except ValueError:  # the torn last line
                    if cut_ms is not None:
                        break
                kept.append(line)
            if kept:
                (log_dir / f"state-change-{day.isoformat()}.jsonl").write_text("".join(kept))

    store_actions()
    pipeline = pipeline_settings(tmp_path, tmp_path / "log", compact=False)
    # One random cut a day (each leaves rows that later runs must replace or merge, never duplicate),
    # plus the hand-checked moment; five job runs in all, each ~10 s of the suite's critical path.
    day1_cuts = sorted([rng.uniform(ms(D1, 0, 0, 1), ms(D1, 23, 59)), ms(D1, 23, 59, 30)])
    day2_cuts = [rng.uniform(ms(D2, 0, 0), ms(D2, 9, 0))]  # records follow it: the last run has work
    for cut in day1_cuts:
        write_until(cut)
        status = runner.execute_current(D1, pipeline, spark=spark, now_ms=int(cut))
        assert status.get("status") == "succeeded", (seed, cut, status)
    # Hand-computed at 23:59:30: orders-0 leaderless since 23:59:00, still open; 0.5 + 1.0 + 30 s.
    open_interval = M.UnavailabilityInterval.objects.get(cluster=CLUSTER, topic="orders", started_at__hour=23)
    assert open_interval.ended_at is None and open_interval.started_at.minute == 59
    assert M.TopicAvailability.objects.get(cluster=CLUSTER, topic="orders", day=D1).leaderless_s == pytest.approx(31.5)
    # Nothing new since the last run: no run at all.
    assert runner.execute_current(D1, pipeline, spark=spark, now_ms=int(day1_cuts[-1])) == {
        "skipped": "no new state changes"
    }

    # After midnight the nightly run compacts day 1 and recomputes it in full.
    write_until(ms(D2, 0, 0))
    nightly = runner.create_run(D1, D1, trigger=M.AnalyticsRun.Trigger.NIGHTLY)
    night_pipeline = dataclasses.replace(pipeline, compact=True)
    runner.execute(nightly, night_pipeline, spark=spark, now_ms=int(ms(D2, 0, 30)))
    nightly.refresh_from_db()
    assert nightly.status == M.AnalyticsRun.Status.SUCCEEDED, nightly.error
    final_cuts: list[float | None] = [*day2_cuts, None]
    for later in final_cuts:
        write_until(later)
        now = int(later if later is not None else AFTER_BOTH_DAYS_MS)
        status = runner.execute_current(D2, pipeline, spark=spark, now_ms=now)
        assert status.get("status") in ("succeeded", None), (seed, later, status)

    got = _snapshot()
    for t in load.TABLES:
        t.model._default_manager.filter(cluster=CLUSTER).delete()
    load.load_run(both_days.parent.parent, D1, D2)
    want = _snapshot()
    for name in want:
        assert got[name] == want[name], f"{name} differs (cuts {day1_cuts} / {day2_cuts}, seed {seed})"
