"""F20 once per PR: Redis paused (SIGSTOP) under controllers that write the state-change stream.

The candidates plug the Celery host's own Redis side (buffered stream sink, status publisher) and
the rig's mirror follows their stream, so a controller that blocked on Redis would show here as
leaders not moving, a growing event-queue p99, or records missing from the stream afterwards.
Single-node ZooKeeper (the session's), a 10 s pause instead of the plan's 30 s (the soak runs 30),
time bounds doubled as in the rest of the per-PR tier.
"""

from __future__ import annotations

import json
import queue
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import redis

from dashboard.lib.redis_keys import state_change_stream_key
from scripts.devservices import ZooKeeperServer
from scripts.reliability.scenarios import run_scenario
from scripts.reliability.scenarios_redis import REDIS_SCENARIOS, RedisSettings
from workers.mirror.events import StreamRecords
from workers.mirror.stream import RecordGuard, StreamFollower, decode_entries

SETTINGS = RedisSettings(slack=2.0, redis_pause_s=10.0)


def _record(seq: int, epoch: int = 3, leader: int = 1) -> dict[str, Any]:
    return {"controller_id": 101, "controller_epoch": epoch, "seq": seq, "kind": "election", "leader_after": leader}


def _entries(*records: dict[str, Any]) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return [(f"{i + 1}-0".encode(), {b"r": json.dumps(r).encode()}) for i, r in enumerate(records)]


@pytest.mark.unit
def test_a_guard_admits_each_controller_record_once() -> None:
    guard = RecordGuard()
    a, b, c = _record(1), _record(2), _record(3)
    assert decode_entries(_entries(a, b), guard) == [a, b]
    assert decode_entries(_entries(a, b, c), guard) == [c]  # the resent copy of a and b is dropped
    assert guard.dropped == 2
    new_epoch, unstamped = _record(1, epoch=4), {"kind": "note"}
    assert decode_entries(_entries(new_epoch, unstamped, unstamped), guard) == [new_epoch, unstamped, unstamped]
    assert decode_entries(_entries(a, b, a, b, c)) == [a, b, c]  # one replay page, no guard given


@pytest.mark.integration
def test_the_follower_delivers_copies_of_a_resent_batch_once(redis_url: str) -> None:
    """F20 regression: after a Redis pause the stream held each batch the sink had resent (its XADDs
    timed out but sat in the paused server's socket buffers), interleaved: ``a b a b c``. The follower
    handed every copy to the mirror, which replayed the transitions again."""
    client = redis.Redis.from_url(redis_url)
    key = state_change_stream_key("dup")
    a, b, c = _record(1), _record(2, leader=2), _record(3, leader=3)
    for record in (a, b, a, b, c):
        client.xadd(key, {"r": json.dumps(record)})
    delivered: queue.SimpleQueue[StreamRecords] = queue.SimpleQueue()
    follower = StreamFollower(client, "dup", delivered.put, block_ms=50)
    try:
        follower.restart("0-0")
        got: list[Mapping[str, Any]] = []
        while len(got) < 3:
            got += delivered.get(timeout=5).records
        client.xadd(key, {"r": json.dumps(c)})  # one more late copy, in a later read
        client.xadd(key, {"r": json.dumps(_record(4))})
        while len(got) < 4:
            got += delivered.get(timeout=5).records
    finally:
        follower.stop()
        client.close()
    assert [r["seq"] for r in got] == [1, 2, 3, 4]


@pytest.mark.slow
def test_paused_redis_does_not_stall_the_controller(zk_server: ZooKeeperServer, tmp_path: Path) -> None:
    if not zk_server.ready():
        zk_server.start()
    scenario = REDIS_SCENARIOS["F20"]
    result = run_scenario(scenario, 0, tmp_path, [(zk_server.host, zk_server.port)], seed=0, settings=SETTINGS)
    report = "\n".join([f"F20: {scenario.title} ({scenario.figure})", *map(str, result.violations), *result.notes])
    assert not result.violations, report
    assert result.passed, report
