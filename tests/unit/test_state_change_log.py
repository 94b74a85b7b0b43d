"""StateChangeLogger records and the sinks: memory, fan-out, logging and daily JSON-lines files."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller_core.errors import StateChangeFailedError
from controller_core.model import LeaderAndIsr, PartitionAndReplica, TopicPartition
from controller_core.state_change_log import (
    PARTITION_RECORD_FIELDS,
    EncodedRecord,
    FanoutSink,
    JsonLinesDailySink,
    LoggingSink,
    MemorySink,
    StateChangeLogger,
    encode_record,
)
from controller_core.states import PartitionState, ReplicaState

pytestmark = pytest.mark.unit

TP = TopicPartition("orders", 3)


def ms(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() * 1000.0


class Clock:
    def __init__(self, seconds: float = 1_700_000_000.0) -> None:
        self.seconds = seconds

    def __call__(self) -> float:
        return self.seconds


@pytest.fixture
def epoch() -> list[int]:
    return [5]


@pytest.fixture
def sink() -> MemorySink:
    return MemorySink()


@pytest.fixture
def log(sink: MemorySink, epoch: list[int]) -> StateChangeLogger:
    return StateChangeLogger(sink, controller_id=1, epoch_source=lambda: epoch[0], clock=Clock())


# --- the logger -------------------------------------------------------------------------------------------


def test_sequence_numbers_count_per_epoch(log: StateChangeLogger, sink: MemorySink, epoch: list[int]) -> None:
    for _ in range(3):
        log.record("probe")
    epoch[0] = 6
    log.record("probe")
    log.record("probe")
    assert [(r["controller_epoch"], r["seq"]) for r in sink.records] == [(5, 1), (5, 2), (5, 3), (6, 1), (6, 2)]


def test_every_record_has_the_common_header(log: StateChangeLogger, sink: MemorySink) -> None:
    log.record("failover", zk_version=9)
    (record,) = sink.records
    assert record == {
        "ts": 1_700_000_000_000.0,
        "controller_id": 1,
        "controller_epoch": 5,
        "seq": 1,
        "kind": "failover",
        "event_id": None,
        "cause": None,
        "zk_version": 9,
    }


def test_caused_by_groups_records_and_nests(log: StateChangeLogger, sink: MemorySink) -> None:
    with log.caused_by("BrokerChange") as outer:
        log.record("a")
        with log.caused_by("ControlledShutdown", event_id="fixed"):
            log.record("b")
        log.record("c")
    log.record("d")
    assert [(r["cause"], r["event_id"]) for r in sink.records] == [
        ("BrokerChange", outer),
        ("ControlledShutdown", "fixed"),
        ("BrokerChange", outer),
        (None, None),
    ]
    assert len(outer) == 32


def _a_controllers_records(log: StateChangeLogger, epoch: list[int]) -> None:
    """Every kind of record, two events, an epoch change inside the second: what the controller makes."""
    before, after = LeaderAndIsr(1, 4, (1, 2, 3), 7), LeaderAndIsr(2, 5, (2, 3), 8)
    with log.caused_by("ControlledShutdown", event_id="e1"):
        log.record("controlled_shutdown", broker_id=1)
        log.election(TP, "controlled_shutdown", "OnlinePartition", "OnlinePartition", before=before, after=after)
        log.isr_change(TopicPartition("orders", 4), before, after, 1)
        log.request_batch(5, {2: 1}, [1, 2, 3], 2, {1: 1})
        log.replica_transition(PartitionAndReplica(TP, 1), ReplicaState.ONLINE, ReplicaState.OFFLINE)
    with log.caused_by("BrokerChange", event_id="e2"):
        log.partition_transition(TP, PartitionState.ONLINE, PartitionState.OFFLINE, before=after)
        epoch[0] = 6
        log.failed_partition_change(TP, "OfflinePartition", "OnlinePartition", StateChangeFailedError("no replica"))
        log.failed_replica_change(PartitionAndReplica(TP, 2), "OnlineReplica", "NewReplica", "refused")
        log.record("resignation", controller_epoch_resigned=6)


def test_deferred_records_are_the_immediate_ones_in_the_same_order(epoch: list[int]) -> None:
    immediate, deferred = MemorySink(), MemorySink()
    _a_controllers_records(StateChangeLogger(immediate, 1, lambda: epoch[0], Clock()), epoch)
    epoch[0] = 5
    late = StateChangeLogger(deferred, 1, lambda: epoch[0], Clock(), defer=1_000)
    _a_controllers_records(late, epoch)
    assert len(immediate.records) == 9
    assert deferred.records == [] and late.pending == 9  # nothing built before the flush
    late.flush()
    assert deferred.records == immediate.records
    assert late.pending == 0
    assert [(r["controller_epoch"], r["seq"], r["event_id"]) for r in deferred.records] == [
        *((5, seq, "e1") for seq in range(1, 6)),
        (5, 6, "e2"),
        (6, 1, "e2"),
        (6, 2, "e2"),
        (6, 3, "e2"),
    ]


@pytest.mark.parametrize("defer", [0, 2, 1_000])
def test_partition_records_in_bulk_are_the_one_by_one_records(epoch: list[int], defer: int) -> None:
    """``partition_records`` (what the state machines use for 10,000 partitions at once) makes each
    record exactly as ``partition_transition`` and ``election`` do, numbered on from the records
    before it, immediate or deferred."""
    one_by_one, bulk = MemorySink(), MemorySink()
    before, after = LeaderAndIsr(1, 4, (1, 2), 7), LeaderAndIsr(2, 5, (2,), 8)
    other = TopicPartition("orders", 4)
    single = StateChangeLogger(one_by_one, 1, lambda: epoch[0], Clock(), defer=defer)
    many = StateChangeLogger(bulk, 1, lambda: epoch[0], Clock(), defer=defer)
    for log in (single, many):
        with log.caused_by("BrokerChange", "e1"):
            log.record("probe")
    with single.caused_by("BrokerChange", "e1"):
        single.partition_transition(TP, PartitionState.ONLINE, PartitionState.OFFLINE, before=before)
        single.partition_transition(other, None, PartitionState.OFFLINE)
        single.election(TP, "offline", PartitionState.OFFLINE, PartitionState.ONLINE, before=before, after=after)
        single.election(other, "offline", None, PartitionState.ONLINE, before=None, after=after, unclean=True)
        single.isr_change(TP, before, after, 3)
        single.replica_transition(PartitionAndReplica(other, 3), ReplicaState.ONLINE, ReplicaState.OFFLINE)
    with many.caused_by("BrokerChange", "e1"):
        many.partition_records(
            "partition_transition",
            [
                (TP, PartitionState.ONLINE, PartitionState.OFFLINE, None, before, None, None),
                (other, None, PartitionState.OFFLINE, None, None, None, None),
            ],
        )
        many.partition_records(
            "election",
            [
                (TP, PartitionState.OFFLINE, PartitionState.ONLINE, "offline", before, after, False),
                (other, None, PartitionState.ONLINE, "offline", None, after, True),
            ],
        )
        many.partition_records("isr_change", [(TP, None, None, None, before, after, None)], 3)
        many.partition_records(
            "replica_transition", [(other, ReplicaState.ONLINE, ReplicaState.OFFLINE, None, None, None, None)], 3
        )
    single.flush()
    many.flush()
    assert len(bulk.records) == 7
    assert bulk.records == one_by_one.records
    assert [r["seq"] for r in bulk.records] == [1, 2, 3, 4, 5, 6, 7]


def test_deferred_records_are_built_once_the_limit_is_reached(epoch: list[int]) -> None:
    sink = MemorySink()
    log = StateChangeLogger(sink, 1, lambda: epoch[0], Clock(), defer=3)
    with log.caused_by("BrokerChange"):
        log.isr_change(TP, None, LeaderAndIsr(1, 1, (1,)), 2)
        log.record("probe")
        assert sink.records == []
        log.isr_change(TP, None, LeaderAndIsr(1, 2, (1,)), 3)  # the third: all three go
        assert [r["seq"] for r in sink.records] == [1, 2, 3]
        log.isr_change(TP, None, LeaderAndIsr(1, 3, (1,)), 4)
    assert len(sink.records) == 3
    log.flush()
    assert [r["seq"] for r in sink.records] == [1, 2, 3, 4]


def test_partition_transition_record(log: StateChangeLogger, sink: MemorySink) -> None:
    log.partition_transition(TP, PartitionState.NEW, PartitionState.ONLINE, LeaderAndIsr(2, 0, (2, 1)))
    (record,) = sink.records
    assert {k: record[k] for k in ("kind", "entity", "topic", "partition", "replica")} == {
        "kind": "partition_transition",
        "entity": "orders-3",
        "topic": "orders",
        "partition": 3,
        "replica": None,
    }
    assert (record["from_state"], record["to_state"]) == ("NewPartition", "OnlinePartition")
    assert (record["leader_before"], record["leader_after"], record["isr_after"]) == (None, 2, (2, 1))
    assert record["leader_epoch_after"] == 0


def test_replica_records_name_the_broker(log: StateChangeLogger, sink: MemorySink) -> None:
    replica = PartitionAndReplica(TP, 5)
    log.replica_transition(replica, ReplicaState.ONLINE, ReplicaState.OFFLINE)
    log.failed_replica_change(replica, ReplicaState.ONLINE, ReplicaState.NEW, StateChangeFailedError("nope"))
    transition, failed = sink.records
    assert (transition["entity"], transition["replica"], transition["to_state"]) == ("orders-3@5", 5, "OfflineReplica")
    assert failed["kind"] == "failed_change"
    assert failed["error"] == "StateChangeFailedError: nope"


def test_election_record_has_before_and_after(log: StateChangeLogger, sink: MemorySink) -> None:
    log.election(
        TP,
        "offline",
        PartitionState.OFFLINE,
        PartitionState.ONLINE,
        before=LeaderAndIsr(-1, 4, (1,)),
        after=LeaderAndIsr(2, 5, (2,), 3),
        unclean=True,
    )
    (record,) = sink.records
    assert {k: v for k, v in record.items() if k.endswith(("_before", "_after")) or k in ("strategy", "unclean")} == {
        "strategy": "offline",
        "leader_before": -1,
        "leader_after": 2,
        "isr_before": (1,),
        "isr_after": (2,),
        "leader_epoch_before": 4,
        "leader_epoch_after": 5,
        "unclean": True,
    }


def test_isr_change_and_failed_partition_change(log: StateChangeLogger, sink: MemorySink) -> None:
    log.isr_change(TP, LeaderAndIsr(1, 4, (1, 2)), LeaderAndIsr(-1, 5, (2,)), replica=1)
    log.failed_partition_change(TP, PartitionState.OFFLINE, PartitionState.ONLINE, "no leader", strategy="preferred")
    isr, failed = sink.records
    assert (isr["kind"], isr["entity"], isr["leader_after"]) == ("isr_change", "orders-3@1", -1)
    assert (failed["error"], failed["strategy"]) == ("no leader", "preferred")


def test_every_partition_record_has_every_field_in_one_order(log: StateChangeLogger, sink: MemorySink) -> None:
    """Readers of the JSON lines see the same keys in the same order on every line, null when unset."""
    log.partition_transition(TP, PartitionState.ONLINE, PartitionState.OFFLINE, before=LeaderAndIsr(1, 4, (1, 2)))
    log.replica_transition(PartitionAndReplica(TP, 5), ReplicaState.ONLINE, ReplicaState.OFFLINE)
    log.election(TP, "preferred", None, PartitionState.ONLINE, before=None, after=LeaderAndIsr(2, 5, (2,), 3))
    for record in sink.records:
        assert tuple(record) == PARTITION_RECORD_FIELDS
    offline, replica, election = sink.records
    assert (offline["leader_before"], offline["leader_after"], offline["replica"]) == (1, None, None)
    assert (replica["replica"], replica["leader_before"], replica["strategy"]) == (5, None, None)
    assert (election["from_state"], election["leader_before"], election["leader_after"]) == (None, None, 2)
    assert (election["unclean"], election["error"]) == (False, None)


def test_request_batch_record_is_json_ready(log: StateChangeLogger, sink: MemorySink) -> None:
    log.request_batch(5, {1: 10, 2: 3}, [1, 2, 3], 13, {})
    (record,) = sink.records
    assert json.loads(json.dumps(record))["leader_and_isr"] == {"1": 10, "2": 3}
    assert record["update_metadata"] == {"brokers": [1, 2, 3], "partitions": 13}


def test_for_context_follows_the_context_epoch(sink: MemorySink) -> None:
    from controller_core.context import ControllerContext

    ctx = ControllerContext(controller_id=7)
    log = StateChangeLogger.for_context(ctx, sink)
    ctx.epoch = 3
    log.record("x")
    assert (sink.records[0]["controller_id"], sink.records[0]["controller_epoch"]) == (7, 3)


# --- sinks ----------------------------------------------------------------------------------------------------------


def test_fanout_reaches_every_sink_even_if_one_fails(caplog: pytest.LogCaptureFixture) -> None:
    class Broken:
        def emit(self, record: Mapping[str, Any]) -> None:
            raise OSError("disk full")

        def flush(self) -> None:
            raise OSError("disk full")

    first, last = MemorySink(), MemorySink()
    fanout = FanoutSink([first, Broken(), last])
    fanout.emit({"kind": "x"})
    fanout.flush()
    assert first.records == last.records == [{"kind": "x"}]
    assert "failed to accept" in caplog.text


def test_memory_sink_filters_by_kind() -> None:
    sink = MemorySink()
    for kind in ("a", "b", "a"):
        sink.emit({"kind": kind})
    assert len(sink.of_kind("a")) == 2
    assert len(sink.of_kind("a", "b")) == 3
    sink.clear()
    assert sink.records == []


def test_logging_sink_uses_kafkas_prefix(
    caplog: pytest.LogCaptureFixture, log: StateChangeLogger, sink: MemorySink
) -> None:
    logging_sink = LoggingSink(logging.getLogger("test.state_change"), level=logging.INFO)
    caplog.set_level(logging.INFO, logger="test.state_change")
    log.partition_transition(TP, "OfflinePartition", "OnlinePartition", LeaderAndIsr(2, 1, (2,)))
    logging_sink.emit(sink.records[-1])
    assert "[Controller id=1 epoch=5] partition_transition orders-3 OfflinePartition -> OnlinePartition" in caplog.text


def test_logging_sink_formats_nothing_when_disabled() -> None:
    class Exploding:
        def __str__(self) -> str:
            raise AssertionError("formatted although disabled")

    quiet = logging.getLogger("test.quiet")
    quiet.setLevel(logging.WARNING)
    LoggingSink(quiet, level=logging.DEBUG).emit({"kind": Exploding(), "error": Exploding()})


# --- daily JSON-lines files -------------------------------------------------------------------------------------


def read_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_json_sink_writes_one_object_per_line_in_the_days_file(tmp_path: Path) -> None:
    sink = JsonLinesDailySink(tmp_path / "logs")
    sink.emit(
        {"ts": ms("2024-03-01T10:00:00"), "kind": "election", "isr_after": (2, 3), "to_state": PartitionState.ONLINE}
    )
    sink.emit({"ts": ms("2024-03-01T10:00:01"), "kind": "odd", "value": frozenset([1])})
    sink.flush()
    path = tmp_path / "logs" / "state-change-2024-03-01.jsonl"
    assert sink.current_path == path
    first, second = read_lines(path)
    assert first["isr_after"] == [2, 3]
    assert first["to_state"] == "OnlinePartition"
    assert second["value"] == "frozenset({1})"  # anything else is written as its str()


def test_json_sink_buffers_until_flush_or_threshold(tmp_path: Path) -> None:
    sink = JsonLinesDailySink(tmp_path, buffer_records=3)
    path = tmp_path / "state-change-2024-03-01.jsonl"
    for i in range(2):
        sink.emit({"ts": ms("2024-03-01T00:00:00") + i, "i": i})
    assert not path.exists()
    sink.emit({"ts": ms("2024-03-01T00:00:00") + 2, "i": 2})
    assert [r["i"] for r in read_lines(path)] == [0, 1, 2]
    sink.flush()  # nothing pending: nothing written
    assert len(read_lines(path)) == 3


def test_json_sink_rotates_at_utc_midnight_even_inside_one_buffer(tmp_path: Path) -> None:
    sink = JsonLinesDailySink(tmp_path)
    for stamp in ("2024-03-01T23:59:59.999", "2024-03-02T00:00:00", "2024-03-02T12:00:00", "2024-03-03T00:00:00"):
        sink.emit({"ts": ms(stamp), "at": stamp})
    sink.flush()
    sink.emit({"ts": ms("2024-03-03T08:00:00"), "at": "later"})
    sink.close()
    files = {p.name: [r["at"] for r in read_lines(p)] for p in tmp_path.iterdir()}
    assert files == {
        "state-change-2024-03-01.jsonl": ["2024-03-01T23:59:59.999"],
        "state-change-2024-03-02.jsonl": ["2024-03-02T00:00:00", "2024-03-02T12:00:00"],
        "state-change-2024-03-03.jsonl": ["2024-03-03T00:00:00", "later"],
    }


def test_json_sink_appends_across_restarts_and_stamps_records_without_ts(tmp_path: Path) -> None:
    clock = Clock(ms("2024-05-05T05:00:00") / 1000.0)
    for i in range(2):
        sink = JsonLinesDailySink(tmp_path, clock=clock)
        sink.emit({"kind": "no-ts", "i": i})
        sink.close()
    assert [r["i"] for r in read_lines(tmp_path / "state-change-2024-05-05.jsonl")] == [0, 1]


def test_a_hundred_thousand_transitions_are_all_written(tmp_path: Path) -> None:
    sink = JsonLinesDailySink(tmp_path)
    log = StateChangeLogger(sink, 1, lambda: 5)
    before, after = LeaderAndIsr(1, 4, (1, 2, 3), 7), LeaderAndIsr(2, 5, (2, 3), 8)
    for p in range(100_000):
        log.election(
            TopicPartition("big", p), "offline", "OfflinePartition", "OnlinePartition", before=before, after=after
        )
    sink.close()
    (path,) = tmp_path.iterdir()
    with path.open(encoding="utf-8") as f:
        lines = sum(1 for _ in f)
    assert lines == 100_000


def test_the_daily_file_encodes_int_keyed_maps_and_tuples(tmp_path: Path) -> None:
    """request_batch records map broker ids to counts; isr values are tuples."""
    sink = JsonLinesDailySink(tmp_path, clock=lambda: 1_700_000_000.0)
    sink.emit({"ts": 1_700_000_000_000.0, "kind": "request_batch", "leader_and_isr": {1: 20, 2: 3}, "isr": (1, 2)})
    sink.flush()
    (path,) = tmp_path.glob("state-change-*.jsonl")
    assert json.loads(path.read_text()) == {
        "ts": 1_700_000_000_000.0,
        "kind": "request_batch",
        "leader_and_isr": {"1": 20, "2": 3},
        "isr": [1, 2],
    }


def test_a_record_given_as_json_is_written_as_the_same_record_built_as_objects(
    tmp_path: Path, epoch: list[int]
) -> None:
    """``record_json`` (the state snapshot's way): one JSON for every sink, in order with the deferred
    partition records, the same line as ``record`` with the decoded fields."""
    sink = JsonLinesDailySink(tmp_path)
    log = StateChangeLogger(sink, controller_id=1, epoch_source=lambda: epoch[0], clock=Clock(), defer=100)
    fields = {"partition_states": {"OnlinePartition": ["orders-0", "orders-1"]}, "replica_states": {}}
    with log.caused_by("Startup", event_id="e1"):
        log.partition_transition(TP, None, PartitionState.NEW)
        encoded = log.record_json("state_snapshot", {k: [encode_record(v)] for k, v in fields.items()})
        log.partition_transition(TP, PartitionState.NEW, PartitionState.ONLINE)
    assert isinstance(encoded, EncodedRecord) and "partition_states" not in encoded  # held as JSON only
    assert encode_record(encoded) is encoded.json
    log.flush()
    assert sink.current_path is not None
    lines = read_lines(sink.current_path)
    assert [line["seq"] for line in lines] == [1, 2, 3]
    reference = StateChangeLogger(MemorySink(), controller_id=1, epoch_source=lambda: 5, clock=Clock())
    with reference.caused_by("Startup", event_id="e1"):
        reference.partition_transition(TP, None, PartitionState.NEW)
        expected = reference.record("state_snapshot", **fields)
    assert encoded.json == encode_record(expected)
    assert lines[1] == json.loads(encoded.json)
