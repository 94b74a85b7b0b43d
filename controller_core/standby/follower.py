"""A candidate that keeps the failover's reads and its controller context current while it waits.

How it follows ZooKeeper, on the candidate's own session (the one its election runs on):

1. persistent recursive watches on ``/brokers`` and ``/admin`` (``zk.persistent_watch``) hand every
   changed path to ``_on_event`` on kazoo's connection thread, which only records it in ``pending``
   (one entry per path: a path changed 1,000 times before it is read is read once);
2. a full read (multi-reads) builds a ``ClusterView``; changes made during that read are pending;
3. the follower thread re-reads what is pending as a stream of multi-reads (several in flight, each
   sent with the oldest pending paths as soon as there is room) and applies each as it comes back,
   to the view and then to the controller context kept from it (``standby.warm_context``); once
   nothing is pending, the kept start-up requests of what changed are refreshed (``settle``).

While a follower runs, kazoo's connection reads many packets per ``recv`` (``zk.buffered_reads``):
~60,000 events in a second or two otherwise cost its thread seconds of CPU, under the GIL this
thread needs.

Garbage collection: the view and the kept context are ~130,000 tracked objects at 100,000 partitions
(more in a controller process), and a storm's allocations set off full collections that scanned them
all, holding the GIL for 50 to 270 ms each, one or two per 30,000 changes (a follower rig at load 5
to 7). So a full read or a drain runs with the collector paused, and after one that allocated many
objects they are collected and frozen (``gc_policy.EventGcPolicy``, the event thread's policy): later
passes scan only what changed since. A drain gives the collector its turn at least every
``MAX_DRAIN_S`` (it stops taking new reads until those in flight are applied).

Bounds: ``pending`` holds at most ``max_backlog`` distinct paths; past it the follower drops the
backlog and reloads everything (a reload costs one full read; an unbounded backlog costs memory
without bound). Lag: each applied change's ``now - mtime`` (the znode's modification time, written by
ZooKeeper's leader; same clock on one machine, else add the clock offset), kept for the last
``lag_window`` changes, plus the age of the oldest pending change.

Proving the view current (``catch_up``): ZooKeeper sends a session's watch events before any reply
to a request it answers later, so once a round trip on this session has returned, every change the
server had applied before it is pending or applied; when the follower has applied everything
recorded up to then, the view is current to that reply's zxid. Anything that breaks that chain
(connection lost: the server drops the watches; session lost; backlog overflow; paused while active;
a catch-up that times out) makes the follower *cold*: it says why (``status``), the failover does the
full reload instead, and the follower reloads itself when it is next a standby.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from controller_core.gc_policy import EventGcPolicy
from controller_core.model import BrokerRegistration
from controller_core.standby.view import FOLLOWED_ROOTS, ClusterView, Kind, Target, classify, full_read_paths
from controller_core.standby.warm_context import WarmContext
from controller_core.zk import paths
from controller_core.zk.buffered_reads import BufferedReads
from controller_core.zk.multiread import MultiReader, SubmittedRead
from controller_core.zk.persistent_watch import PersistentWatchTap, add_watch_async, remove_watches_async

logger = logging.getLogger(__name__)

DEFAULT_MAX_BACKLOG = 500_000
"""Distinct pending paths before a reload: a broker failure at 1,000,000 partitions rewrites ~333,000."""

SEND_EVERY_S = 0.02
"""While the oldest re-read is out, how often what was recorded meanwhile is sent (in one read)."""

MAX_DRAIN_S = 5.0
"""The longest one drain keeps the garbage collector paused (a storm that never ends gets passes)."""


class Handover(NamedTuple):
    """What a caught-up follower hands to the failover (``freeze``): the view, the controller context
    kept from it (None when it cannot be handed over: ``context_reason`` says why) and the zxid both
    are current to."""

    view: ClusterView
    context: WarmContext | None
    zxid: int
    context_reason: str


class StandbyFollower:
    """Follows ZooKeeper into a ``ClusterView`` while the candidate is not active.

    Example::

        follower = StandbyFollower(client)
        follower.start()                    # loads, then follows; status()["standby_state"] == "warm"
        if follower.catch_up():             # on winning the election (see standby.source)
            handover = follower.freeze()    # the view and the kept controller context
        ...
        follower.pause("active")            # while active; resume() after resigning
        follower.stop()
    """

    def __init__(
        self,
        client: KazooClient,
        *,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        read_chunk: int = 5_000,
        reads_in_flight: int = 8,
        lag_window: int = 50_000,
        catch_up_timeout_s: float = 10.0,
        reader: MultiReader | None = None,
        clock: Callable[[], float] = time.time,
        controller_id: int = -1,
        keep_context: bool = True,
    ) -> None:
        if max_backlog < 1:
            raise ValueError(f"max_backlog must be at least 1, not {max_backlog}")
        self._client = client
        self._reader = reader or MultiReader(client)
        self.max_backlog = max_backlog
        self.read_chunk = max(1, read_chunk)
        self.reads_in_flight = max(1, reads_in_flight)
        self.catch_up_timeout_s = catch_up_timeout_s
        self._clock = clock
        self._cond = threading.Condition()  # guards everything below that the connection thread touches
        self._apply_lock = threading.Lock()  # held while the view changes and while it is copied
        self._tap = PersistentWatchTap(client, FOLLOWED_ROOTS, self._on_event)
        self._buffered_reads = BufferedReads(client)  # many packets per recv: see zk.buffered_reads
        self._gc = EventGcPolicy()  # the collector paused while reading, then a pass and a freeze
        self._pending: dict[str, float] = {}  # path -> monotonic time first recorded
        self.events_received = 0
        self._taken = 0  # pending entries taken into read batches, cumulative
        self._done = 0  # ... of which applied
        self._generation = 0
        self._resync_needed = True
        self._paused = False
        self._stopped = True
        self._loaded = False
        self._warm = False
        self._state = "stopped"
        self._reason = "not started"
        self._view: ClusterView | None = None
        # The controller context kept from the view (``standby.warm_context``), changed with it.
        self.controller_id = controller_id
        self.keep_context = keep_context
        self._context: WarmContext | None = None
        self._thread: threading.Thread | None = None
        self._lags_ms: deque[float] = deque(maxlen=max(1, lag_window))
        # Event received -> applied, per changed path: the follower's own share of the lag (the rest is
        # ZooKeeper committing and delivering: mtime is set when the leader prepares the transaction).
        self._apply_lags_ms: deque[float] = deque(maxlen=max(1, lag_window))
        self.current_to_zxid = 0
        self.reloads = 0
        self.changes_applied = 0
        self.last_reload_ms = 0.0
        self.max_backlog_seen = 0

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> None:
        if not self._stopped:
            return
        self._stopped = False
        self._tap.install()
        self._buffered_reads.install()
        self._client.add_listener(self._on_session_state)
        self._set_cold("loading", "starting: full read")
        self._thread = threading.Thread(target=self._run, name="standby-follower", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            self._cond.notify_all()
        self._client.remove_listener(self._on_session_state)
        if self._thread is not None:
            self._thread.join(timeout=30)
        self._remove_watches()
        self._tap.uninstall()
        self._buffered_reads.uninstall()
        self._state, self._reason = "stopped", "stopped"

    def pause(self, reason: str = "active controller") -> None:
        """Stop following (this candidate is active: its own watches and reads take over)."""
        with self._cond:
            self._paused = True
            self._generation += 1
            self._pending.clear()
            self._warm = False
            self._state, self._reason = "paused", reason
        with self._apply_lock:  # a drain in progress finishes before the view is let go
            self._view = None
            self._context = None
            self._loaded = False
        if not self._stopped:
            self._remove_watches(wait=False)  # the failover never waits on it; the tap drops events anyway

    def resume(self) -> None:
        """Follow again from a full read (the candidate resigned or lost the controller)."""
        with self._cond:
            if not self._paused:
                return
            self._paused = False
            self._resync_needed = True
            self._state, self._reason = "loading", "standby again: full read"
            self._cond.notify_all()

    # -- what the controller asks --------------------------------------------------------------
    @property
    def is_warm(self) -> bool:
        return self._warm and not self._paused

    @property
    def reason(self) -> str:
        return self._reason

    def catch_up(self, timeout_s: float | None = None) -> bool:
        """Prove the view current to now (one round trip, then apply what it announced); False (and
        cold, with the reason) when it cannot be proven within ``timeout_s``.

        What "announced" means: the paths pending when the round trip returns are the oldest entries
        of ``pending`` (a path changed again keeps its place), so once batches have taken and applied
        that many more entries, every change made before the round trip is in the view, even while
        new changes keep arriving behind them (an ISR-change storm does not delay a takeover).
        """
        timeout = self.catch_up_timeout_s if timeout_s is None else timeout_s
        with self._cond:
            if not self.is_warm:
                return False
            generation = self._generation
        try:
            self._client.exists(paths.BROKERS_PATH)  # every earlier change's event is recorded by now
        except Exception as exc:
            self._fall_back(generation, f"catch-up round trip failed: {exc!r}")
            return False
        zxid = self._client.last_zxid
        deadline = time.monotonic() + timeout
        with self._cond:
            target = self._taken + len(self._pending)
            while self._done < target and self._generation == generation and self._warm:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._cond.wait(left)
            if self._generation != generation or not self._warm:
                return False
            behind = target - self._done
            if behind <= 0:
                self.current_to_zxid = max(self.current_to_zxid, zxid)
                return True
        self._fall_back(generation, f"catch-up not done in {timeout:.1f} s ({behind:,} changed paths behind)")
        return False

    def freeze(self) -> Handover | None:
        """Stop following and hand over the view and the context as they are (call right after a
        successful ``catch_up``); None when not warm."""
        with self._cond:
            if not self.is_warm or self._view is None:
                return None
            view, context, zxid = self._view, self._context, self.current_to_zxid
        self.pause("active controller (took over from the warm context)")
        # The follower thread no longer touches either (``pause`` waited for the apply lock).
        if context is None:
            reason = "no context kept" if not self.keep_context else "context not built"
        else:
            reason = context.broken or ""
        return Handover(view, context if context is not None and context.broken is None else None, zxid, reason)

    def brokers(self) -> dict[int, BrokerRegistration]:
        with self._apply_lock:
            return dict(self._view.brokers) if self._view is not None else {}

    def topic_names(self) -> set[str]:
        with self._apply_lock:
            return set(self._view.topics) if self._view is not None else set()

    def snapshot_for_tests(self) -> ClusterView | None:
        """The live view (tests compare it with a full read once the follower is caught up)."""
        return self._view

    def context_for_tests(self) -> WarmContext | None:
        """The live kept context (tests compare it with a cold load once the follower is caught up)."""
        return self._context

    def status(self) -> dict[str, Any]:
        with self._cond:
            backlog = len(self._pending) + (self._taken - self._done if self._loaded else 0)  # + being read
            oldest = next(iter(self._pending.values()), None)
            lags = list(self._lags_ms)
            apply_lags = list(self._apply_lags_ms)
        # Sorted outside the lock: kazoo's connection thread takes it for every event.
        lags.sort()
        apply_lags.sort()
        now = time.monotonic()
        view = self._view
        return {
            "standby_state": self._state,
            "standby_warm": "1" if self.is_warm else "0",
            "standby_reason": self._reason,
            "standby_backlog": backlog,
            "standby_backlog_max": self.max_backlog_seen,
            "standby_lag_ms": round((now - oldest) * 1000, 1) if oldest is not None else 0,
            "standby_lag_p50_ms": _percentile(lags, 0.50),
            "standby_lag_p99_ms": _percentile(lags, 0.99),
            "standby_lag_max_ms": round(lags[-1], 1) if lags else 0,
            "standby_apply_lag_p99_ms": _percentile(apply_lags, 0.99),
            "standby_zxid": self.current_to_zxid,
            "standby_reloads": self.reloads,
            "standby_last_reload_ms": round(self.last_reload_ms, 1),
            "standby_changes_applied": self.changes_applied,
            "standby_partition_states": view.partition_state_count if view is not None else 0,
            "standby_context": _context_status(self._context, self.keep_context),
        }

    def lag_samples_ms(self) -> list[float]:
        with self._cond:
            return list(self._lags_ms)

    def reset_lag_samples(self) -> None:
        with self._cond:
            self._lags_ms.clear()
            self._apply_lags_ms.clear()
            self.max_backlog_seen = 0

    # -- kazoo's connection thread -----------------------------------------------------------------
    def _on_event(self, event_type: int, path: str) -> None:
        cond = self._cond
        with cond:
            if self._paused or self._stopped:
                return
            pending = self._pending
            if path not in pending:
                if len(pending) >= self.max_backlog:
                    self._overflow_locked()
                    return
                pending[path] = time.monotonic()
                self.max_backlog_seen = max(self.max_backlog_seen, len(pending))
            self.events_received += 1
            if len(pending) == 1:
                cond.notify_all()

    def _overflow_locked(self) -> None:
        count = len(self._pending)
        self._pending.clear()
        self._generation += 1
        self._resync_needed = True
        self._warm = False
        self._state, self._reason = "cold", f"backlog overflow ({count:,} changed paths pending): full reload"
        logger.warning("standby: %s", self._reason)
        self._cond.notify_all()

    def _on_session_state(self, state: str) -> None:
        if state == KazooState.CONNECTED:
            return
        why = "ZooKeeper session lost" if state == KazooState.LOST else "ZooKeeper connection lost"
        with self._cond:
            if self._paused or self._stopped:
                return
            self._generation += 1
            self._pending.clear()
            self._resync_needed = True
            self._warm = False
            self._state, self._reason = "cold", f"{why}: watches dropped, full reload on reconnect"
            self._cond.notify_all()
        logger.warning("standby: %s", self._reason)

    # -- follower thread ---------------------------------------------------------------------------
    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._stopped and (self._paused or (not self._resync_needed and not self._pending)):
                    self._cond.wait()
                if self._stopped:
                    return
                resync = self._resync_needed
            try:
                with self._gc.around_event():
                    if resync:
                        self._resync()
                    else:
                        self._drain()
                self._gc.collect_pending()
            except Exception as exc:
                with self._cond:
                    if self._stopped:
                        return
                    if not self._paused:
                        self._generation += 1
                        self._resync_needed = True
                        self._warm = False
                        self._state, self._reason = "cold", f"follow failed ({exc!r}); retrying a full read"
                logger.warning("standby: %s", self._reason)
                time.sleep(0.5)

    def _resync(self) -> None:
        started = time.perf_counter()
        with self._cond:
            self._resync_needed = False
            self._pending.clear()
            generation = self._generation
            self._state = "loading"
        client = self._client
        # Watches first: a change made during the read below is then pending and re-read after it.
        for root in FOLLOWED_ROOTS:
            add_watch_async(client, root).get(timeout=self._reader.timeout)
        view = ClusterView()
        broker_ids = [int(c) for c in _children(client, paths.BROKER_IDS_PATH) if c.isdigit()]
        topics = _children(client, paths.TOPICS_PATH)
        deletions = _children(client, paths.DELETE_TOPICS_PATH)
        first = full_read_paths(broker_ids, topics, deletions)
        self._read_into(view, [path for path, _ in first], [target for _, target in first])
        if self._generation != generation or self._paused or self._stopped:
            return  # the loop decides what next
        partitions = list(view.assigned_partitions())
        state_paths = [paths.partition_state_path(tp) for tp in partitions]
        self._read_into(view, state_paths, [Target(Kind.STATE, tp) for tp in partitions], size_hint=96)
        if self._generation != generation or self._paused or self._stopped:
            return  # paused during the read (this candidate was elected and reads for itself)
        zxid = client.last_zxid
        # Built on this thread before it is installed: what changes meanwhile is pending and re-read next.
        context = WarmContext.load(self.controller_id, view) if self.keep_context else None
        with self._cond, self._apply_lock:
            if generation != self._generation or self._paused:
                return  # connection lost or paused meanwhile: the loop decides what next
            self._view = view
            self._context = context
            self._loaded = True
            self._done = self._taken  # the read covers everything before it; what is pending is re-read next
            self.reloads += 1
            self.last_reload_ms = (time.perf_counter() - started) * 1000
            if not self._pending:
                self._mark_warm_locked(zxid)
        logger.info(
            "standby: full read in %.0f ms (%s)",
            self.last_reload_ms,
            ", ".join(f"{k} {v:,}" for k, v in view.summary().items()),
        )

    def _drain(self) -> None:
        """Re-read what changed as a stream: up to ``reads_in_flight`` multi-reads of ``read_chunk``
        paths each, every one sent as soon as there is room with the oldest pending paths, and applied
        in the order sent (FIFO: ``_done`` counts applied entries in the order they were taken, which
        ``catch_up`` relies on). While the oldest read is out, what is recorded meanwhile is sent
        every ``SEND_EVERY_S`` (there is room): ZooKeeper answers it right behind, instead of after
        that read came back and was applied. Returns when nothing is pending or in flight."""
        with self._cond:
            if not self._loaded:
                self._resync_needed = True
                return
            generation = self._generation
        view = self._view
        if view is None:
            return
        in_flight: deque[tuple[dict[str, float], SubmittedRead]] = deque()
        take_until = time.monotonic() + MAX_DRAIN_S
        first = True
        while True:
            taken: list[dict[str, float]] = []
            with self._cond:
                while True:
                    if generation != self._generation or self._stopped:
                        return  # what is in flight is dropped; the loop decides what next
                    pending = self._pending
                    taking, first = first or time.monotonic() < take_until, False
                    while taking and pending and len(in_flight) + len(taken) < self.reads_in_flight:
                        if len(pending) <= self.read_chunk:
                            # Swap the dict, O(1); popping from its front one by one is O(n) each
                            # (a dict skips its deleted slots from the start).
                            chunk, pending = pending, {}
                            self._pending = pending
                        else:
                            chunk = dict(itertools.islice(pending.items(), self.read_chunk))
                            for path in chunk:
                                del pending[path]
                        self._taken += len(chunk)
                        taken.append(chunk)
                    if taken or not in_flight or in_flight[0][1].ready():
                        break
                    # The oldest read is out: until it is in, send what is recorded meanwhile.
                    self._cond.wait(SEND_EVERY_S)
                if not taken and not in_flight:
                    break  # nothing pending, or MAX_DRAIN_S passed: the loop calls again after a collection
            for chunk in taken:
                read = self._reader.submit_data(list(chunk), size_hint=96)
                read.when_ready(self._notify)
                in_flight.append((chunk, read))
            if not in_flight[0][1].ready():
                continue
            chunk, receive = in_flight.popleft()
            results = receive()
            if not self._apply_chunk(view, chunk, results, generation):
                return
            zxid = self._client.last_zxid
            with self._cond:
                if generation != self._generation:
                    return
                self._done += len(chunk)
                self.changes_applied += len(chunk)
                if not self._pending and not in_flight:
                    self._mark_warm_locked(zxid)
                self._cond.notify_all()
        # Caught up (or MAX_DRAIN_S passed): the kept requests of what this drain changed, once each.
        with self._apply_lock:
            if generation == self._generation and self._view is view and self._context is not None:
                self._context.settle()

    def _notify(self) -> None:
        """A read is in (kazoo's completion thread): the drain applies it or sends what is recorded."""
        with self._cond:
            self._cond.notify_all()

    def _apply_chunk(self, view: ClusterView, received: dict[str, float], results: list[Any], generation: int) -> bool:
        """Apply one read's results (``received``: path -> when its event was recorded); False when
        the view was let go meanwhile."""
        now_ms = self._clock() * 1000
        lags: list[float] = []
        with self._apply_lock:
            if generation != self._generation or self._view is not view:
                return False
            apply = view.apply
            targets: list[Target] = []
            for path, read in zip(received, results, strict=True):
                target = classify(path)
                if target is None:
                    continue  # a parent, /brokers/seqid...: read for nothing (rare, cheap)
                apply(target, read)
                targets.append(target)
                if read.stat is not None:
                    lags.append(max(0.0, now_ms - read.stat.mtime))
            if self._context is not None:
                self._context.apply_all(targets, view)
        applied_at = time.monotonic()
        with self._cond:
            self._lags_ms.extend(lags)
            self._apply_lags_ms.extend((applied_at - t) * 1000 for t in received.values())
        return True

    def _mark_warm_locked(self, zxid: int) -> None:
        self.current_to_zxid = max(self.current_to_zxid, zxid)
        if not self._warm:
            self._warm = True
            self._state, self._reason = "warm", "following ZooKeeper"
        self._cond.notify_all()

    def _read_into(
        self, view: ClusterView, read_paths: Sequence[str], targets: Sequence[Target], *, size_hint: int = 256
    ) -> None:
        """A full read's paths into ``view``, each multi-read's results applied as they come back; it
        stops early once the follower is paused or stopped (the caller checks and discards the view)."""
        pos = 0
        for results in self._reader.iter_data(read_paths, size_hint=size_hint):
            if self._paused or self._stopped:
                return
            end = pos + len(results)
            with self._apply_lock:
                apply = view.apply
                for target, read in zip(targets[pos:end], results, strict=True):
                    apply(target, read)
            pos = end

    def _fall_back(self, generation: int, reason: str) -> None:
        with self._cond:
            if generation == self._generation:
                self._warm = False
                self._state, self._reason = "cold", reason
        logger.warning("standby: %s", reason)

    def _set_cold(self, state: str, reason: str) -> None:
        with self._cond:
            self._warm = False
            self._state, self._reason = state, reason

    def _remove_watches(self, *, wait: bool = True) -> None:
        for root in FOLLOWED_ROOTS:
            try:
                pending = remove_watches_async(self._client, root)
                if wait:
                    pending.get(timeout=5)
            except Exception as exc:  # NOWATCHER, or no connection (the server dropped them anyway)
                logger.debug("standby: RemoveWatches %s: %r", root, exc)


def _context_status(context: WarmContext | None, kept: bool) -> str:
    """``kept`` (a takeover swaps it in), ``broken: why`` (the takeover reads everything) or ``none``."""
    if context is None:
        return "none" if not kept else "not built"
    return "kept" if context.broken is None else f"broken: {context.broken}"


def _children(client: KazooClient, path: str) -> list[str]:
    from kazoo.exceptions import NoNodeError

    try:
        return list(client.get_children(path))
    except NoNodeError:
        return []


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return round(sorted_values[index], 1)


def describe(status: Mapping[str, Any]) -> str:
    """One line for logs: ``warm, lag 3 ms`` / ``cold (why)``."""
    if status.get("standby_warm") == "1":
        return f"warm, lag {status.get('standby_lag_ms', 0)} ms"
    return f"{status.get('standby_state', 'cold')} ({status.get('standby_reason', '')})"
