"""Today's analytics lag behind the controller by less than 5 minutes with ``scripts/run``'s beat schedule.

A small cluster's log for *today*, written by the controller's own logger at the real clock: a
broker dies (its ZooKeeper session lost a session timeout before the controller noticed) and one
partition is leaderless until the next election. Beat's task ``workers.analytics.current`` then
runs as a worker would run it (settings, Spark Connect server, loader), and the outage must be in
the database with its honest start. The lag a user sees is at most one beat interval (the record
lands just after a tick) plus the run's duration, so both are measured against the 5 minutes.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from controller_core.model import LeaderAndIsr, TopicPartition
from controller_core.state_change_log import JsonLinesDailySink, StateChangeLogger
from dashboard.analytics import models as M
from scripts.devservices import SparkConnectServer, free_port
from workers.analytics import runner, tasks

pytestmark = [pytest.mark.slow, pytest.mark.django_db, pytest.mark.timeout(600)]  # may start the Spark server

CLUSTER = "demo"
LAG_TARGET_S = 300.0
SESSION_TIMEOUT_S = 18.0


def _write_broker_kill(log_dir: Path, start_s: float) -> None:
    """Broker 2 leads orders-0 and orders-1; it dies, orders-0 has nobody else in sync for 0.4 s."""
    now = [start_s]
    sink = JsonLinesDailySink(log_dir / CLUSTER)
    log = StateChangeLogger(sink, 1, lambda: 1, clock=lambda: now[0])
    on, off = "OnlinePartition", "OfflinePartition"
    orders_0, orders_1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    with log.caused_by("TopicChange"):
        log.partition_transition(orders_0, "NewPartition", on, LeaderAndIsr(2, 0, (2, 1)))
        log.partition_transition(orders_1, "NewPartition", on, LeaderAndIsr(2, 0, (2, 3)))
    now[0] = start_s + 30.0
    with log.caused_by("BrokerChange"):
        log.record(
            "broker_change",
            new_brokers=[],
            dead_brokers=[2],
            bounced_brokers=[],
            session_lost_brokers=[2],
            session_lost_ms=(now[0] - SESSION_TIMEOUT_S) * 1000.0,
            session_lost_estimated=True,
        )
        log.partition_transition(orders_0, on, off)
        log.election(orders_1, "offline", on, on, before=LeaderAndIsr(2, 0, (2, 3)), after=LeaderAndIsr(3, 1, (3,)))
        now[0] += 0.4
        log.election(orders_0, "offline", off, on, before=LeaderAndIsr(2, 0, (2, 1)), after=LeaderAndIsr(1, 1, (1,)))
    sink.close()


def test_a_broker_kill_shows_on_todays_analytics_within_five_minutes(
    spark_connect: SparkConnectServer, settings: Any, tmp_path: Path
) -> None:
    entry: dict[str, Any] = django_settings.CELERY_BEAT_SCHEDULE["analytics-current"]
    every_s = float(entry["schedule"])
    settings.STATE_CHANGE_LOG_DIR = tmp_path / "log"
    settings.ANALYTICS_OUTPUT_DIR = str(tmp_path / "results")
    settings.ANALYTICS_COMPACTED_DIR = str(tmp_path / "compacted")
    settings.ANALYTICS_AUDIT_DIR = str(tmp_path / "audit")
    settings.ANALYTICS_COMPACT = False
    settings.SPARK_REMOTE = spark_connect.remote

    now = time.time()
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    start_s = max(now - 40.0, midnight + 1.0)  # today's records, in the past (a run near midnight too)
    if start_s + 31.0 > now + 1.0:  # so close to midnight that today has no room: tomorrow's ticks see it
        pytest.skip("too close to midnight UTC for today's records to be in the past")
    _write_broker_kill(tmp_path / "log", start_s)

    started = time.monotonic()
    status = tasks.current.run()  # what beat's tick makes a worker do
    run_s = time.monotonic() - started
    assert status.get("status") == "succeeded", status

    killed = start_s + 30.0
    interval = M.UnavailabilityInterval.objects.get(cluster=CLUSTER, topic="orders", partition=0)
    assert interval.started_at == datetime.fromtimestamp(killed, UTC)  # detected
    assert interval.estimated_started_at == datetime.fromtimestamp(killed - SESSION_TIMEOUT_S, UTC)
    assert interval.outage_s == pytest.approx(SESSION_TIMEOUT_S + 0.4, abs=1e-3)
    assert interval.cause_broker == 2
    today = datetime.fromtimestamp(killed, UTC).date()
    orders = M.TopicAvailability.objects.get(cluster=CLUSTER, topic="orders", day=today)
    assert orders.outages == 1 and orders.recoveries == 1
    # Worst case a user waits: the record lands just after a tick, then the next tick's run.
    assert every_s + run_s < LAG_TARGET_S, f"beat every {every_s:.0f} s + run {run_s:.1f} s"
    # The next tick with nothing new logged does nothing (no Spark, no row).
    runs = M.AnalyticsRun.objects.count()
    assert tasks.current.run() == {"skipped": "no new state changes"}
    assert M.AnalyticsRun.objects.count() == runs


def test_tiny_ticks_never_touch_spark(settings: Any, tmp_path: Path) -> None:
    """Beat's ticks over a small log take the Python engine from end to end: with no Spark server
    at all (``SPARK_REMOTE`` names a closed port, compaction on), both the day's first tick and the
    cursor tick after more records succeed, and the outage is loaded."""
    settings.STATE_CHANGE_LOG_DIR = tmp_path / "log"
    settings.ANALYTICS_OUTPUT_DIR = str(tmp_path / "results")
    settings.ANALYTICS_COMPACTED_DIR = str(tmp_path / "compacted")
    settings.ANALYTICS_AUDIT_DIR = str(tmp_path / "audit")
    settings.ANALYTICS_COMPACT = True
    settings.SPARK_REMOTE = f"sc://127.0.0.1:{free_port()}"  # nobody listens: any Spark use fails the run

    now = time.time()
    midnight = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0).timestamp()
    start_s = max(now - 40.0, midnight + 1.0)
    if start_s + 31.0 > now + 1.0:
        pytest.skip("too close to midnight UTC for today's records to be in the past")
    log_file = tmp_path / "log" / CLUSTER / f"state-change-{datetime.fromtimestamp(start_s, UTC).date()}.jsonl"
    _write_broker_kill(tmp_path / "log", start_s)
    lines = log_file.read_text().splitlines(keepends=True)
    log_file.write_text("".join(lines[:2]))  # the first tick sees the partitions created

    today = datetime.fromtimestamp(start_s, UTC).date()
    pipeline = runner.PipelineSettings.from_django()
    # The first tick just after the partitions were created; the next one now, after the broker died.
    first = runner.execute_current(today, pipeline, now_ms=int((start_s + 1.0) * 1000))
    assert first.get("status") == "succeeded", first
    log_file.write_text("".join(lines))
    second = runner.execute_current(today, pipeline, now_ms=int(time.time() * 1000))
    assert second.get("status") == "succeeded", second
    assert M.AnalyticsCursor.objects.get(cluster=CLUSTER).bytes == log_file.stat().st_size
    interval = M.UnavailabilityInterval.objects.get(cluster=CLUSTER, topic="orders", partition=0)
    assert interval.cause_broker == 2 and interval.outage_s == pytest.approx(SESSION_TIMEOUT_S + 0.4, abs=1e-3)
