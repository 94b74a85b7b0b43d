"""The analytics pipeline against a small history whose answers were worked out by hand.

The history is written with the controller's own ``StateChangeLogger`` and daily JSON-lines sink,
so the job is tested against the record shape the controller really writes. Two days, cluster
``alpha``, brokers 1-3, partitions orders-0/1/2 and payments-0 (orders-2 appears only in the
failover snapshot). What happens, and what the job must find (times UTC):

Day 1 (2024-03-01)
  00:00      orders-0 led by 1, orders-1 by 3, payments-0 by 3 (New -> Online)
  01:00      broker 1 dies: orders-0 offline 01:00:00.100, re-elected (2) 01:00:00.600 -> 0.5 s outage
  02:00      broker 3 dies: payments-0 offline 02:00:00.000 (no live ISR, stays leaderless);
             orders-1 offline 02:00:00.050, re-elected (2) 02:00:01.050 -> 1.0 s outage
  02:30      broker 3 back: payments-0 elected 02:30:00.500 -> 1800.5 s outage
  04:00      preferred elections: orders-0 -> 1, orders-1 -> 3
  05:00      orders-1's ISR flaps (out and back twice, out once more)
  10:00      orders-1 reassigned [3,2] -> [3,1], completed 10:05 (300 s)
  12:00      controller 1 resigns (last record 12:00:00); controller 2, epoch 2, first record 12:00:05
             (elected 12:00:03, failover done 12:00:05) -> 5 s with nobody acting, 2 s failover
  23:00      broker 3 dies: payments-0 unclean election to 1 at 23:00:02 -> 2 s outage
  23:59      broker 1 dies with orders-0's ISR = {1}: leaderless from 23:59:00 ...
  (operator actions, from the audit export: #105 asked at 03:59:59 for preferred elections of
   orders-0 and orders-1 -> both elected, 1 s and 2 s later; #102 asked at 06:00:00 to move
   orders-1 (finished 06:00:01, so a move starting 4 hours later is not its own); #101, by ann,
   asked at 09:59:58 to move orders-1 -> its move, started 2 s later, 302 s from request to end)
Day 2 (2024-03-02)
  00:01      ... until broker 1 is back and leads again -> 120 s outage across midnight
  06:00      payments-0 reassignment started, cancelled 06:10 (600 s)
             (#103, by bob, asked at 05:59:59.500 -> 0.5 s to start)
  07:00      (#106 asks for orders-1's preferred election: nothing follows -> 0 elected)
  08:00      controlled shutdown of broker 3: orders-1 -> 1
  09:00      orders-0 reassignment started, still running at the end
             (#104 asked for it at 08:59:59 but was rejected -> not its action; the move keeps
             the controller's request id)
  (#107 moved orders-1 on cluster "beta": another cluster's action never matches)
"""

from __future__ import annotations

import dataclasses
import json
import random
import shutil
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client
from pyspark.sql import SparkSession

from controller_core.model import LeaderAndIsr, TopicPartition
from controller_core.state_change_log import JsonLinesDailySink, MemorySink, StateChangeLogger
from dashboard.analytics import models as M
from scripts.devservices import SparkConnectServer
from scripts.support import generate
from workers.analytics import load, runner
from workers.analytics.job import (
    UNCOMPRESSED_CACHE_CONF,
    JobConfig,
    JobInputError,
    JobResult,
    build_spark,
    discover,
    run,
)

# 600 s, not the suite's 300: a test's setup may include starting the shared Spark server (up to 180 s
# on a loaded machine) and the job runs its module shares.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

SharedDir = Callable[[str, Callable[[Path], None]], Path]  # the shared_dir fixture (conftest.py)

CLUSTER = "alpha"
D1, D2 = date(2024, 3, 1), date(2024, 3, 2)
AFTER_BOTH_DAYS_MS = int(datetime(2024, 3, 5, tzinfo=UTC).timestamp() * 1000)
DAY_S = 86_400.0

ORDERS_0, ORDERS_1, ORDERS_2, PAYMENTS_0 = (
    TopicPartition("orders", 0),
    TopicPartition("orders", 1),
    TopicPartition("orders", 2),
    TopicPartition("payments", 0),
)


def at(day: date, hh: int, mm: int, ss: float = 0.0) -> float:
    """Epoch seconds of a UTC wall-clock time."""
    return datetime(day.year, day.month, day.day, hh, mm, tzinfo=UTC).timestamp() + ss


