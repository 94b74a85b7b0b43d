"""The analytics pipeline against the small history whose answers were worked out by hand.

The history, what happens in it and what the job must find are in ``analytics_history.py``; the
every-few-minutes runs (cursor runs) are tested in ``test_analytics_current.py``.
"""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from pyspark.sql import SparkSession

from controller_core.state_change_log import MemorySink, StateChangeLogger
from dashboard.analytics import models as M
from scripts.devservices import SparkConnectServer
from scripts.support import generate
from tests.integration.analytics_history import (
    CLUSTER,
    D1,
    D2,
    DAY_S,
    ORDERS_0,
    L,
    _config,
    at,
    by,
    ms,
    pipeline_settings,
    store_actions,
    table,
)
from tests.support.processes import jvm_arguments
from workers.analytics import load, runner
from workers.analytics.job import (
    UNCOMPRESSED_CACHE_CONF,
    JobInputError,
    JobResult,
    build_spark,
    discover,
    run,
)

# 600 s, not the suite's 300: a test's setup may include starting the shared Spark server (up to 180 s
# on a loaded machine) and the job runs its module shares.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


# --- the job's answers -----------------------------------------------------------------------------------


def test_it_finds_every_unavailability_interval(both_days: Path) -> None:
    rows = sorted(table(both_days, "unavailability_intervals"), key=lambda r: r["start_ms"])
    got = [
        (r["topic"], r["partition"], r["start_ms"], r["end_ms"], r["duration_ms"], r["cause_broker"], r["end_reason"])
        for r in rows
    ]
    assert got == [
        ("orders", 0, ms(D1, 1, 0, 0.1), ms(D1, 1, 0, 0.6), pytest.approx(500.0), 1, "elected"),
        ("payments", 0, ms(D1, 2, 0, 0.0), ms(D1, 2, 30, 0.5), pytest.approx(1_800_500.0), 3, "elected"),
        ("orders", 1, ms(D1, 2, 0, 0.05), ms(D1, 2, 0, 1.05), pytest.approx(1000.0), 3, "elected"),
        ("payments", 0, ms(D1, 23, 0, 0.0), ms(D1, 23, 0, 2.0), pytest.approx(2000.0), 3, "elected"),
        ("orders", 0, ms(D1, 23, 59), ms(D2, 0, 1), pytest.approx(120_000.0), 1, "elected"),
    ]
    # Only the death that recorded its session's loss has an estimated start; the figures use it.
    estimated = [(r["estimated_start_ms"], r["outage_start_ms"], r["outage_ms"]) for r in rows]
    assert estimated[3] == (ms(D1, 22, 59, 42), ms(D1, 22, 59, 42), pytest.approx(20_000.0))
    assert [e[0] for e in estimated[:3] + estimated[4:]] == [None] * 4
    assert [e[1] for e in estimated[:3] + estimated[4:]] == [r["start_ms"] for r in rows[:3] + rows[4:]]


def test_it_computes_availability_and_mttr_per_topic_and_day(both_days: Path) -> None:
    rows = by(table(both_days, "topic_daily"), "topic", "day")
    orders1, payments1 = rows[("orders", D1)], rows[("payments", D1)]
    orders2, payments2 = rows[("orders", D2)], rows[("payments", D2)]
    assert orders1["partitions"] == 3  # orders-2 is known only from the failover snapshot
    assert orders1["leaderless_ms"] == pytest.approx(61_500.0)  # 0.5 + 1.0 + 60 before midnight
    assert orders1["availability"] == pytest.approx(1 - 61.5 / (3 * DAY_S))
    assert (orders1["outages"], orders1["recoveries"]) == (3, 2)
    assert orders1["mttr_ms"] == pytest.approx(750.0)
    # payments-0's second outage counts from broker 3's lost session (22:59:42), not from 23:00:00.
    assert payments1["leaderless_ms"] == pytest.approx(1_820_500.0)
    assert payments1["availability"] == pytest.approx(1 - 1820.5 / DAY_S)
    assert (payments1["outages"], payments1["recoveries"]) == (2, 2)
    assert payments1["mttr_ms"] == pytest.approx(910_250.0)
    assert orders2["leaderless_ms"] == pytest.approx(60_000.0)
    assert orders2["availability"] == pytest.approx(1 - 60 / (3 * DAY_S))
    assert (orders2["outages"], orders2["recoveries"], orders2["mttr_ms"]) == (0, 1, pytest.approx(120_000.0))
    assert (payments2["availability"], payments2["outages"], payments2["mttr_ms"]) == (1.0, 0, None)


