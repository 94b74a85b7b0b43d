"""The mirror: ZooKeeper (and the controller's stream) in, a Redis snapshot and ordered deltas out.

One thread owns the ``MirrorState`` and processes ``events`` in order; ZooKeeper watches, the
session listener and the stream follower only enqueue. The loop:

1. Resync when needed (start, ZooKeeper session lost, Redis flushed or failing): read the whole tree
   in bulk, replay the stream from the last controller snapshot (managed mode), write a full
   snapshot with a new generation, tell every page to refetch.
2. Apply events; coalesce what they change.
3. Flush when the oldest unflushed change is ``window_s`` old: one Redis transaction, then one
   message per watched scope, all with the next sequence number.
4. Every ``heartbeat_s``: store staleness (ZooKeeper state, time of the last confirmed sync), check
   that Redis still holds our generation, and broadcast the status to the pages.

How partition states stay fresh without a watch per state znode: ``reads.py``.
"""

from __future__ import annotations

import functools
import itertools
import logging
import queue
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from typing import Any

import redis
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.protocol.states import KazooState, WatchedEvent

from controller_core.gc_policy import gc_paused
from controller_core.model import TopicPartition
from controller_core.zk import paths
from controller_core.zk.multiread import MultiReader
from dashboard.clusters import layout
from dashboard.lib.redis_keys import state_change_stream_key
from dashboard.live import groups, protocol
from workers.mirror import gc_policy, zksource
from workers.mirror.config import MirrorConfig
from workers.mirror.deltas import DeltaBuilder
from workers.mirror.events import (
    AdminChanged,
    BrokersChanged,
    ControllerChanged,
    MirrorEvent,
    Resync,
    SessionStateChanged,
    StateChanged,
    Stop,
    StreamRecords,
    TopicChanged,
    TopicsChanged,
    Wakeup,
)
from workers.mirror.flushing import StatusAndFlush
from workers.mirror.publish import Publisher
from workers.mirror.reads import StateReads, member_tp
from workers.mirror.snapshot import SnapshotWriter
from workers.mirror.state import MANAGED, OBSERVED, MirrorState
from workers.mirror.stream import RecordGuard, StreamFollower, decode_entries, replay_start
from workers.mirror.writer_thread import WriterThread

__all__ = ["Mirror", "MirrorConfig"]

logger = logging.getLogger(__name__)