def ms(day: date, hh: int, mm: int, ss: float = 0.0) -> float:
    return at(day, hh, mm, ss) * 1000.0


def L(leader: int, epoch: int, *isr: int) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, tuple(isr))


class History:
    """Write records through the controller's logger at chosen wall-clock times."""

    def __init__(self, base: Path) -> None:
        self.sink = JsonLinesDailySink(base / CLUSTER)
        self.now = 0.0
        self.epoch = 1
        self.log = StateChangeLogger(self.sink, 1, lambda: self.epoch, clock=lambda: self.now)

    def t(self, when: float) -> History:
        self.now = when
        return self

    def new_controller(self, controller_id: int) -> None:
        self.sink.flush()
        self.epoch += 1
        self.log = StateChangeLogger(self.sink, controller_id, lambda: self.epoch, clock=lambda: self.now)

    def close(self) -> None:
        self.sink.close()


def write_history(base: Path) -> None:
    h = History(base)
    on = "OnlinePartition"
    off = "OfflinePartition"

    with h.log.caused_by("TopicChange"):
        h.t(at(D1, 0, 0, 0.000)).log.partition_transition(ORDERS_0, "NewPartition", on, L(1, 0, 1, 2))
        h.t(at(D1, 0, 0, 0.010)).log.partition_transition(ORDERS_1, "NewPartition", on, L(3, 0, 3, 2))
        h.t(at(D1, 0, 0, 0.020)).log.partition_transition(PAYMENTS_0, "NewPartition", on, L(3, 0, 3, 1))

    with h.log.caused_by("BrokerChange"):  # broker 1 dies
        h.t(at(D1, 1, 0, 0.0)).log.record("broker_change", new_brokers=[], dead_brokers=[1], bounced_brokers=[])
        h.t(at(D1, 1, 0, 0.1)).log.partition_transition(ORDERS_0, on, off)
        h.t(at(D1, 1, 0, 0.6)).log.election(ORDERS_0, "offline", off, on, before=L(1, 0, 1, 2), after=L(2, 1, 2))
        h.t(at(D1, 1, 0, 0.7)).log.isr_change(PAYMENTS_0, L(3, 0, 3, 1), L(3, 0, 3), replica=1)

    with h.log.caused_by("BrokerChange"):  # broker 3 dies
        h.t(at(D1, 2, 0, 0.0)).log.record("broker_change", new_brokers=[], dead_brokers=[3], bounced_brokers=[])
        h.t(at(D1, 2, 0, 0.0)).log.partition_transition(PAYMENTS_0, on, off)
        h.t(at(D1, 2, 0, 0.05)).log.partition_transition(ORDERS_1, on, off)
        h.t(at(D1, 2, 0, 0.1)).log.failed_partition_change(PAYMENTS_0, off, on, "NoLiveIsr", "offline")
        h.t(at(D1, 2, 0, 0.2)).log.isr_change(PAYMENTS_0, L(3, 0, 3), L(-1, 1, 3), replica=3)
        h.t(at(D1, 2, 0, 1.05)).log.election(ORDERS_1, "offline", off, on, before=L(3, 0, 3, 2), after=L(2, 1, 2))
    with h.log.caused_by("BrokerChange"):  # broker 3 back
        h.t(at(D1, 2, 30, 0.0)).log.record("broker_change", new_brokers=[3], dead_brokers=[], bounced_brokers=[])
        h.t(at(D1, 2, 30, 0.5)).log.election(PAYMENTS_0, "offline", off, on, before=L(-1, 1, 3), after=L(3, 2, 3))
    with h.log.caused_by("BrokerChange"):  # broker 1 back
        h.t(at(D1, 2, 40)).log.record("broker_change", new_brokers=[1], dead_brokers=[], bounced_brokers=[])
    with h.log.caused_by("AlterIsrReceived"):
        h.t(at(D1, 3, 0, 0)).log.isr_change(ORDERS_1, L(2, 1, 2), L(2, 1, 2, 3))
        h.t(at(D1, 3, 0, 1)).log.isr_change(PAYMENTS_0, L(3, 2, 3), L(3, 2, 3, 1))
        h.t(at(D1, 3, 0, 2)).log.isr_change(ORDERS_0, L(2, 1, 2), L(2, 1, 2, 1))
    with h.log.caused_by("AutoPreferredReplicaLeaderElection"):
        h.t(at(D1, 4, 0, 0)).log.election(ORDERS_0, "preferred", on, on, before=L(2, 1, 2, 1), after=L(1, 2, 2, 1))
        h.t(at(D1, 4, 0, 1)).log.election(ORDERS_1, "preferred", on, on, before=L(2, 1, 2, 3), after=L(3, 2, 2, 3))
    with h.log.caused_by("AlterIsrReceived"):  # orders-1 flaps
        h.t(at(D1, 5, 0, 0)).log.isr_change(ORDERS_1, L(3, 2, 2, 3), L(3, 2, 3))
        h.t(at(D1, 5, 0, 30)).log.isr_change(ORDERS_1, L(3, 2, 3), L(3, 2, 3, 2))
        h.t(at(D1, 5, 10, 0)).log.isr_change(ORDERS_1, L(3, 2, 3, 2), L(3, 2, 3))
        h.t(at(D1, 5, 10, 30)).log.isr_change(ORDERS_1, L(3, 2, 3), L(3, 2, 3, 2))
        h.t(at(D1, 5, 20, 0)).log.isr_change(ORDERS_1, L(3, 2, 3, 2), L(3, 2, 3))

    reassignment = {
        "entity": "orders-1",
        "topic": "orders",
        "partition": 1,
        "origin_replicas": [3, 2],
        "target_replicas": [3, 1],
    }
    with h.log.caused_by("ZkPartitionReassignment"):
        h.t(at(D1, 10, 0)).log.record("reassignment", phase="started", **reassignment)
    with h.log.caused_by("AlterIsrReceived"):
        h.t(at(D1, 10, 0, 30)).log.isr_change(ORDERS_1, L(3, 2, 3), L(3, 2, 3, 1))
    with h.log.caused_by("PartitionReassignmentIsrChange"):
        h.t(at(D1, 10, 5)).log.record("reassignment", phase="completed", **reassignment)

    with h.log.caused_by("Expire"):
        h.t(at(D1, 12, 0)).log.record("resignation", controller_epoch_resigned=1)
    h.new_controller(2)
    with h.log.caused_by("Reelect"):
        h.t(at(D1, 12, 0, 5)).log.record(
            "failover", elected_at_ms=ms(D1, 12, 0, 3), completed_at_ms=ms(D1, 12, 0, 5), duration_ms=2000.0
        )
        h.t(at(D1, 12, 0, 5.5)).log.record(
            "state_snapshot",
            partition_states={"OnlinePartition": ["orders-0", "orders-1", "orders-2", "payments-0"]},
            replica_states={"OnlineReplica": ["orders-0@1", "orders-0@2"]},
        )

    with h.log.caused_by("AlterIsrReceived"):
        h.t(at(D1, 22, 0)).log.isr_change(PAYMENTS_0, L(3, 2, 3, 1), L(3, 2, 3))
    with h.log.caused_by("BrokerChange"):  # broker 3 dies again (its session was lost 18 s earlier): unclean election
        h.t(at(D1, 23, 0, 0)).log.record(
            "broker_change",
            new_brokers=[],
            dead_brokers=[3],
            bounced_brokers=[],
            session_lost_brokers=[3],
            session_lost_ms=ms(D1, 22, 59, 42),
            session_lost_estimated=True,
        )
        h.t(at(D1, 23, 0, 0)).log.partition_transition(PAYMENTS_0, on, off)
        h.t(at(D1, 23, 0, 2)).log.election(
            PAYMENTS_0, "offline", off, on, before=L(3, 2, 3), after=L(1, 3, 1), unclean=True
        )
    with h.log.caused_by("AlterIsrReceived"):
        h.t(at(D1, 23, 58)).log.isr_change(ORDERS_0, L(1, 2, 2, 1), L(1, 2, 1))
    with h.log.caused_by("BrokerChange"):  # broker 1 dies, orders-0 has nobody else in sync
        h.t(at(D1, 23, 59, 0)).log.partition_transition(ORDERS_0, on, off)
        h.t(at(D1, 23, 59, 0.05)).log.failed_partition_change(ORDERS_0, off, on, "NoLiveIsr", "offline")
        h.t(at(D1, 23, 59, 0.1)).log.isr_change(ORDERS_0, L(1, 2, 1), L(-1, 3, 1), replica=1)
    with h.log.caused_by("BrokerChange"):
        h.t(at(D2, 0, 1)).log.election(ORDERS_0, "offline", off, on, before=L(-1, 3, 1), after=L(1, 4, 1))
    with h.log.caused_by("AlterIsrReceived"):
        h.t(at(D2, 0, 2)).log.isr_change(ORDERS_0, L(1, 4, 1), L(1, 4, 1, 2))

    cancelled = {
        "entity": "payments-0",
        "topic": "payments",
        "partition": 0,
        "origin_replicas": [3, 1],
        "target_replicas": [1, 2],
    }
    with h.log.caused_by("ZkPartitionReassignment"):
        h.t(at(D2, 6, 0)).log.record("reassignment", phase="started", **cancelled)
    with h.log.caused_by("ZkPartitionReassignment"):
        h.t(at(D2, 6, 10)).log.record("reassignment", phase="cancelled", **cancelled)
    with h.log.caused_by("ControlledShutdown"):
        h.t(at(D2, 8, 0)).log.election(ORDERS_1, "controlled_shutdown", on, on, before=L(3, 2, 3, 1), after=L(1, 3, 1))
    with h.log.caused_by("ZkPartitionReassignment"):
        h.t(at(D2, 9, 0)).log.record(
            "reassignment",
            phase="started",
            entity="orders-0",
            topic="orders",
            partition=0,
            origin_replicas=[1, 2],
            target_replicas=[1, 3],
        )
        # A kind the job does not know, and a torn line, must not break the run.
        h.t(at(D2, 9, 1)).log.record("future_kind", topic="orders", partition=0, something={"x": 1})
    h.close()
    with (base / CLUSTER / "state-change-2024-03-02.jsonl").open("a") as f:
        f.write('{"ts":17093')


