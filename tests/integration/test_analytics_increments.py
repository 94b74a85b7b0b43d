"""Loading a cursor run's increment: daily figures added to the stored ones, derived ones recomputed.

No Spark: the run directories are written here with pyarrow in the shape the job writes (one
Parquet directory per table and cluster, a manifest), and the expected rows are worked out by hand.
The end-to-end check (cursor runs equal a full recompute) is ``test_analytics_current.py``.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dashboard.analytics import models as M
from workers.analytics import load

CLUSTER = "alpha"
DAY = date(2024, 3, 2)
MIDNIGHT_MS = int(datetime(2024, 3, 2, tzinfo=UTC).timestamp() * 1000)
HOUR_MS = 3_600_000


def _write(run_dir: Path, tables: dict[str, list[dict[str, Any]]], start_ms: int, now_ms: int, increment: bool) -> None:
    for name, rows in tables.items():
        path = run_dir / name / f"cluster={CLUSTER}"
        path.mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(rows), path / "part-0.parquet")
    manifests = run_dir / "_manifests"
    manifests.mkdir(parents=True)
    manifest = {
        "cluster": CLUSTER,
        "since": DAY.isoformat(),
        "until": DAY.isoformat(),
        "window_start_ms": start_ms,
        "window_end_ms": MIDNIGHT_MS + 24 * HOUR_MS,
        "effective_end_ms": now_ms,
        "increment": increment,
        "records": 1,
        "rows": {name: len(rows) for name, rows in tables.items()},
    }
    (manifests / f"{CLUSTER}.json").write_text(json.dumps(manifest))


def _topic(leaderless_ms: float, outages: int, recoveries: int, recovery_ms: float) -> dict[str, Any]:
    return {
        "day": DAY,
        "topic": "orders",
        "partitions": 4,
        "outages": outages,
        "recoveries": recoveries,
        "leaderless_ms": leaderless_ms,
        "recovery_ms": recovery_ms,
        "mttr_ms": recovery_ms / recoveries if recoveries else None,
        "availability": 0.5,  # what the job wrote for its own part: the load must not keep it
    }


def _flap(partition: int, shrinks: int, expands: int) -> dict[str, Any]:
    return {
        "day": DAY,
        "topic": "orders",
        "partition": partition,
        "shrinks": shrinks,
        "expands": expands,
        "flaps": min(shrinks, expands),
        "rank": 1,
    }


def _unclean(at_ms: float) -> dict[str, Any]:
    return {
        "day": DAY,
        "ts": at_ms,
        "epoch": 2,
        "topic": "orders",
        "partition": 0,
        "strategy": "offline",
        "cause": "BrokerChange",
        "leader_before": 3,
        "leader_after": 1,
        "isr_before": [3],
        "isr_after": [1],
    }


@pytest.mark.django_db
def test_an_increment_adds_to_the_days_figures_and_recomputes_what_derives_from_them(tmp_path: Path) -> None:
    # From midnight to 02:00: one 10 s outage recovered; partition 0 flapped twice, 1 once.
    _write(
        tmp_path / "first",
        {
            "topic_daily": [_topic(10_000.0, 1, 1, 10_000.0)],
            "isr_flapping": [_flap(0, 2, 2), _flap(1, 1, 1)],
            "unclean_elections": [_unclean(MIDNIGHT_MS + HOUR_MS)],
        },
        MIDNIGHT_MS,
        MIDNIGHT_MS + 2 * HOUR_MS,
        increment=False,
    )
    load.load_directory(tmp_path / "first", DAY, DAY)
    # The cursor run 02:00-04:00: another outage of 20 s, recovered; partition 1 flaps twice more.
    _write(
        tmp_path / "second",
        {
            "topic_daily": [_topic(20_000.0, 1, 1, 20_000.0)],
            "isr_flapping": [_flap(1, 2, 2)],
            "unclean_elections": [_unclean(MIDNIGHT_MS + 3 * HOUR_MS)],
        },
        MIDNIGHT_MS + 2 * HOUR_MS,
        MIDNIGHT_MS + 4 * HOUR_MS,
        increment=True,
    )
    load.load_directory(tmp_path / "second", DAY, DAY)

    orders = M.TopicAvailability.objects.get(cluster=CLUSTER, topic="orders", day=DAY)
    assert (orders.outages, orders.recoveries) == (2, 2)
    assert (orders.leaderless_s, orders.recovery_s, orders.mttr_s) == (30.0, 30.0, 15.0)
    # 30 leaderless partition-seconds over 4 partitions x the 4 hours of the day so far.
    assert orders.availability == pytest.approx(1 - 30.0 / (4 * 4 * 3600.0))
    flapping = {r.partition: (r.shrinks, r.expands, r.flaps, r.rank) for r in M.IsrFlapping.objects.all()}
    assert flapping == {0: (2, 2, 2, 2), 1: (3, 3, 3, 1)}  # partition 1 overtook partition 0
    # Unclean elections are listed, not summed: the earlier one stays, the increment's is added.
    assert sorted(r.at.hour for r in M.UncleanElection.objects.all()) == [1, 3]