def test_it_attributes_outages_to_the_broker_lost_and_the_partition(both_days: Path) -> None:
    brokers = by(table(both_days, "broker_daily"), "broker", "day")
    assert set(brokers) == {(1, D1), (3, D1), (1, D2)}
    b1, b3, b1_d2 = brokers[(1, D1)], brokers[(3, D1)], brokers[(1, D2)]
    assert (b1["outages"], b1["recoveries"], b1["mttr_ms"]) == (2, 1, pytest.approx(500.0))
    assert b1["leaderless_ms"] == pytest.approx(60_500.0)
    assert (b3["outages"], b3["recoveries"]) == (3, 3)
    assert b3["mttr_ms"] == pytest.approx((1000.0 + 1_800_500.0 + 20_000.0) / 3)
    assert (b1_d2["outages"], b1_d2["recoveries"], b1_d2["leaderless_ms"]) == (0, 1, pytest.approx(60_000.0))
    parts = by(table(both_days, "partition_daily"), "topic", "partition", "day")
    assert parts[("payments", 0, D1)]["outages"] == 2
    assert parts[("orders", 0, D1)]["leaderless_ms"] == pytest.approx(60_500.0)
    assert parts[("orders", 0, D2)]["mttr_ms"] == pytest.approx(120_000.0)


def test_it_counts_elections_by_strategy_and_cause_and_lists_unclean_ones(both_days: Path) -> None:
    rows = {
        (r["day"], r["strategy"], r["cause"]): (r["elections"], r["unclean"])
        for r in table(both_days, "elections_daily")
    }
    assert rows == {
        (D1, "offline", "BrokerChange"): (4, 1),
        (D1, "preferred", "AutoPreferredReplicaLeaderElection"): (2, 0),
        (D2, "offline", "BrokerChange"): (1, 0),
        (D2, "controlled_shutdown", "ControlledShutdown"): (1, 0),
    }
    [unclean] = table(both_days, "unclean_elections")
    assert (unclean["topic"], unclean["partition"], unclean["ts"]) == ("payments", 0, ms(D1, 23, 0, 2))
    assert (unclean["leader_before"], unclean["leader_after"], unclean["isr_before"], unclean["isr_after"]) == (
        3,
        1,
        [3],
        [1],
    )
    assert (unclean["epoch"], unclean["strategy"]) == (2, "offline")


def test_it_carries_leaders_forward_minute_by_minute(both_days: Path) -> None:
    rows = table(both_days, "leader_counts")
    assert len(rows) == 3 * 2 * 1440  # brokers x minutes: never partitions x minutes

    def counts(day: date, hh: int, mm: int) -> dict[int, int]:
        minute = datetime(day.year, day.month, day.day, hh, mm)  # PySpark gives naive local times
        stamp = minute.replace(tzinfo=UTC).timestamp()
        return {r["broker"]: r["leaders"] for r in rows if r["minute"].timestamp() == stamp}

    assert counts(D1, 0, 0) == {1: 1, 2: 0, 3: 2}
    assert counts(D1, 1, 0) == {1: 0, 2: 1, 3: 2}
    assert counts(D1, 1, 30) == {1: 0, 2: 1, 3: 2}  # carried forward
    assert counts(D1, 2, 0) == {1: 0, 2: 2, 3: 0}  # payments-0 leaderless
    assert counts(D1, 2, 30) == {1: 0, 2: 2, 3: 1}
    assert counts(D1, 4, 0) == {1: 1, 2: 0, 3: 2}
    assert counts(D1, 23, 0) == {1: 2, 2: 0, 3: 1}
    assert counts(D1, 23, 59) == {1: 1, 2: 0, 3: 1}
    assert counts(D2, 0, 1) == {1: 2, 2: 0, 3: 1}
    assert counts(D2, 8, 0) == {1: 3, 2: 0, 3: 0}
    assert counts(D2, 23, 59) == {1: 3, 2: 0, 3: 0}
    skew = {r["minute"].timestamp(): r for r in table(both_days, "leader_skew")}
    assert skew[at(D1, 0, 0)]["skew"] == pytest.approx(2.0)
    assert skew[at(D2, 8, 0)]["skew"] == pytest.approx(3.0)
    assert (skew[at(D2, 8, 0)]["max_leaders"], skew[at(D2, 8, 0)]["min_leaders"]) == (3, 0)