def _action(
    pk: int,
    kind: str,
    created: float,
    partitions: list[tuple[str, int]],
    *,
    status: str = "succeeded",
    user: str = "ann",
    finished: float | None = None,
    cluster: str = CLUSTER,
) -> dict[str, Any]:
    """One line of ``manage.py export_audit``'s output (``audit_export.action_line``)."""
    return {
        "id": pk,
        "cluster": cluster,
        "kind": kind,
        "status": status,
        "username": user,
        "created_ms": created * 1000.0,
        "started_ms": created * 1000.0,
        "finished_ms": None if finished is None else finished * 1000.0,
        "duration_ms": None,
        "controller_epoch": 1,
        "reason": "test",
        "partitions": [{"topic": t, "partition": p, "replicas": None} for t, p in partitions],
        "parameters": "{}",
    }


def audit_actions() -> list[dict[str, Any]]:
    """The operator actions of the history above (see the module docstring), as exported lines."""
    return [
        _action(105, "preferred_election", at(D1, 3, 59, 59), [("orders", 0), ("orders", 1)]),
        _action(102, "reassignment", at(D1, 6, 0), [("orders", 1)], finished=at(D1, 6, 0, 1), user="carl"),
        _action(101, "reassignment", at(D1, 9, 59, 58), [("orders", 1)], finished=at(D1, 9, 59, 59)),
        _action(103, "reassignment", at(D2, 5, 59, 59.5), [("payments", 0)], finished=at(D2, 5, 59, 59.8), user="bob"),
        _action(106, "preferred_election", at(D2, 7, 0), [("orders", 1)]),
        _action(104, "reassignment", at(D2, 8, 59, 59), [("orders", 0)], status="rejected"),
        _action(107, "reassignment", at(D1, 9, 59, 59), [("orders", 1)], cluster="beta"),
    ]


