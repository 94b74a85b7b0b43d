"""The mirror's Redis writes on their own thread: the mirror goes on while a flush is written.

At most one flush in flight; what changes meanwhile coalesces into the next one; jobs run in order
(a heartbeat after a flush carries that flush's seq); a failed write drops later flushes until the
resync.
"""

from __future__ import annotations

import threading
from typing import Any

import redis

from controller_core.model import TopicPartition
from tests.unit.test_mirror_coalescing import RecordingWriter, make_mirror
from workers.mirror.changes import ChangeSet
from workers.mirror.events import Wakeup
from workers.mirror.mirror import Mirror
from workers.mirror.state import StateRead
from workers.mirror.writer_thread import WriterThread


class BlockingWriter(RecordingWriter):
    """Holds each ``write_changes`` until the test releases it (a Redis busy with a big transaction)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Semaphore(0)
        self.release = threading.Semaphore(0)
        self.metas: list[dict[str, Any]] = []
        self.fail_next = False

    def write_changes(
        self, ch: ChangeSet, meta: dict[str, Any], before_rows: Any = None, after_rows: Any = None
    ) -> None:
        self.entered.release()
        assert self.release.acquire(timeout=5)
        if self.fail_next:
            self.fail_next = False
            raise redis.ConnectionError("gone")
        super().write_changes(ch, meta, before_rows, after_rows)

    def write_meta_of_gen(self, meta: dict[str, Any], gen: str) -> bool:
        if gen != self.meta_gen():  # as the real one: nothing written over another generation
            return False
        self.metas.append(dict(meta))
        return True

    def prune_interest(self, now_ms: int) -> None: ...


def move(mirror: Mirror, leader: int, version: int, partitions: range) -> None:
    reads = {
        TopicPartition("orders", p): StateRead(leader, version, (leader,), 1, version, 100 + version)
        for p in partitions
    }
    mirror.state.apply_state_reads(reads)
    mirror._note_change()


def started() -> tuple[Mirror, Any, BlockingWriter]:
    mirror, clock, _writer, _publisher = make_mirror()
    writer = BlockingWriter()
    mirror.writer = writer  # type: ignore[assignment]
    mirror._need_resync = False
    mirror.flusher.start()
    return mirror, clock, writer


def test_the_mirror_goes_on_while_a_flush_is_written_and_changes_coalesce() -> None:
    mirror, clock, writer = started()
    try:
        move(mirror, 2, 1, range(0, 10))
        clock.now += 0.2
        assert mirror._flush_due()
        mirror.flush()  # returns at once: the writer thread holds it
        assert writer.entered.acquire(timeout=5)
        # While Redis is busy: the mirror thread applies more changes, and does not flush again.
        move(mirror, 1, 2, range(5, 10))
        move(mirror, 2, 2, range(20, 30))
        clock.now += 0.5
        assert mirror.flusher.flushing and not mirror._flush_due()
        writer.release.release()
        assert mirror.flusher.drain(5)
        assert isinstance(mirror.events.get(timeout=5), Wakeup)  # the loop is woken to flush again
        assert mirror.seq == 8 and mirror._flush_due()
        mirror.flush()
        writer.release.release()
        assert mirror.flusher.drain(5)
        (first, m1), (second, m2) = writer.writes
        assert sorted(first.rows) == [f"orders/{p:06d}" for p in range(10)]
        # The second flush carries both bursts, and partitions 5-9 as last written (leader 1).
        assert sorted(second.rows) == sorted(
            [f"orders/{p:06d}" for p in range(5, 10)] + [f"orders/{p:06d}" for p in range(20, 30)]
        )
        assert second.rows["orders/000007"].leader == 1
        assert (m1["seq"], m2["seq"], mirror.seq) == (8, 9, 9)
    finally:
        mirror.flusher.stop()


def test_a_heartbeat_queued_behind_a_flush_carries_that_flush_seq() -> None:
    mirror, clock, writer = started()
    try:
        move(mirror, 2, 1, range(3))
        clock.now += 0.2
        mirror.flush()
        assert writer.entered.acquire(timeout=5)
        mirror.heartbeat()  # computed now (seq 7), written after the flush
        writer.release.release()
        assert mirror.flusher.drain(5)
        assert [m["seq"] for m in writer.metas] == [8]
    finally:
        mirror.flusher.stop()


def test_after_a_failed_write_later_flushes_wait_for_the_resync() -> None:
    mirror, clock, writer = started()
    try:
        writer.fail_next = True
        move(mirror, 2, 1, range(3))
        clock.now += 0.2
        mirror.flush()
        assert writer.entered.acquire(timeout=5)
        writer.release.release()
        assert mirror.flusher.drain(5)
        assert mirror._need_resync and "Redis write failed" in mirror._resync_reason
        move(mirror, 1, 2, range(3))
        clock.now += 0.2
        mirror.flush()
        assert mirror.flusher.drain(5)
        assert writer.writes == [] and mirror.seq == 7  # nothing written on a snapshot that missed a flush
    finally:
        mirror.flusher.stop()


def test_a_writer_not_started_runs_jobs_at_once() -> None:
    done: list[int] = []
    thread = WriterThread("t", wake=lambda: None, on_error=lambda reason: None)
    thread.submit(lambda: done.append(1), flush=True)
    assert done == [1] and not thread.flushing