def test_it_measures_the_controller_failover(both_days: Path) -> None:
    [failover] = table(both_days, "failovers")
    assert (failover["controller_epoch"], failover["controller_id"]) == (2, 2)
    assert (failover["previous_epoch"], failover["previous_controller_id"]) == (1, 1)
    assert failover["previous_last_ms"] == ms(D1, 12, 0)
    assert failover["first_ms"] == ms(D1, 12, 0, 5)
    assert failover["gap_ms"] == pytest.approx(5000.0)
    assert failover["failover_ms"] == pytest.approx(2000.0)


def test_it_times_reassignments_per_partition_and_action(both_days: Path) -> None:
    rows = by(table(both_days, "reassignments"), "topic", "partition")
    orders1, payments0, orders0 = rows[("orders", 1)], rows[("payments", 0)], rows[("orders", 0)]
    assert (orders1["status"], orders1["started_ms"], orders1["ended_ms"]) == (
        "completed",
        ms(D1, 10, 0),
        ms(D1, 10, 5),
    )
    assert orders1["duration_ms"] == pytest.approx(300_000.0)
    assert (orders1["origin_replicas"], orders1["target_replicas"]) == ([3, 2], [3, 1])
    assert (payments0["status"], payments0["duration_ms"]) == ("cancelled", pytest.approx(600_000.0))
    assert (orders0["status"], orders0["ended_ms"], orders0["duration_ms"]) == ("in_progress", None, None)
    actions = table(both_days, "reassignment_actions")
    assert sorted((a["partitions"], a["completed"], a["cancelled"], a["in_progress"]) for a in actions) == [
        (1, 0, 0, 1),
        (1, 0, 1, 0),
        (1, 1, 0, 0),
    ]


def test_it_attributes_reassignments_to_the_operator_action_that_asked(both_days: Path) -> None:
    rows = by(table(both_days, "reassignments"), "topic", "partition")
    orders1, payments0, orders0 = rows[("orders", 1)], rows[("payments", 0)], rows[("orders", 0)]
    # #101, not #102 (its request was written 4 hours before the move) nor beta's #107.
    assert (orders1["audit_action_id"], orders1["requested_by"], orders1["requested_partitions"]) == (101, "ann", 1)
    assert orders1["requested_ms"] == pytest.approx(ms(D1, 9, 59, 58))
    assert orders1["start_delay_ms"] == pytest.approx(2_000.0)
    assert (payments0["audit_action_id"], payments0["requested_by"]) == (103, "bob")
    assert payments0["start_delay_ms"] == pytest.approx(500.0)
    # #104 was rejected: it never reached ZooKeeper, so the move is nobody's in the audit.
    assert (orders0["audit_action_id"], orders0["requested_by"], orders0["start_delay_ms"]) == (None, None, None)

    actions = by(table(both_days, "reassignment_actions"), "action_id")
    first = actions["audit:101"]
    assert (first["audit_action_id"], first["requested_by"], first["partitions"], first["completed"]) == (
        101,
        "ann",
        1,
        1,
    )
    assert (first["started_ms"], first["ended_ms"]) == (ms(D1, 10, 0), ms(D1, 10, 5))
    assert first["duration_ms"] == pytest.approx(300_000.0)
    assert first["start_delay_ms"] == pytest.approx(2_000.0)
    assert first["request_to_end_ms"] == pytest.approx(302_000.0)
    cancelled = actions["audit:103"]
    assert (cancelled["cancelled"], cancelled["request_to_end_ms"]) == (1, pytest.approx(600_500.0))
    unmatched = [a for a in actions.values() if a["audit_action_id"] is None]
    assert [(a["partitions"], a["in_progress"], a["requested_by"]) for a in unmatched] == [(1, 1, None)]
    assert not unmatched[0]["action_id"].startswith("audit:")