def write_actions(base: Path) -> None:
    """Write :func:`audit_actions` as ``manage.py export_audit`` would (one file per cluster and day)."""
    for line in audit_actions():
        day = datetime.fromtimestamp(line["created_ms"] / 1000.0, UTC).date()
        path = base / line["cluster"] / f"actions-{day.isoformat()}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as fh:
            fh.write(json.dumps(line) + "\n")


def store_actions() -> None:
    """Put :func:`audit_actions` in the audit table, as the dashboard would have recorded them."""
    from dashboard.audit.models import Action

    for line in audit_actions():
        partitions = [
            {"topic": p["topic"], "partition": p["partition"], "replicas": [1, 2]} for p in line["partitions"]
        ]
        electing = line["kind"] == "preferred_election"
        Action.objects.create(
            id=line["id"],
            username=line["username"],
            cluster=line["cluster"],
            kind=line["kind"],
            status=line["status"],
            parameters={"scope": "topic", "topic": "orders"} if electing else {"partitions": partitions},
            preview={"electable": partitions, "blocked": []} if electing else {},
        )
        Action.objects.filter(pk=line["id"]).update(
            created=datetime.fromtimestamp(line["created_ms"] / 1000.0, UTC),
            finished=None if line["finished_ms"] is None else datetime.fromtimestamp(line["finished_ms"] / 1000.0, UTC),
        )


