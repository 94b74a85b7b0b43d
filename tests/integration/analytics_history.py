"""The small history whose analytics answers were worked out by hand, and the job runs several tests share.

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

Shared by ``test_analytics_job.py`` and ``test_analytics_current.py`` (the fixtures are made available
to every integration module by ``conftest.py``); what the fixtures build is built once per session.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession

from controller_core.model import LeaderAndIsr, TopicPartition
from controller_core.state_change_log import JsonLinesDailySink, StateChangeLogger
from workers.analytics import runner
from workers.analytics.compaction import compact
from workers.analytics.job import JobConfig, JobResult, run

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


def pipeline_settings(base: Path, input_dir: Path, *, compact: bool) -> runner.PipelineSettings:
    """The runner's settings for a test pipeline under ``base``: local Spark, results beside it."""
    return runner.PipelineSettings(
        input_dir=input_dir,
        output_dir=base / "results",
        compacted_dir=base / "compacted",
        audit_dir=base / "audit",
        remote="",
        master="local[2]",
        driver_memory="1g",
        compact=compact,
        flapping_top=100,
        stale_run_s=3600,
    )


def _config(history: Path, output: Path, since: date, until: date, **kw: Any) -> JobConfig:
    return JobConfig(input_dir=history, output_dir=output, since=since, until=until, now_ms=AFTER_BOTH_DAYS_MS, **kw)


@pytest.fixture(scope="module")
def both_days(spark: SparkSession, history: Path, audit: Path, shared_dir: SharedDir) -> Path:
    """One run over both days, with the audit export (once per session); returns its run directory.

    The reference the other runs are compared with is Spark's large-input path (``small_input_bytes=0``:
    cached frames, the hashed walk, several shuffle tasks, every table written by Spark; and
    ``python_max_records=0``); the chained and cursor runs of this small history take the Python
    engine (and the nightly run Spark's small path), so equal tables say they all agree.

    ``CLUSTER``'s day 1 is compacted first, so the reference reads both ways a large run reads: a
    compacted day (the bulk cached without the rare kinds' fields, those kinds read apart) and a JSON
    day (parsed once). Every comparison with it, and every hand-computed answer read from it, then
    checks both; a separate large run over the same days cost ~45 worker-s of the suite.
    """

    def build(output: Path) -> None:
        with tempfile.TemporaryDirectory(prefix="compacted-") as compacted:
            done = compact(spark, history, Path(compacted), (CLUSTER,), until=D1)
            assert done.compacted == {CLUSTER: [D1.isoformat()]}
            config = _config(
                history,
                output,
                D1,
                D2,
                actions_dir=audit,
                compacted_dir=Path(compacted),
                small_input_bytes=0,
                python_max_records=0,
            )
            result = run(config, spark)
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


def table(run_dir: Path, name: str) -> list[dict[str, Any]]:
    """A result table's rows for ``CLUSTER`` as ``Row.asDict(recursive=True)`` gives them (timestamps as
    naive local times, dates as dates, structs as dicts), read with pyarrow: a Spark read is two
    jobs on the shared server, for a few rows the tests only compare."""
    path = run_dir / name / f"cluster={CLUSTER}"
    files = sorted(p for p in path.glob("*.parquet") if not p.name.startswith((".", "_"))) if path.is_dir() else []
    return [{k: _as_spark_collects(v) for k, v in row.items()} for f in files for row in _rows(f)]


def _rows(path: Path) -> list[dict[str, Any]]:
    # Spark writes timestamps as INT96; read at microseconds they come out as datetimes (at pyarrow's
    # default nanoseconds, as pandas Timestamps).
    rows: list[dict[str, Any]] = pq.read_table(path, coerce_int96_timestamp_unit="us").to_pylist()
    return rows


def _as_spark_collects(value: Any) -> Any:
    """One value as a PySpark ``collect`` returns it: a timestamp in the local time zone, without one."""
    if isinstance(value, datetime):
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return aware.astimezone().replace(tzinfo=None)
    if isinstance(value, list):
        return [_as_spark_collects(v) for v in value]
    if isinstance(value, dict):
        return {k: _as_spark_collects(v) for k, v in value.items()}
    return value


def by(rows: list[dict[str, Any]], *keys: str) -> dict[Any, dict[str, Any]]:
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}