def test_it_counts_preferred_elections_per_operator_action(both_days: Path) -> None:
    actions = by(table(both_days, "election_actions"), "audit_action_id")
    assert set(actions) == {105, 106}
    asked = actions[105]
    assert (asked["requested_by"], asked["requested_partitions"], asked["elected"]) == ("ann", 2, 2)
    assert (asked["first_election_ms"], asked["last_election_ms"]) == (ms(D1, 4, 0, 0), ms(D1, 4, 0, 1))
    assert (asked["first_delay_ms"], asked["last_delay_ms"]) == (pytest.approx(1_000.0), pytest.approx(2_000.0))
    # A controlled-shutdown election of the same partition is not the preferred election asked for.
    none = actions[106]
    assert (none["requested_partitions"], none["elected"], none["first_delay_ms"], none["last_delay_ms"]) == (
        1,
        0,
        None,
        None,
    )


def test_it_ranks_flapping_partitions_per_day(both_days: Path) -> None:
    rows = {
        (r["day"], r["rank"]): (r["topic"], r["partition"], r["shrinks"], r["expands"], r["flaps"])
        for r in table(both_days, "isr_flapping")
    }
    assert rows == {
        (D1, 1): ("orders", 1, 4, 4, 4),
        (D1, 2): ("payments", 0, 3, 2, 2),  # the unclean election both shrank and expanded the ISR
        (D1, 3): ("orders", 0, 2, 1, 1),
        (D2, 1): ("orders", 0, 0, 1, 0),
        (D2, 2): ("orders", 1, 1, 0, 0),
    }


def _comparable(run_dir: Path, name: str, day: date) -> list[tuple[Any, ...]]:
    rows = table(run_dir, name)
    if name == "unavailability_intervals":
        rows = [r for r in rows if r["end_ms"] is None or r["end_ms"] > ms(day, 0, 0)]
    else:
        rows = [r for r in rows if r.get("day") == day]
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.items())) for r in rows)


def test_it_continues_from_a_checkpoint_or_replays_earlier_days(
    spark: SparkSession, history: Path, both_days: Path, chained: tuple[Path, JobResult, JobResult], tmp_path: Path
) -> None:
    _, first, second = chained
    [open_interval] = [r for r in table(Path(first.output), "unavailability_intervals") if r["end_ms"] is None]
    assert (open_interval["topic"], open_interval["start_ms"]) == ("orders", ms(D1, 23, 59))
    assert second.warm_up_days == {CLUSTER: 0}  # started from the day-1 checkpoint

    third = run(_config(history, tmp_path / "replayed", D2, D2), spark)
    assert third.warm_up_days == {CLUSTER: 1}  # no checkpoint: day 1 read again

    for result in (second, third):
        out = Path(result.output)
        for name in ("unavailability_intervals", "topic_daily", "broker_daily", "isr_flapping", "elections_daily"):
            assert _comparable(out, name, D2) == _comparable(both_days, name, D2), name
        counts = {(r["minute"], r["broker"]): r["leaders"] for r in table(out, "leader_counts")}
        full = {(r["minute"], r["broker"]): r["leaders"] for r in table(both_days, "leader_counts")}
        assert counts == {k: v for k, v in full.items() if k[0] in {m for m, _ in counts}}
        assert len(counts) == 3 * 1440
        assert sorted((r["topic"], r["status"]) for r in table(out, "reassignments")) == [
            ("orders", "in_progress"),
            ("payments", "cancelled"),
        ]