# --- fixtures ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def history(shared_dir: SharedDir) -> Path:
    return shared_dir("state-change-log", write_history)


@pytest.fixture(scope="module")
def audit(shared_dir: SharedDir) -> Path:
    return shared_dir("audit", write_actions)


def _config(history: Path, output: Path, since: date, until: date, **kw: Any) -> JobConfig:
    return JobConfig(input_dir=history, output_dir=output, since=since, until=until, now_ms=AFTER_BOTH_DAYS_MS, **kw)


@pytest.fixture(scope="module")
def both_days(spark: SparkSession, history: Path, audit: Path, shared_dir: SharedDir) -> Path:
    """One run over both days, with the audit export (once per session); returns its run directory."""

    def build(output: Path) -> None:
        result = run(_config(history, output, D1, D2, actions_dir=audit), spark)
        assert result.records > 40 and result.checkpoint

    return _config(history, shared_dir("both-days", build), D1, D2).run_dir


@pytest.fixture(scope="module")
def chained(spark: SparkSession, history: Path, shared_dir: SharedDir) -> tuple[Path, JobResult, JobResult]:
    """Day 1, then day 2 from day 1's checkpoint (the nightly chain, once per session)."""

    def build(output: Path) -> None:
        results = [run(_config(history, output, day, day), spark).as_dict() for day in (D1, D2)]
        (output / "results.json").write_text(json.dumps(results))

    output = shared_dir("chained", build)
    first, second = (JobResult(**r) for r in json.loads((output / "results.json").read_text()))
    return output, first, second


def table(spark: SparkSession, run_dir: Path, name: str) -> list[dict[str, Any]]:
    path = run_dir / name / f"cluster={CLUSTER}"
    if not path.is_dir():
        return []
    return [row.asDict(recursive=True) for row in spark.read.parquet(str(path)).collect()]


def by(rows: list[dict[str, Any]], *keys: str) -> dict[Any, dict[str, Any]]:
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


# --- the job's answers -----------------------------------------------------------------------------------


def test_it_finds_every_unavailability_interval(spark: SparkSession, both_days: Path) -> None:
    rows = sorted(table(spark, both_days, "unavailability_intervals"), key=lambda r: r["start_ms"])
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


def test_it_computes_availability_and_mttr_per_topic_and_day(spark: SparkSession, both_days: Path) -> None:
    rows = by(table(spark, both_days, "topic_daily"), "topic", "day")
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


def test_it_attributes_outages_to_the_broker_lost_and_the_partition(spark: SparkSession, both_days: Path) -> None:
    brokers = by(table(spark, both_days, "broker_daily"), "broker", "day")
    assert set(brokers) == {(1, D1), (3, D1), (1, D2)}
    b1, b3, b1_d2 = brokers[(1, D1)], brokers[(3, D1)], brokers[(1, D2)]
    assert (b1["outages"], b1["recoveries"], b1["mttr_ms"]) == (2, 1, pytest.approx(500.0))
    assert b1["leaderless_ms"] == pytest.approx(60_500.0)
    assert (b3["outages"], b3["recoveries"]) == (3, 3)
    assert b3["mttr_ms"] == pytest.approx((1000.0 + 1_800_500.0 + 20_000.0) / 3)
    assert (b1_d2["outages"], b1_d2["recoveries"], b1_d2["leaderless_ms"]) == (0, 1, pytest.approx(60_000.0))
    parts = by(table(spark, both_days, "partition_daily"), "topic", "partition", "day")
    assert parts[("payments", 0, D1)]["outages"] == 2
    assert parts[("orders", 0, D1)]["leaderless_ms"] == pytest.approx(60_500.0)
    assert parts[("orders", 0, D2)]["mttr_ms"] == pytest.approx(120_000.0)


