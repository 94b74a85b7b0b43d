"""The mirror's flushes and heartbeats: what the mirror thread prepares, what the writer thread writes.

Why a module of its own: the loop (``mirror.py``) decides *when* to flush; this half decides *what*
a flush or a heartbeat is and writes it, on the ``WriterThread`` (``writer_thread.py``) so that the
mirror thread never waits on Redis. Split of the work:

* mirror thread: ``take_changes()`` (the coalesced rows, counters and state-set moves, computed
  against what the previous flush wrote), the controller fields, the heartbeat's status;
* writer thread, one job at a time: the watched scopes, the deltas (``DeltaBuilder``), ``seq``, the
  generation check, the counters transaction, the publish, the rows transaction.

``seq`` and the ``DeltaBuilder`` are touched only by the writer's jobs while it runs (and by the
resync, which drains the writer first). A row is encoded when its flush is written, so it may carry a
change the mirror made after taking the flush; that change marked the row dirty again and the next
flush writes it again (never an older value after a newer one: jobs run in order).

``StatusAndFlush`` is a base of ``Mirror``, which sets every attribute below in its ``__init__``.
"""

from __future__ import annotations

import gc
import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import redis
from kazoo.protocol.states import KazooState

from dashboard.live import groups, protocol
from workers.mirror.changes import ChangeSet
from workers.mirror.config import MirrorConfig
from workers.mirror.deltas import DeltaBuilder, split_rows, watched_scopes
from workers.mirror.events import MirrorEvent, Wakeup
from workers.mirror.gc_policy import IdleCollector
from workers.mirror.publish import Publisher
from workers.mirror.snapshot import SnapshotWriter
from workers.mirror.state import MirrorState
from workers.mirror.writer_thread import WriterThread

logger = logging.getLogger(__name__)

# The keys of ``status()``: what the pages' indicator reads.
STATUS_KEYS = ("gen", "seq", "zk_state", "synced_at", "heartbeat_at", "lag_ms", "resync_pending")