def test_the_session_caches_uncompressed_unless_the_submitter_chose(
    spark: SparkSession, spark_connect: SparkConnectServer
) -> None:
    # The default (see UNCOMPRESSED_CACHE_CONF): the job's one cache is filled faster uncompressed.
    assert spark.conf.get(UNCOMPRESSED_CACHE_CONF) == "false"
    chosen = build_spark(remote=spark_connect.remote, extra={UNCOMPRESSED_CACHE_CONF: "true"})
    try:
        assert chosen.conf.get(UNCOMPRESSED_CACHE_CONF) == "true"
        # Each caller gets its own session: one's settings (and stopping it) never touch another's.
        assert spark.conf.get(UNCOMPRESSED_CACHE_CONF) == "false"
    finally:
        chosen.stop()
    assert spark.range(3).count() == 3


def test_the_server_jvm_runs_with_its_java_options(spark_connect: SparkConnectServer) -> None:
    """``java_options`` reach the server's JVM itself (before its main class), not only spark-submit's
    arguments: with ``local[*]`` the driver is the server, so the option must be on that JVM."""
    pid = spark_connect.recorded_pid()
    assert pid is not None
    before_main = jvm_arguments(pid, "org.apache.spark.deploy.SparkSubmit")
    options = spark_connect.java_options.split()
    if not options:
        pytest.skip("this server was started with no JVM options (TEST_REUSE_SERVICES=1: the product's)")
    for option in options:
        assert option in before_main, (option, before_main)


def test_it_rejects_bad_input_clearly(tmp_path: Path, history: Path) -> None:
    with pytest.raises(JobInputError, match="does not exist"):
        discover(_config(tmp_path / "missing", tmp_path, D1, D1))
    with pytest.raises(JobInputError, match="is after"):
        discover(_config(history, tmp_path, D2, D1))
    with pytest.raises(JobInputError, match="no directory for cluster"):
        discover(_config(history, tmp_path, D1, D1, clusters=("beta",)))
    with pytest.raises(JobInputError, match="no state-change files"):
        discover(_config(history, tmp_path, date(2023, 1, 1), date(2023, 1, 2)))


def test_the_generator_is_deterministic_and_writes_the_loggers_record_shape(tmp_path: Path) -> None:
    spec = generate.HistorySpec(
        cluster="synthetic",
        topics=6,
        partitions_per_topic=4,
        brokers=4,
        days=2,
        target_records=3000,
        failovers=1,
        rolling_restart_every_days=2,
        reassignment_every_days=1,
        reassignment_topics=1,
    )
    a = generate.generate(spec, tmp_path / "a", processes=2)
    b = generate.generate(spec, tmp_path / "b", processes=1)
    assert a.records == b.records and abs(a.records - 3000) < 300
    assert generate.existing_summary(spec, tmp_path / "a") is not None
    made = MemorySink()
    StateChangeLogger(made, 1, lambda: 1).election(
        ORDERS_0, "offline", "OfflinePartition", "OnlinePartition", before=L(1, 0, 1), after=L(2, 1, 2)
    )
    (reference,) = made.records
    partition_kinds = {"partition_transition", "replica_transition", "election", "isr_change", "failed_change"}
    seq = 0
    for day in ("2024-01-01", "2024-01-02"):
        name = f"state-change-{day}.jsonl"
        text = (tmp_path / "a" / "synthetic" / name).read_bytes()
        assert text == (tmp_path / "b" / "synthetic" / name).read_bytes()
        for line in text.decode().splitlines():
            record = json.loads(line)
            if record["kind"] in partition_kinds:
                assert record.keys() == reference.keys(), record
            assert {"ts", "controller_id", "controller_epoch", "seq", "kind", "event_id", "cause"} <= record.keys()
            seq = record["seq"] if record["seq"] == 1 else seq + 1
            assert record["seq"] == seq  # per-epoch numbering without gaps, across files


# --- loading and pages ---------------------------------------------------------------------------------


def _counts() -> dict[str, int]:
    return {t.model.__name__: t.model._default_manager.filter(cluster=CLUSTER).count() for t in load.TABLES}


