"""The Redis state-change stream sink against a real Redis: what lands in the stream, in which order,
and what happens where Redis refuses server-side scripts."""

from __future__ import annotations

import uuid
from typing import Any, cast

import orjson
import redis

from controller_core.model import LeaderAndIsr, PartitionAndReplica, TopicPartition
from controller_core.state_change_log import MemorySink, StateChangeLogger
from controller_core.states import ReplicaState
from dashboard.lib.redis_keys import state_change_stream_key
from workers.sinks import RedisStreamSink

CLUSTER = "stream-sink"


def _records(count: int) -> list[dict[str, Any]]:
    """What the controller emits: partition records (native JSON types) and a request_batch-like one
    with int keys (orjson's slower options), in one order."""
    memory = MemorySink()
    log = StateChangeLogger(memory, 1, lambda: 7)
    before, after = LeaderAndIsr(1, 3, (1, 2, 3), 4), LeaderAndIsr(2, 4, (2, 3), 5)
    with log.caused_by("ControlledShutdown"):
        for p in range(count):
            tp = TopicPartition("orders", p)
            log.isr_change(tp, before, after, 1)
            log.replica_transition(PartitionAndReplica(tp, 1), ReplicaState.ONLINE, ReplicaState.OFFLINE)
        log.record("request_batch", leader_and_isr={2: count, 3: count})
    return [dict(r) for r in memory.records]


def _stream(client: redis.Redis) -> list[dict[str, Any]]:
    entries = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange(state_change_stream_key(CLUSTER)))
    assert all(set(fields) == {b"r"} for _, fields in entries)  # docs/contracts.md: one field, r
    return [orjson.loads(fields[b"r"]) for _, fields in entries]


def _as_json(records: list[dict[str, Any]]) -> list[Any]:
    return [orjson.loads(orjson.dumps(r, option=orjson.OPT_NON_STR_KEYS)) for r in records]


def test_every_record_lands_once_in_order_across_chunks(rds: redis.Redis) -> None:
    records = _records(2_600)  # 5,201 records: two chunks of 2,000 and a partial one
    sink = RedisStreamSink(rds, CLUSTER, chunk=2_000)
    for record in records:
        sink.emit(record)
    assert sink.write_pending()
    assert sink.scripting
    assert sink.written == len(records)
    assert _stream(rds) == _as_json(records)
    assert [r["seq"] for r in _stream(rds)] == list(range(1, len(records) + 1))


def test_the_stream_is_trimmed_to_about_maxlen(rds: redis.Redis) -> None:
    sink = RedisStreamSink(rds, CLUSTER, maxlen=1_000, chunk=5_000)
    for record in _records(2_500):
        sink.emit(record)
    assert sink.write_pending()
    length = rds.xlen(state_change_stream_key(CLUSTER))
    assert 1_000 <= length < 5_001  # MAXLEN ~ trims whole macro nodes: at least maxlen stay


def test_a_redis_that_refuses_scripts_gets_one_xadd_per_record(rds: redis.Redis, redis_url: str) -> None:
    """An ACL user without @scripting (as on managed Redis services that forbid EVAL): NOPERM, then
    the pipelined XADDs, with nothing lost or written twice."""
    user, password = f"noscript-{uuid.uuid4().hex[:8]}", uuid.uuid4().hex
    rds.acl_setuser(user, enabled=True, passwords=[f"+{password}"], keys=["*"], commands=["+@all", "-@scripting"])
    limited = redis.Redis.from_url(redis_url, username=user, password=password)
    try:
        records = _records(300)
        sink = RedisStreamSink(limited, CLUSTER, chunk=250)
        for record in records:
            sink.emit(record)
        assert sink.write_pending()
        assert not sink.scripting
        assert sink.written == len(records)
        assert _stream(rds) == _as_json(records)
    finally:
        limited.close()
        rds.acl_deluser(user)


def test_a_script_that_fails_keeps_the_records_and_the_script(rds: redis.Redis) -> None:
    """A stream key taken by another type (WRONGTYPE) fails the script as it would fail every XADD: the
    records stay buffered, scripts stay on, and they are written once the key is free."""
    key = state_change_stream_key(CLUSTER)
    rds.set(key, "not a stream")
    records = _records(10)
    sink = RedisStreamSink(rds, CLUSTER)
    for record in records:
        sink.emit(record)
    assert not sink.write_pending()
    assert sink.scripting and sink.written == 0
    rds.delete(key)
    assert sink.write_pending()
    assert _stream(rds) == _as_json(records)


def test_a_record_given_as_json_lands_as_its_json(rds: redis.Redis) -> None:
    """The failover's state snapshot (``record_json``): the stream entry is the record's JSON as built."""
    log = StateChangeLogger(MemorySink(), 1, lambda: 7)
    states = {"OnlinePartition": ["orders-0", "orders-1"]}
    encoded = log.record_json("state_snapshot", {"partition_states": [orjson.dumps(states)]})
    sink = RedisStreamSink(rds, CLUSTER)
    sink.emit(encoded)
    assert sink.write_pending()
    (entry,) = _stream(rds)
    assert entry == orjson.loads(encoded.json)
    assert entry["partition_states"] == states and entry["seq"] == 1