def test_it_counts_elections_by_strategy_and_cause_and_lists_unclean_ones(spark: SparkSession, both_days: Path) -> None:
    rows = {
        (r["day"], r["strategy"], r["cause"]): (r["elections"], r["unclean"])
        for r in table(spark, both_days, "elections_daily")
    }
    assert rows == {
        (D1, "offline", "BrokerChange"): (4, 1),
        (D1, "preferred", "AutoPreferredReplicaLeaderElection"): (2, 0),
        (D2, "offline", "BrokerChange"): (1, 0),
        (D2, "controlled_shutdown", "ControlledShutdown"): (1, 0),
    }
    [unclean] = table(spark, both_days, "unclean_elections")
    assert (unclean["topic"], unclean["partition"], unclean["ts"]) == ("payments", 0, ms(D1, 23, 0, 2))
    assert (unclean["leader_before"], unclean["leader_after"], unclean["isr_before"], unclean["isr_after"]) == (
        3,
        1,
        [3],
        [1],
    )
    assert (unclean["epoch"], unclean["strategy"]) == (2, "offline")


def test_it_carries_leaders_forward_minute_by_minute(spark: SparkSession, both_days: Path) -> None:
    rows = table(spark, both_days, "leader_counts")
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
    skew = {r["minute"].timestamp(): r for r in table(spark, both_days, "leader_skew")}
    assert skew[at(D1, 0, 0)]["skew"] == pytest.approx(2.0)
    assert skew[at(D2, 8, 0)]["skew"] == pytest.approx(3.0)
    assert (skew[at(D2, 8, 0)]["max_leaders"], skew[at(D2, 8, 0)]["min_leaders"]) == (3, 0)


def test_it_measures_the_controller_failover(spark: SparkSession, both_days: Path) -> None:
    [failover] = table(spark, both_days, "failovers")
    assert (failover["controller_epoch"], failover["controller_id"]) == (2, 2)
    assert (failover["previous_epoch"], failover["previous_controller_id"]) == (1, 1)
    assert failover["previous_last_ms"] == ms(D1, 12, 0)
    assert failover["first_ms"] == ms(D1, 12, 0, 5)
    assert failover["gap_ms"] == pytest.approx(5000.0)
    assert failover["failover_ms"] == pytest.approx(2000.0)


def test_it_times_reassignments_per_partition_and_action(spark: SparkSession, both_days: Path) -> None:
    rows = by(table(spark, both_days, "reassignments"), "topic", "partition")
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
    actions = table(spark, both_days, "reassignment_actions")
    assert sorted((a["partitions"], a["completed"], a["cancelled"], a["in_progress"]) for a in actions) == [
        (1, 0, 0, 1),
        (1, 0, 1, 0),
        (1, 1, 0, 0),
    ]


def test_it_attributes_reassignments_to_the_operator_action_that_asked(spark: SparkSession, both_days: Path) -> None:
    rows = by(table(spark, both_days, "reassignments"), "topic", "partition")
    orders1, payments0, orders0 = rows[("orders", 1)], rows[("payments", 0)], rows[("orders", 0)]
    # #101, not #102 (its request was written 4 hours before the move) nor beta's #107.
    assert (orders1["audit_action_id"], orders1["requested_by"], orders1["requested_partitions"]) == (101, "ann", 1)
    assert orders1["requested_ms"] == pytest.approx(ms(D1, 9, 59, 58))
    assert orders1["start_delay_ms"] == pytest.approx(2_000.0)
    assert (payments0["audit_action_id"], payments0["requested_by"]) == (103, "bob")
    assert payments0["start_delay_ms"] == pytest.approx(500.0)
    # #104 was rejected: it never reached ZooKeeper, so the move is nobody's in the audit.
    assert (orders0["audit_action_id"], orders0["requested_by"], orders0["start_delay_ms"]) == (None, None, None)

    actions = by(table(spark, both_days, "reassignment_actions"), "action_id")
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


def test_it_counts_preferred_elections_per_operator_action(spark: SparkSession, both_days: Path) -> None:
    actions = by(table(spark, both_days, "election_actions"), "audit_action_id")
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


def test_it_ranks_flapping_partitions_per_day(spark: SparkSession, both_days: Path) -> None:
    rows = {
        (r["day"], r["rank"]): (r["topic"], r["partition"], r["shrinks"], r["expands"], r["flaps"])
        for r in table(spark, both_days, "isr_flapping")
    }
    assert rows == {
        (D1, 1): ("orders", 1, 4, 4, 4),
        (D1, 2): ("payments", 0, 3, 2, 2),  # the unclean election both shrank and expanded the ISR
        (D1, 3): ("orders", 0, 2, 1, 1),
        (D2, 1): ("orders", 0, 0, 1, 0),
        (D2, 2): ("orders", 1, 1, 0, 0),
    }