@pytest.mark.django_db
def test_the_pipeline_compacts_runs_and_loads_idempotently(
    spark: SparkSession, history: Path, both_days: Path, chained: tuple[Path, JobResult, JobResult], tmp_path: Path
) -> None:
    # The nightly chain, day by day into an empty database.
    chained_output = chained[0]
    load.load_run(chained_output, D1, D1)
    load.load_run(chained_output, D2, D2)
    first = _counts()
    assert first["UnavailabilityInterval"] == 5 and first["LeaderCount"] == 3 * 2880
    assert first["TopicAvailability"] == 4 and first["ControllerFailover"] == 1 and first["Reassignment"] == 3
    midnight = M.UnavailabilityInterval.objects.get(cluster=CLUSTER, topic="orders", started_at__hour=23)
    assert midnight.duration_s == pytest.approx(120.0)  # one interval across midnight, closed by day 2

    # The whole pipeline as a task runs it: compact both (closed) days, compute from Parquet, load.
    input_dir = tmp_path / "log"
    shutil.copytree(history, input_dir)
    store_actions()  # exported by the pipeline below, then matched exactly as the hand-written export
    pipeline = pipeline_settings(tmp_path, input_dir, compact=True)
    run_row = runner.create_run(D1, D2, trigger=M.AnalyticsRun.Trigger.COMMAND)
    runner.execute(run_row, pipeline, spark=spark)
    run_row.refresh_from_db()
    assert run_row.status == M.AnalyticsRun.Status.SUCCEEDED, run_row.error
    assert run_row.progress == 1.0 and run_row.duration_s and run_row.finished_at and run_row.records
    assert (tmp_path / "compacted" / f"cluster={CLUSTER}" / "date=2024-03-01" / "_SUCCESS").is_file()
    from_parquet = load.run_directory(pipeline.output_dir, D1, D2)
    # Every table: the compacted days (sorted by kind) give what the JSON gives.
    for name in (
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
    ):
        assert sorted(map(repr, table(from_parquet, name))) == sorted(map(repr, table(both_days, name))), name
    assert _counts() == first  # the same days again: replaced, not duplicated
    exported = sorted((tmp_path / "audit" / CLUSTER).iterdir())
    assert [p.name for p in exported] == ["actions-2024-03-01.jsonl", "actions-2024-03-02.jsonl"]
    assert M.Reassignment.objects.get(cluster=CLUSTER, topic="orders", partition=1).action_id == "audit:101"

    interval = M.UnavailabilityInterval.objects.get(cluster=CLUSTER, topic="payments", started_at__hour=2)
    assert interval.duration_s == pytest.approx(1800.5) and interval.cause_broker == 3
    assert interval.ended_at == datetime(2024, 3, 1, 2, 30, 0, 500000, tzinfo=UTC)
    # Both starts are kept: detected (the key) and estimated (broker 3's lost session), and the outage.
    unclean = M.UnavailabilityInterval.objects.get(cluster=CLUSTER, topic="payments", started_at__hour=23)
    assert unclean.estimated_started_at == datetime(2024, 3, 1, 22, 59, 42, tzinfo=UTC)
    assert unclean.duration_s == pytest.approx(2.0) and unclean.outage_s == pytest.approx(20.0)
    assert interval.estimated_started_at is None and interval.outage_s == pytest.approx(1800.5)
    orders = M.TopicAvailability.objects.get(cluster=CLUSTER, topic="orders", day=D1)
    assert orders.availability == pytest.approx(1 - 61.5 / (3 * DAY_S)) and orders.mttr_s == pytest.approx(0.75)

    load.load_run(pipeline.output_dir, D1, D2)
    assert _counts() == first
    # Reloading the old day alone must not forget that the outage ended the next day.
    load.load_run(chained_output, D1, D1)
    midnight = M.UnavailabilityInterval.objects.get(cluster=CLUSTER, topic="orders", started_at__hour=23)
    assert midnight.ended_at is not None and _counts() == first


@pytest.fixture
def loaded(both_days: Path, db: None) -> None:
    load.load_run(both_days.parent.parent, D1, D2)


@pytest.fixture
def viewer(django_user_model: type[User]) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_user("bob", password="x"))
    return client