class Mirror(StateReads, StatusAndFlush):
    """Mirror one cluster; ``run()`` blocks, ``start()``/``stop()`` use a thread of its own.

    Example::

        mirror = Mirror(MirrorConfig("demo", mode="managed"), zk, redis_client, publisher)
        mirror.start()       # zk must be started; the mirror resyncs first
        ...
        mirror.stop()
    """

    def __init__(
        self,
        config: MirrorConfig,
        zk: KazooClient,
        redis_client: redis.Redis,
        publisher: Publisher,
        clock: Callable[[], float] = time.time,
        owner: str = "",
    ) -> None:
        self.config = config
        self.cluster = config.cluster
        self.zk = zk
        self.redis = redis_client
        self.publisher = publisher
        self.clock = clock
        self.owner = owner or uuid.uuid4().hex[:8]
        self.state = MirrorState(self.cluster, config.mode, config.default_min_isr)
        self.writer = SnapshotWriter(redis_client, self.cluster)
        self.builder = DeltaBuilder(self.cluster)
        self.reader = MultiReader(zk)
        self.events: queue.SimpleQueue[MirrorEvent] = queue.SimpleQueue()
        # Redis writes (flushes, heartbeats) in order on a thread of their own (flushing.py).
        self.flusher = WriterThread(f"mirror-{self.cluster}-writer", self._wake, self._resync_from_writer)
        self._write_failed = False
        self._heartbeat_payload: tuple[int, dict[str, Any], bool, str] | None = None
        self._heartbeat_lock = threading.Lock()
        self.follower: StreamFollower | None = (
            StreamFollower(redis_client, self.cluster, self.events.put) if config.mode == MANAGED else None
        )
        self.seq = 0
        self.gen = ""
        self.resyncs = 0
        self.zk_state = KazooState.CONNECTED if zk.connected else KazooState.LOST
        # kazoo drops every watch when the connection drops, even when the session survives.
        self._watches_dropped = False
        self.synced_at_ms = 0
        self.last_flush_lag_ms = 0.0
        self.stream_lag_ms = 0.0
        self.stream_id = "0-0"
        self.flushes = 0
        self._need_resync = True
        self._resync_reason = "start"
        self._first_change_at: float | None = None
        self._timers: list[tuple[float, int, Callable[[], None]]] = []
        self._timer_ids = itertools.count()
        self._confirm: set[TopicPartition] = set()
        self._confirm_due = False
        self._sweep: deque[TopicPartition] = deque()
        # Partitions to re-read soon, deduplicated, read a chunk per loop turn so the loop stays live.
        self._pending_reads: dict[TopicPartition, None] = {}
        # Rows to re-derive after a broker change, a chunk per loop turn (ordered, deduplicated: a
        # row the controller's stream rewrites first is dropped from it, see ``_apply_stream``):
        # those whose leader came or went first, then (after any changed state znodes are read)
        # those that only host a replica on the broker (``reads.StateReads._sweep_some``).
        self._refresh_queue: dict[str, None] = {}
        self._refresh_later: dict[str, None] = {}
        self._next_heartbeat = 0.0
        self._next_sweep = 0.0
        self._idle_gc = gc_policy.IdleCollector(config.gc_interval_s)
        self._storm_gc = gc_policy.StormPause()
        self._watched: set[str] = set()
        self._watched_at = 0.0
        # Observed mode: partitions whose state znode carries our one-shot watch right now, and
        # those whose watch fired: read before any other queued read (they are known to have changed,
        # while a broker change's follow-up reads of 10,000 partitions mostly confirm).
        self._state_watches: set[TopicPartition] = set()
        self._changed_reads: dict[TopicPartition, None] = {}
        # Those whose watch fired again after their read (read first: ``reads._state_changed``), and
        # the watched partitions whose watch fired at least once (until they have a live leader).
        self._refired_reads: dict[TopicPartition, None] = {}
        self._fired: set[TopicPartition] = set()
        self._watch_queue: dict[TopicPartition, None] = {}
        # The zxid the queued watches are armed relative to: seen before the broker change that
        # queued them was read, so a state written since (before the watch is armed) fires at once.
        self._watch_since = 0
        self._reads_in_flight: deque[tuple[list[TopicPartition], list[str], int, Callable[[], list[Any]]]] = deque()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.ready = threading.Event()

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name=f"mirror-{self.cluster}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stopped.set()
        self.events.put(Stop())
        if self._thread is not None:
            self._thread.join(timeout)
        if self.follower is not None:
            self.follower.stop()
        self.zk.remove_listener(self._on_session)

    def run(self) -> None:
        self.zk.add_listener(self._on_session)
        logger.info("mirror of %s starting (%s mode)", self.cluster, self.config.mode)
        self.flusher.start()
        try:
            self._loop()
        finally:
            self._storm_gc.release()
            self.flusher.stop()
        logger.info("mirror of %s stopped", self.cluster)

    def _wake(self) -> None:
        self.events.put(Wakeup())

    def _loop(self) -> None:
        while not self._stopped.is_set():
            try:
                self._iteration()
            except (KazooException, redis.RedisError, OSError) as exc:
                logger.warning("mirror of %s: %s; resyncing", self.cluster, exc)
                self._request_resync(f"{type(exc).__name__}: {exc}")
                self._stopped.wait(0.5)
            except Exception:
                logger.exception("mirror of %s failed an iteration; resyncing", self.cluster)
                self._request_resync("internal error")
                self._stopped.wait(1.0)

    def _iteration(self) -> None:
        if self._need_resync and self.zk.connected:
            self.full_sync(self._resync_reason)
        now = self.clock()
        timeout = self._next_heartbeat - now
        if self._first_change_at is not None and not self.flusher.flushing:
            timeout = min(timeout, self._first_change_at + self.config.window_s - now)
        if self._timers:
            timeout = min(timeout, self._timers[0][0] - now)
        if self._background_work():
            timeout = 0.0
        try:
            event: MirrorEvent | None = self.events.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            event = None
        deadline = self.clock() + self.config.window_s / 2
        while event is not None:
            if isinstance(event, Stop):
                self._stopped.set()
                return
            self._handle(event)
            self._note_change()
            if self._flush_due() or self.clock() > deadline:
                break
            try:
                event = self.events.get_nowait()
            except queue.Empty:
                event = None
        self._run_timers()
        self._sweep_some()
        self._note_change()
        if self._flush_due():
            self.flush()
        now = self.clock()
        if now >= self._next_heartbeat:
            self.heartbeat()
        busy = self._first_change_at is not None or self.flusher.flushing or self._queued_work()
        self._storm_gc.update(now, busy)

    def _note_change(self) -> None:
        if self._first_change_at is None and self.state.has_changes:
            self._first_change_at = self.clock()

    def _flush_due(self) -> bool:
        """The window is over and the previous flush is written (until then, changes coalesce)."""
        first = self._first_change_at
        return first is not None and not self.flusher.flushing and self.clock() >= first + self.config.window_s

    # -- watches and listeners (other threads: enqueue only) ------------------------------------
    def _on_session(self, state: str) -> None:
        self.events.put(SessionStateChanged(state))

    def _on_watch(self, event: WatchedEvent) -> None:
        path = event.path or ""
        if path in (paths.CONTROLLER_PATH, paths.CONTROLLER_EPOCH_PATH):
            self.events.put(ControllerChanged())
        elif path == paths.BROKER_IDS_PATH or path.startswith(paths.BROKER_IDS_PATH + "/"):
            self.events.put(BrokersChanged())
        elif path == paths.TOPICS_PATH:
            self.events.put(TopicsChanged())
        elif path.startswith(paths.TOPICS_PATH + "/"):
            self.events.put(TopicChanged(path[len(paths.TOPICS_PATH) + 1 :].split("/", 1)[0]))
        elif path == paths.ADMIN_PATH or path.startswith(paths.ADMIN_PATH + "/"):
            self.events.put(AdminChanged())

    # -- event handling -------------------------------------------------------------------------
    def _handle(self, event: MirrorEvent) -> None:
        match event:
            case SessionStateChanged(state=state):
                self._on_session_state(state)
            case Resync(reason=reason):
                self._request_resync(reason)
            case _ if self._need_resync:
                return  # the coming resync reads everything anyway
            case ControllerChanged():
                self._load_controller()
            case BrokersChanged():
                self._load_brokers()
            case TopicsChanged():
                self._load_topic_names()
            case TopicChanged(topic=topic):
                self._load_topics([topic])
            case AdminChanged():
                self._load_admin()
            case StateChanged(tp=tp):
                self._state_changed(tp)
            case StreamRecords():
                self._apply_stream(event)

    def _on_session_state(self, state: str) -> None:
        self.zk_state = state
        if state == KazooState.LOST:
            # Watches died with the session and changes may have been missed: rebuild on reconnect.
            self._request_resync("ZooKeeper session lost")
        elif state == KazooState.SUSPENDED:
            self._watches_dropped = True
        elif state == KazooState.CONNECTED and self._watches_dropped:
            # Same session, but kazoo discarded every watch on the drop (firing them with no path):
            # without a resync the mirror would never hear of a new topic or broker again.
            self._watches_dropped = False
            self._request_resync("ZooKeeper connection lost (watches dropped)")
        self.heartbeat()

    def _load_controller(self) -> None:
        controller_id, epoch = zksource.read_controller(self.zk, self._on_watch)
        changed = (controller_id, epoch) != (self.state.controller_id, self.state.controller_epoch)
        self.state.set_controller(controller_id, epoch)
        if changed and self.config.mode == OBSERVED:
            # A new controller re-elects leaders it finds offline: look again shortly. (A managed
            # cluster's new controller reports its states in the stream.)
            self._schedule_followups(list(self._all_partitions()))

    def _load_brokers(self) -> None:
        before = self.state.live
        seen = self.zk.last_zxid  # before the read: a state written after the broker change is newer
        members = self.state.set_brokers(zksource.read_brokers(self.zk, self._on_watch), defer=True)
        changed = before ^ self.state.live
        if not changed:
            return
        # Rows whose leader came or went first (the page's offline count), the rest later.
        rows = self.state.partitions
        led = [m for m in members if (row := rows.get(m)) is not None and row.leader in changed]
        self._refresh_queue.update(dict.fromkeys(led))
        self._refresh_later.update(dict.fromkeys(m for m in members if m not in self._refresh_queue))
        affected: set[str] = set()
        for broker in changed:
            affected |= self.state.hosting.get(broker, set())
        if self.config.mode == OBSERVED:
            # Partitions from their rows, not by parsing 50,000 member names (3-4 us each: most of
            # this handler's time, and the failover's first re-derivation waits for it).
            tps = {m: TopicPartition(row.topic, row.partition) for m in affected if (row := rows.get(m)) is not None}
            partitions = list(tps.values())
            # Watch the ones left without a live leader first, before the queued reads get to them
            # (50,000 reads take seconds at 100,000 partitions): the controller's next write to one
            # of them is then read first, whenever it comes. Only those whose leader was on the
            # broker (the others keep a live leader), armed before their rows are re-derived and
            # relative to a zxid seen before this change: a row whose watch fired by the time the
            # re-derivation gets to it is not re-derived, its read does that work once.
            self._watch_since = min(self._watch_since, seen) if self._watch_queue else seen
            self._watch_queue.update(dict.fromkeys(tps[m] if m in tps else member_tp(m) for m in led))
            self._reread(partitions)
            self._schedule_followups(partitions)
        else:
            # The controller's stream reports the elections and ISR shrinks this causes; one late
            # look at what still looks leaderless catches a controller that is down or lost records.
            # (Member names are kept as they are: parsing 50,000 of them here would delay the
            # stream's first records of the failover, which is what the page is waiting for.)
            for delay in self.config.managed_followups:
                self._at(delay, functools.partial(self._reread_unresolved, affected))

    def _load_topic_names(self) -> None:
        new = self.state.set_topic_names(zksource.read_topic_names(self.zk, self._on_watch))
        if new:
            self._load_topics(new)

    def _load_topics(self, topics: list[str]) -> None:
        found = zksource.read_topics(self.zk, topics, self._on_watch)
        present = [t for t, got in found.items() if got is not None]
        min_isr = zksource.read_min_isr(self.reader, present) if present else {}
        new_partitions: list[TopicPartition] = []
        for topic, got in found.items():
            if got is None:
                self.state.remove_topic(topic)
                continue
            topic_id, assignment = got
            new_partitions += self.state.set_topic(topic, topic_id, assignment, min_isr.get(topic))
        if new_partitions:
            self._reread(new_partitions)
            # The controller writes first leaders just after the topic appears.
            self._schedule_followups(new_partitions, (0.5, 2.0))

    def _load_admin(self) -> None:
        admin = zksource.read_admin(self.zk, self._on_watch)
        self.state.set_deleting(admin["delete_topics"])
        reassign = admin["reassign_partitions"]
        self.state.set_admin_reassignment(reassign)
        self.state.set_admin(
            "reassign_partitions",
            [{"topic": tp.topic, "partition": tp.partition, "replicas": list(r)} for tp, r in reassign.items()] or None,
        )
        preferred = sorted(admin["preferred_replica_election"])
        self.state.set_admin(
            "preferred_replica_election",
            [{"topic": tp.topic, "partition": tp.partition} for tp in preferred] or None,
        )

    def _apply_stream(self, event: StreamRecords) -> None:
        if self.follower is None or event.run != self.follower.run:
            return
        self.state.apply_records(event.records)
        self.stream_id = event.last_id
        refresh, later = self._refresh_queue, self._refresh_later
        for rec in event.records:
            if rec.get("leader_after") is not None and rec.get("topic") is not None:
                self._confirm.add(TopicPartition(str(rec["topic"]), int(rec["partition"])))
            if (refresh or later) and rec.get("topic") is not None and rec.get("partition") is not None:
                # Committing a record re-derived and recounted the row with the current brokers:
                # the refresh a broker change queued for it would only repeat that work.
                m = layout.member(str(rec["topic"]), int(rec["partition"]))
                refresh.pop(m, None)
                later.pop(m, None)
        if event.records:
            ts = event.records[-1].get("ts")
            if isinstance(ts, int | float):
                self.stream_lag_ms = max(self.clock() * 1000.0 - ts, 0.0)
        if self._confirm and not self._confirm_due:
            self._confirm_due = True
            self._at(self.config.confirm_delay_s, self._run_confirm)

    def _run_confirm(self) -> None:
        self._confirm_due = False
        partitions, self._confirm = list(self._confirm), set()
        self._reread(partitions)

    # -- resync ---------------------------------------------------------------------------------
    def full_sync(self, reason: str) -> None:
        """Rebuild everything from ZooKeeper (and the stream), then write a whole new snapshot.

        With the collector paused throughout: the snapshot is hundreds of thousands of objects,
        long-lived and free of cycles (the old one is freed by reference counting), and the pause
        also keeps the other mirrors of this worker from a full collection meanwhile (gc_policy.py).
        """
        with gc_paused():
            self._full_sync(reason)
            gc_policy.settle_after_sync()  # what the sync built: scanned once at most, then frozen
        self._idle_gc.synced(self.clock())
        self.ready.set()

    def _full_sync(self, reason: str) -> None:
        started = self.clock()
        logger.info("mirror of %s: full resync (%s)", self.cluster, reason)
        if not self.flusher.drain():  # a flush still being written must not land after the rewrite
            raise redis.TimeoutError("the mirror's Redis writer did not finish within 30 s")
        self._write_failed = False
        self._timers.clear()
        self._sweep.clear()
        self._pending_reads.clear()
        self._refresh_queue.clear()
        self._refresh_later.clear()
        self._confirm.clear()
        self._state_watches.clear()  # watches still set only cause a harmless extra read
        self._changed_reads.clear()
        self._refired_reads.clear()
        self._fired.clear()
        self._watch_queue.clear()
        self._reads_in_flight.clear()  # answers of the old session or tree: not applied
        state = MirrorState(self.cluster, self.config.mode, self.config.default_min_isr)
        state.begin_bulk()
        self.state = state
        watch = self._on_watch
        controller_id, epoch = zksource.read_controller(self.zk, watch)
        state.set_controller(controller_id, epoch)
        state.set_brokers(zksource.read_brokers(self.zk, watch))
        names = zksource.read_topic_names(self.zk, watch)
        state.set_topic_names(names)
        self._load_topics_bulk(state, names)
        self._load_admin()
        state.apply_state_reads(zksource.read_states(self.reader, list(self._all_partitions())))
        last_id = self._replay_stream(state) if self.follower is not None else "0-0"
        state.end_bulk()
        state.forget_early_states()
        gen = uuid.uuid4().hex[:12]
        seq = max(self.seq, self.writer.last_seq()) + 1
        now_ms = int(self.clock() * 1000)
        self.seq, self.gen = seq, gen
        self.zk_state = KazooState.CONNECTED if self.zk.connected else self.zk_state
        self.synced_at_ms = now_ms
        self.resyncs += 1
        self.writer.write_full(state, self._meta(now_ms) | {"last_resync_reason": reason})
        state.mark_flushed_all()
        self.builder.reset(gen, seq)
        self._first_change_at = None
        self._need_resync = False
        self._next_sweep = self.clock() + self.config.sweep_interval_s
        if self.follower is not None:
            self.stream_id = last_id
            self.follower.restart(last_id)
        self.publisher.publish([(groups.status(self.cluster), {"type": protocol.RESYNC, "gen": gen})])
        logger.info(
            "mirror of %s: resynced %d partitions, %d topics, %d brokers in %.2f s (gen %s, seq %d)",
            self.cluster,
            len(state.partitions),
            len(state.topics),
            len(state.live),
            self.clock() - started,
            gen,
            seq,
        )

    def _load_topics_bulk(self, state: MirrorState, names: list[str]) -> None:
        found = zksource.read_topics(self.zk, names, self._on_watch)
        present = [t for t, got in found.items() if got is not None]
        min_isr = zksource.read_min_isr(self.reader, present) if present else {}
        for topic, got in found.items():
            if got is not None:
                state.set_topic(topic, got[0], got[1], min_isr.get(topic))

    def _replay_stream(self, state: MirrorState) -> str:
        """Apply the stream from the newest controller snapshot on; return the last id applied."""
        key = state_change_stream_key(self.cluster)
        start = replay_start(self.redis, self.cluster, self.config.replay_max)
        last_id = "0-0"
        lower = start
        guard = RecordGuard()  # copies of a resent batch can straddle two pages
        while True:
            entries: Any = self.redis.xrange(key, min=lower, max="+", count=5_000)
            if not entries:
                break
            state.apply_records(decode_entries(entries, guard))
            last_id = entries[-1][0].decode()
            lower = f"({last_id}"
        if last_id == "0-0":
            info: Any = self.redis.xinfo_stream(key) if self.redis.exists(key) else None
            if info is not None:
                last = info.get("last-generated-id") or info.get(b"last-generated-id")
                if last:
                    last_id = last.decode() if isinstance(last, bytes) else str(last)
        return last_id
