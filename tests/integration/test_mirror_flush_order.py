"""A flush against a real Redis: counters first, then rows, state sets and ``seq``, with a publish after each."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from controller_core.model import ReplicaAssignment, TopicPartition
from dashboard.clusters import layout
from workers.mirror.snapshot import SnapshotWriter
from workers.mirror.state import OBSERVED, MirrorState, StateRead


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    conn = redis.Redis.from_url(redis_url)
    yield conn
    conn.close()


def test_seq_is_stored_only_with_the_rows_of_its_flush(client: redis.Redis) -> None:
    state = MirrorState("c", mode=OBSERVED)
    state.set_brokers({1: {"id": 1}, 2: {"id": 2}})
    state.set_topic_names(["t"])
    state.set_topic("t", None, {0: ReplicaAssignment.of([1, 2])})
    state.apply_state_reads({TopicPartition("t", 0): StateRead(1, 0, (1, 2), 1, 0, 10)})
    writer = SnapshotWriter(client, "c")
    writer.write_full(state, {"gen": "g", "seq": 1})
    state.mark_flushed_all()
    state.set_brokers({2: {"id": 2}})  # its leader goes: offline
    seen: dict[str, tuple[object, ...]] = {}

    def look(when: str) -> None:
        seq = client.hget(layout.meta_key("c"), "seq")
        offline = client.hget(layout.counts_key("c"), "offline")
        row = client.hget(layout.partitions_key("c"), "t/000000") or b""
        seen[when] = (seq, offline, b'"s":"OfflinePartition"' in row)

    writer.write_changes(
        state.take_changes(), {"seq": 2}, before_rows=lambda: look("before"), after_rows=lambda: look("after")
    )
    # Between the two: the counters are there (the overview can be told), seq and rows are not yet.
    assert seen["before"] == (b"1", b"1", False)
    # After: seq with the rows it covers (a page whose snapshot holds seq 2 has all of flush 2).
    assert seen["after"] == (b"2", b"1", True)