def _comparable(spark: SparkSession, run_dir: Path, name: str, day: date) -> list[tuple[Any, ...]]:
    rows = table(spark, run_dir, name)
    if name == "unavailability_intervals":
        rows = [r for r in rows if r["end_ms"] is None or r["end_ms"] > ms(day, 0, 0)]
    else:
        rows = [r for r in rows if r.get("day") == day]
    return sorted(tuple(sorted((k, repr(v)) for k, v in r.items())) for r in rows)


def test_it_continues_from_a_checkpoint_or_replays_earlier_days(
    spark: SparkSession, history: Path, both_days: Path, chained: tuple[Path, JobResult, JobResult], tmp_path: Path
) -> None:
    _, first, second = chained
    [open_interval] = [r for r in table(spark, Path(first.output), "unavailability_intervals") if r["end_ms"] is None]
    assert (open_interval["topic"], open_interval["start_ms"]) == ("orders", ms(D1, 23, 59))
    assert second.warm_up_days == {CLUSTER: 0}  # started from the day-1 checkpoint

    third = run(_config(history, tmp_path / "replayed", D2, D2), spark)
    assert third.warm_up_days == {CLUSTER: 1}  # no checkpoint: day 1 read again

    for result in (second, third):
        out = Path(result.output)
        for name in ("unavailability_intervals", "topic_daily", "broker_daily", "isr_flapping", "elections_daily"):
            assert _comparable(spark, out, name, D2) == _comparable(spark, both_days, name, D2), name
        counts = {(r["minute"], r["broker"]): r["leaders"] for r in table(spark, out, "leader_counts")}
        full = {(r["minute"], r["broker"]): r["leaders"] for r in table(spark, both_days, "leader_counts")}
        assert counts == {k: v for k, v in full.items() if k[0] in {m for m, _ in counts}}
        assert len(counts) == 3 * 1440
        assert sorted((r["topic"], r["status"]) for r in table(spark, out, "reassignments")) == [
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
    pipeline = runner.PipelineSettings(
        input_dir=input_dir,
        output_dir=tmp_path / "results",
        compacted_dir=tmp_path / "compacted",
        audit_dir=tmp_path / "audit",
        remote="",
        master="local[2]",
        driver_memory="1g",
        compact=True,
        flapping_top=100,
        stale_run_s=3600,
    )
    run_row = runner.create_run(D1, D2, trigger=M.AnalyticsRun.Trigger.COMMAND)
    runner.execute(run_row, pipeline, spark=spark)
    run_row.refresh_from_db()
    assert run_row.status == M.AnalyticsRun.Status.SUCCEEDED, run_row.error
    assert run_row.progress == 1.0 and run_row.duration_s and run_row.finished_at and run_row.records
    assert (tmp_path / "compacted" / f"cluster={CLUSTER}" / "date=2024-03-01" / "_SUCCESS").is_file()
    from_parquet = load.run_directory(pipeline.output_dir, D1, D2)
    for name in (
        "unavailability_intervals",
        "topic_daily",
        "leader_counts",
        "failovers",
        "reassignments",
        "reassignment_actions",
        "election_actions",
        "isr_flapping",
    ):
        assert sorted(map(repr, table(spark, from_parquet, name))) == sorted(
            map(repr, table(spark, both_days, name))
        ), name
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
def loaded(spark: SparkSession, both_days: Path, db: None) -> None:
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
    pipeline = runner.PipelineSettings(
        input_dir=tmp_path / "log",
        output_dir=tmp_path / "results",
        compacted_dir=tmp_path / "compacted",
        audit_dir=tmp_path / "audit",
        remote="",
        master="local[2]",
        driver_memory="1g",
        compact=False,
        flapping_top=100,
        stale_run_s=3600,
    )
    # One random cut a day (each leaves rows that later runs must replace or merge, never duplicate),
    # plus the hand-checked moment; five job runs in all, each ~10 s of the suite's critical path.
    day1_cuts = sorted([rng.uniform(ms(D1, 0, 0, 1), ms(D1, 23, 59)), ms(D1, 23, 59, 30)])
    day2_cuts = [rng.uniform(ms(D2, 0, 0), ms(D2, 10, 0))]
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