@pytest.fixture
def admin(django_user_model: type[User]) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_superuser("alice", password="x"))
    return client


QUERY = {"cluster": CLUSTER, "since": "2024-03-01", "until": "2024-03-02"}


def test_the_pages_show_the_loaded_results(loaded: None, viewer: Client) -> None:
    overview = viewer.get("/analytics/", QUERY)
    assert overview.status_code == 200
    assert b"Run now" not in overview.content  # viewers do not get the button
    for slug, expected in {
        "availability": b"payments",
        "mttr": b"10 min 7 s",  # broker 3 on day 1: (1.0 + 1800.5 + 20.0) / 3 s (from the lost session)
        "outages": b"30 min 0 s",
        "elections": b"controlled_shutdown",
        "unclean": b"2024-03-01 23:00:02 UTC",
        "leaders": b"Broker",
        "skew": b"Skew",
        "failovers": b"5.0 s",
        "reassignments": b"cancelled",
        "flapping": b"orders",
    }.items():
        response = viewer.get(f"/analytics/{slug}/", QUERY)
        assert response.status_code == 200, slug
        assert expected in response.content, slug
        assert b'id="chart-config"' in response.content and b"chart.umd.min.js" in response.content
    # A move matched to an operator action links to its audit record.
    assert b'href="/actions/101/">action #101</a>' in viewer.get("/analytics/reassignments/", QUERY).content
    csv_response = viewer.get("/analytics/outages.csv", QUERY)
    body = b"".join(csv_response.streaming_content).decode()  # type: ignore[attr-defined]
    lines = body.strip().splitlines()
    assert lines[0].startswith("Topic,Partition,Detected,Estimated start,Ended,Outage") and len(lines) == 1 + 5
    assert viewer.get("/analytics/leaders/", {**QUERY, "page": "2"}).status_code == 200
    assert viewer.get("/analytics/nope/").status_code == 404
    bad = viewer.get("/analytics/availability/", {"since": "2024-13-01"})
    assert bad.status_code == 200 and b"Enter a valid date" in bad.content


@pytest.mark.django_db
def test_only_admins_can_start_a_run_and_see_its_progress(
    viewer: Client, admin: Client, monkeypatch: pytest.MonkeyPatch, django_user_model: type[User]
) -> None:
    sent: list[tuple[str, dict[str, Any]]] = []

    class Sent:
        id = "task-1"

    def send_task(name: str, kwargs: dict[str, Any]) -> Sent:
        sent.append((name, kwargs))
        return Sent()

    from dashboard.celery import app

    monkeypatch.setattr(app, "send_task", send_task)
    form = {"since": "2024-03-01", "until": "2024-03-02", "cluster": ""}
    assert viewer.post("/analytics/run/", form).status_code == 403
    assert admin.post("/analytics/run/", form).status_code == 403  # no CSRF token

    page = admin.get("/analytics/")
    assert b"Run now" in page.content
    token = page.cookies["csrftoken"].value
    response = admin.post("/analytics/run/", {**form, "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    run_row = M.AnalyticsRun.objects.get()
    assert sent == [("workers.analytics.run", {"run_id": run_row.pk})] and run_row.task_id == "task-1"
    status = admin.get(f"/analytics/runs/{run_row.pk}/status.json").json()
    assert (status["status"], status["active"], status["progress"]) == ("queued", True, 0.0)
    assert b"data-status-url" in admin.get("/analytics/").content  # the page polls while it runs

    admin.post("/analytics/run/", {**form, "csrfmiddlewaretoken": token})
    assert M.AnalyticsRun.objects.count() == 1 and len(sent) == 1  # one run at a time

    operator = django_user_model.objects.create_user("carol", password="x")
    operator.user_permissions.add(Permission.objects.get(codename="run_analytics"))
    client = Client()
    client.force_login(operator)
    M.AnalyticsRun.objects.update(status=M.AnalyticsRun.Status.SUCCEEDED, duration_s=12.5)
    assert client.post("/analytics/run/", form).status_code == 302
    assert len(sent) == 2
    assert b"in 12 s" in client.get("/analytics/").content  # the last run's duration