class StatusAndFlush:
    """Flush and heartbeat jobs of ``Mirror`` (see the module docstring)."""

    cluster: str
    config: MirrorConfig
    state: MirrorState
    writer: SnapshotWriter
    builder: DeltaBuilder
    publisher: Publisher
    flusher: WriterThread
    events: queue.SimpleQueue[MirrorEvent]
    clock: Callable[[], float]
    seq: int
    gen: str
    owner: str
    resyncs: int
    zk_state: str
    synced_at_ms: int
    last_flush_lag_ms: float
    stream_lag_ms: float
    stream_id: str
    flushes: int
    _need_resync: bool
    _first_change_at: float | None
    _next_heartbeat: float
    _idle_gc: IdleCollector
    _watched: set[str]
    _watched_at: float
    _heartbeat_payload: tuple[int, dict[str, Any], bool, str] | None
    _heartbeat_lock: threading.Lock
    _background_work: Callable[[], bool]  # reads.StateReads
    _write_failed: bool

    def _request_resync(self, reason: str) -> None:
        self._need_resync = True
        self._resync_reason = reason

    def _resync_from_writer(self, reason: str) -> None:
        """The writer thread found the snapshot in Redis incomplete: the mirror thread rebuilds it.

        Until that resync (which clears ``_write_failed``), flushes already handed over are dropped:
        their deltas would land on a snapshot missing the failed one's changes.
        """
        self._write_failed = True
        self._request_resync(reason)
        self.events.put(Wakeup())

    # -- flush ----------------------------------------------------------------------------------
    def flush(self) -> None:
        """Hand what changed to the writer thread: one transaction, then the watched scopes' deltas."""
        first = self._first_change_at
        self._first_change_at = None
        changes = self.state.take_changes()
        if changes.is_empty:
            return
        now = self.clock()
        controller = self._controller_meta() if changes.controller is not None else None
        gen = self.gen
        self.flusher.submit(lambda: self._write_flush(changes, first, now, controller, gen), flush=True)

    def _write_flush(
        self, changes: ChangeSet, first: float | None, now: float, controller: dict[str, Any] | None, gen: str
    ) -> None:
        """The writer thread's half of a flush."""
        if self._write_failed:
            return  # the coming resync rewrites everything this flush carries
        seq = self.seq + 1
        messages = self.builder.build(changes, seq, self._watched_scopes(now))
        counters_only, with_rows = split_rows(messages)
        lag_ms = (now - first) * 1000.0 if first is not None else 0.0
        published_at: list[float] = []

        def publish() -> None:
            # Once counters and seq are stored: the overview's and the diagrams' wait ends here.
            self.seq = seq
            published_at.append(self.clock())
            self.publisher.publish(counters_only)

        def publish_rows() -> None:
            # Once the rows are stored too: a page may read them as soon as it hears of them.
            if with_rows:
                self.publisher.publish(with_rows)

        try:
            if self.writer.meta_gen() != gen:
                # Redis restarted or was flushed since the last heartbeat: deltas would land in an
                # empty snapshot. Rebuild the whole thing instead.
                self._resync_from_writer("Redis lost the snapshot")
                return
            meta: dict[str, Any] = {"seq": seq, "updated_at": int(now * 1000), "lag_ms": round(lag_ms)}
            if controller is not None:
                # In the same transaction as the seq that carries it: a page that reads the snapshot
                # between this flush and the next heartbeat must not get the new seq with the old
                # controller (it would never hear of the change again).
                meta |= controller
            self.writer.write_changes(changes, meta, before_rows=publish, after_rows=publish_rows)
        except redis.RedisError as exc:
            # The snapshot in Redis now misses these changes: rebuild it once Redis answers again.
            self._resync_from_writer(f"Redis write failed: {exc}")
            return
        if not published_at:
            publish()
            publish_rows()
        self.last_flush_lag_ms = lag_ms
        self.flushes += 1
        written = published_at[0]
        if len(changes.rows) >= 1000:
            # Rows replaced in a storm are new long-lived objects: move them out of the cyclic
            # collector's way now (a gen-2 pass over 10^5 rows stalls the loop for ~1 s).
            gc.freeze()
            logger.info(
                "mirror of %s: seq %d carried %d rows (%d messages); lag %.0f ms, "
                "build+counters %.0f ms, publish+rows %.0f ms",
                self.cluster,
                seq,
                len(changes.rows),
                len(messages),
                lag_ms,
                (written - now) * 1000.0,
                (self.clock() - written) * 1000.0,
            )

    def _watched_scopes(self, now: float) -> set[str]:
        if now - self._watched_at >= self.config.interest_refresh_s / 4:
            self._watched = watched_scopes(self.writer.watched_entries(int(now * 1000)))
            self._watched_at = now
        return self._watched

    # -- status and heartbeat -------------------------------------------------------------------
    def _meta(self, now_ms: int) -> dict[str, Any]:
        """The snapshot's meta hash in Redis: the pages' status plus what the fleet and tools read."""
        return {
            **self.status(now_ms),
            "mode": self.config.mode,
            "stream_lag_ms": round(self.stream_lag_ms),
            **self._controller_meta(),
            "stream_id": self.stream_id,
            "resyncs": self.resyncs,
            "owner": self.owner,
            "resync_pending": int(self._need_resync),  # a Redis hash holds no booleans
        }

    def _controller_meta(self) -> dict[str, Any]:
        return {
            "controller_id": "" if self.state.controller_id is None else self.state.controller_id,
            "controller_epoch": "" if self.state.controller_epoch is None else self.state.controller_epoch,
        }

    def status(self, now_ms: int) -> dict[str, Any]:
        """What pages show about freshness (also sent to them every heartbeat)."""
        return {
            "gen": self.gen,
            "seq": self.seq,
            "zk_state": self.zk_state,
            "synced_at": self.synced_at_ms,
            "heartbeat_at": now_ms,
            "lag_ms": round(self.last_flush_lag_ms),
            "resync_pending": self._need_resync,
        }

    def heartbeat(self) -> None:
        """Every ``heartbeat_s``: staleness into Redis and to the pages (written by the writer thread)."""
        now = self.clock()
        now_ms = int(now * 1000)
        self._next_heartbeat = now + self.config.heartbeat_s
        self._idle_gc.maybe_collect(now, idle=self._first_change_at is None and not self._background_work())
        if self.zk_state == KazooState.CONNECTED and not self._need_resync:
            self.synced_at_ms = now_ms
        payload = (now_ms, self._meta(now_ms), self._need_resync, self.gen)
        with self._heartbeat_lock:
            # The newest one wins: a heartbeat still queued behind a flush carries this one's status.
            queued = self._heartbeat_payload is not None
            self._heartbeat_payload = payload
        if not queued:
            self.flusher.submit(self._write_heartbeat)

    def _write_heartbeat(self) -> None:
        with self._heartbeat_lock:
            payload, self._heartbeat_payload = self._heartbeat_payload, None
        if payload is None:
            return
        now_ms, meta, need_resync, gen = payload
        # seq as written by now (the flushes before this job), not as when it was queued.
        meta["seq"] = self.seq
        try:
            # Written only over our own generation: if Redis restarted empty or was flushed, our
            # snapshot is gone (and the meta stays gone until the resync writes a new one).
            if gen and not self.writer.write_meta_of_gen(meta, gen) and not need_resync:
                self._resync_from_writer("Redis lost the snapshot")
            self.writer.prune_interest(now_ms)
        except redis.RedisError as exc:
            logger.warning("mirror of %s: Redis unavailable (%s)", self.cluster, exc)
            self._resync_from_writer("Redis unavailable")
            return
        status = {k: meta[k] for k in STATUS_KEYS} | {"resync_pending": need_resync}
        self.publisher.publish([(groups.status(self.cluster), {"type": protocol.STATUS, "status": status})])
