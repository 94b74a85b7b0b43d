"""How the mirror keeps partition states fresh from ZooKeeper without a watch per state znode.

Why a module of its own: this is the mirror's read scheduling (queued re-reads a chunk per loop
turn, follow-ups on a timer, the periodic sweep, and in observed mode one-shot watches on the state
znodes of partitions without a live leader), separate from event handling, resync and flushing in
``mirror.py``.

How partition states stay fresh without a watch per state znode (``zksource`` explains why):

* managed mode: the controller's stream reports every transition, election and ISR change at once;
  partitions it names are re-read from ZooKeeper shortly after to confirm (never regressing);
* both modes: a broker or controller change re-reads the affected partitions at once and again on a
  short schedule (the new controller's elections land within seconds); new partitions are read
  when their topic appears; and a sweep re-reads every state in chunks every ``sweep_s``.

``StateReads`` is a base of ``Mirror`` and runs only on the mirror's thread (the watch callback
only enqueues).
"""

from __future__ import annotations

import functools
import heapq
import itertools
import queue
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

from kazoo.client import KazooClient
from kazoo.protocol.states import WatchedEvent

from controller_core.model import TopicPartition
from controller_core.zk import paths
from controller_core.zk.multiread import DataResult, MultiReader
from controller_core.zk.poll_handler import inline_watch
from controller_core.zk.setwatches import set_node_watches
from dashboard.clusters import layout
from workers.mirror import zksource
from workers.mirror.config import MirrorConfig
from workers.mirror.events import MirrorEvent, StateChanged
from workers.mirror.state import MANAGED, OBSERVED, MirrorState, StateRead


def member_tp(m: str) -> TopicPartition:
    """A snapshot member name (``layout.member``) as a ``TopicPartition``."""
    topic, partition, _ = layout.parse_member(m)
    return TopicPartition(topic, partition)


class StateReads:
    """The read scheduling half of ``Mirror`` (which sets every attribute below in its ``__init__``)."""

    config: MirrorConfig
    state: MirrorState
    zk: KazooClient
    reader: MultiReader
    events: queue.SimpleQueue[MirrorEvent]
    clock: Callable[[], float]
    _need_resync: bool
    _timers: list[tuple[float, int, Callable[[], None]]]
    _timer_ids: itertools.count[int]
    _sweep: deque[TopicPartition]
    _next_sweep: float
    _pending_reads: dict[TopicPartition, None]
    _refresh_queue: dict[str, None]
    _refresh_later: dict[str, None]
    _state_watches: set[TopicPartition]
    _changed_reads: dict[TopicPartition, None]
    _refired_reads: dict[TopicPartition, None]
    _fired: set[TopicPartition]
    _watch_queue: dict[TopicPartition, None]
    _watch_since: int
    # Reads sent and not applied yet, oldest first: (partitions, their members, zxid seen before,
    # results call).
    _reads_in_flight: deque[tuple[list[TopicPartition], list[str], int, Callable[[], list[DataResult]]]]

    def _all_partitions(self) -> Iterable[TopicPartition]:
        for row in self.state.partitions.values():
            yield TopicPartition(row.topic, row.partition)

    def _reread(self, partitions: Iterable[TopicPartition]) -> None:
        """Queue state znodes to read; ``_read_some`` reads them a chunk per loop turn."""
        self._pending_reads.update(dict.fromkeys(partitions))

    def _reread_unresolved(self, members: Iterable[str]) -> None:
        live = self.state.live
        rows = self.state.partitions
        unresolved = (m for m in members if (r := rows.get(m)) is not None and (r.derived or r.leader not in live))
        self._reread(member_tp(m) for m in unresolved)

    def _read_now(self, partitions: list[TopicPartition]) -> None:
        """Read the state znodes of ``partitions`` and apply them (after any read still in flight)."""
        self._submit_read(partitions)
        self._apply_reads(keep=0)

    def _read_overlapped(self, partitions: list[TopicPartition]) -> None:
        """Send this chunk's read, then apply the previous chunk's: ZooKeeper answers one while the
        mirror applies the other (waiting for each answer in turn was most of a storm's loop time)."""
        self._submit_read(partitions)
        self._apply_reads(keep=1)

    def _submit_read(self, partitions: list[TopicPartition]) -> None:
        rows = self.state.partitions
        member = layout.member
        live: list[TopicPartition] = []
        members: list[str] = []
        for tp in partitions:
            m = member(tp.topic, tp.partition)
            if m in rows:
                live.append(tp)
                members.append(m)
        if live:
            since = self.zk.last_zxid  # seen before the read: a later change fires the watch at once
            self._reads_in_flight.append((live, members, since, zksource.submit_states(self.reader, live)))

    def _apply_reads(self, keep: int) -> None:
        """Apply reads in the order they were sent until at most ``keep`` are in flight."""
        while len(self._reads_in_flight) > keep:
            live, members, since, receive = self._reads_in_flight.popleft()
            results = receive()
            rows = self.state.partitions
            # The versions held when the answer is applied (not when it was sent): an unchanged
            # znode is skipped undecoded.
            known = [row.mzxid if (row := rows.get(m)) is not None else -2 for m in members]
            self._apply_read(live, members, since, zksource.decode_states(live, results, known))

    def _apply_read(
        self, live: list[TopicPartition], members: list[str], since: int, reads: list[StateRead | None]
    ) -> None:
        queued = self._refresh_queue or self._refresh_later
        replaced: list[str] | None = [] if queued else None
        self.state.apply_member_reads(members, reads, replaced)
        if replaced:
            # A row the read replaced was re-derived with the current brokers: the refresh a
            # broker change queued for it would only repeat that work (once per row per change).
            for m in replaced:
                self._refresh_queue.pop(m, None)
                self._refresh_later.pop(m, None)
        if self.config.mode == OBSERVED:
            self._watch_unresolved(live, since, members)

    def _watch_unresolved(self, partitions: list[TopicPartition], since: int, members: list[str] | None = None) -> None:
        """Watch the state znodes of ``partitions`` that have no live leader.

        Why: an observed cluster has no stream, and partition state znodes are not watched in
        general (zksource's docstring: a million watches). So a leader written minutes after the
        broker change (the broker coming back, an unclean election, a slow controller) was seen only
        by the periodic sweep, up to 15 s later. The partitions without a live leader are the ones
        whose next write matters, and they are bounded by the incident (``state_watch_limit``), not
        by the cluster: each gets one one-shot data watch until its znode changes, then is read
        again (``StateChanged``). The watches go out in SetWatches requests
        (``controller_core.zk.setwatches``: thousands per request; one ``exists`` call per znode
        cost kazoo a socket write each, 0.3 ms of this loop per partition), relative to ``since``, a
        zxid the session had seen before the rows were read: a znode written after that fires at
        once. (Relative to the rows' own versions instead, nearly every watch fired at once: the
        oldest version of a batch is older than most znodes in it.)
        """
        rows, brokers, watches = self.state.partitions, self.state.live, self._state_watches
        room = self.config.state_watch_limit - len(watches)
        existing: list[tuple[str, Callable[[Any], None]]] = []
        absent: list[tuple[str, Callable[[Any], None]]] = []
        callback = self._on_state_watch
        state_path = paths.partition_state_path
        if members is None:
            member = layout.member
            members = [member(tp.topic, tp.partition) for tp in partitions]
        fired = self._fired
        for tp, m in zip(partitions, members, strict=True):
            if room <= 0:
                break
            row = rows.get(m)
            if row is None or (row.leader >= 0 and row.leader in brokers):
                # Led again: no longer wanted (a watch still armed for it costs one extra read).
                watches.discard(tp)
                fired.discard(tp)
                continue
            if tp in watches:
                continue
            watches.add(tp)
            room -= 1
            if row.mzxid >= 0:
                existing.append((state_path(tp), callback))
            else:
                absent.append((state_path(tp), callback))
        if existing or absent:
            set_node_watches(self.zk, since, existing, absent)

    def _state_changed(self, tp: TopicPartition) -> None:
        """A watched state znode changed: queue its read, ahead of the others if it changed before.

        Why two queues: a row whose watch fires a second time was read since its first change and
        is still without a live leader (its watch is re-armed only then), so this change is news, most
        likely the leader the page waits for. In a failover written leaderless and recovered by a
        second write (an unclean or late election), the recovery's reads queued behind the
        failover's 20,000 first fires, which only confirm what the broker's deregistration already
        showed: 1.1 s at load 4.5 (``bench_live --profile-storm``). A row whose first change is
        still queued needs no second read: its one read, when it comes, returns the newest state.
        A storm of single writes (the usual failover: leaders elected at once) never fires twice,
        and is read first fired, first read as before.
        """
        self._state_watches.discard(tp)
        if tp in self._fired:
            self._changed_reads.pop(tp, None)
            self._refired_reads[tp] = None
        else:
            self._fired.add(tp)
            self._changed_reads[tp] = None

    @inline_watch  # only enqueues: run on kazoo's connection thread, not through its callback thread
    def _on_state_watch(self, event: WatchedEvent) -> None:
        tp = paths.parse_partition_state_path(event.path or "")
        if tp is not None:
            self.events.put(StateChanged(tp))

    def _schedule_followups(self, partitions: list[TopicPartition], delays: tuple[float, ...] | None = None) -> None:
        if not partitions:
            return
        for delay in delays if delays is not None else self.config.followups:
            self._at(delay, functools.partial(self._reread_unwatched, partitions))

    def _reread_unwatched(self, partitions: list[TopicPartition]) -> None:
        """A follow-up: re-read ``partitions`` except those whose state znode is watched right now.

        A watched znode is read when it changes (``StateChanged``); reading it on a timer as well
        only confirms. At 100,000 partitions a broker failure's four follow-ups re-read the 20,000
        watched partitions up to 80,000 times.
        """
        watched = self._state_watches
        self._reread(tp for tp in partitions if tp not in watched)

    def _at(self, delay: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._timers, (self.clock() + delay, next(self._timer_ids), action))

    def _run_timers(self) -> None:
        now = self.clock()
        while self._timers and self._timers[0][0] <= now:
            _due, _id, action = heapq.heappop(self._timers)
            if not self._need_resync:
                action()

    def _urgent_work(self) -> bool:
        """Whether a read or re-derivation that is never held back is queued or in flight."""
        return bool(
            self._refresh_queue
            or self._watch_queue
            or self._changed_reads
            or self._refired_reads
            or self._reads_in_flight
        )

    def _work_that_can_wait(self) -> bool:
        """Whether follow-up reads, re-reads or the sweep are queued (held back by ``_background_room``)."""
        return bool(self._refresh_later or self._pending_reads or self._sweep)

    def _queued_work(self) -> bool:
        """Whether any read or re-derivation is queued (held back by ``_background_room`` or not)."""
        return self._urgent_work() or self._work_that_can_wait()

    def _background_work(self) -> bool:
        """Whether ``_sweep_some`` has something to do now (the loop then does not wait for events)."""
        return self._urgent_work() or (self._work_that_can_wait() and self._background_room())

    def _background_room(self) -> bool:
        """Whether the work that can wait may add rows to the next flush now.

        Why: a flush is written whole before the next one is taken. Unbounded, the 32,000 replica-only
        re-derivations of a 20,000-leader failover (4 ms a turn of 500) went into one 18,000-row
        flush that kept the writer busy for a second at load 5, and the recovery's new leaders,
        read meanwhile, waited behind it (``bench_live --profile-storm``: row applied to flush taken
        0.6-1.0 s). Held to ``background_flush_rows`` per flush, they wait at most for one small one.
        """
        return self.state.unflushed_rows < self.config.background_flush_rows

    def _sweep_some(self) -> None:
        """One chunk of background work, most urgent first.

        1. Observed mode: arm watches on the rows whose leader went with a broker (cheap: thousands
           per SetWatches request), so that a state the controller writes from now on is known,
           and re-derive the same rows in the same turn (2).
        2. Re-derive the rows whose leader came or went with a broker (the page's offline count),
           except those whose watch fired: their read (3) replaces the re-derivation.
        3. Read the watched partitions whose state znode changed: they carry what the page waits
           for (a new leader), and read soon, a partition written twice in a storm (leaderless,
           then led) is read once. Those that changed again since their last read first
           (``_state_changed``).
        4. Re-derive the rows that only host a replica on the broker (replica states).
        5. Queued re-reads (follow-ups, confirmations), then the periodic sweep.

        In a managed cluster the controller's records come before re-derivations: they carry what
        the page is waiting for, and each one makes a queued refresh of its row unnecessary.
        """
        yield_to_stream = self.config.mode == MANAGED and self.events.qsize() > 0
        if self._reads_in_flight and not self._read_work_next(yield_to_stream):
            # What comes next is not a read: apply what is in flight first (reads that another
            # read may overtake are the only ones kept waiting; see ``_read_overlapped``).
            self._apply_reads(keep=0)
        if self._watch_queue:
            watch_queue = self._watch_queue
            partitions = list(itertools.islice(watch_queue, self.config.refresh_chunk))
            for tp in partitions:
                del watch_queue[tp]
            if self._refresh_queue:
                # Their rows, queued in the same order by the broker change: re-derived in the same
                # turn, so the offline count moves from the first turn on (arming every chunk first
                # held it back for ten turns of a 20,000-leader storm; storm profile, bench_live).
                self._refresh_chunk(self._refresh_queue, len(partitions))
            # Relative to the broker change, not to now: a leader written between the change and
            # this arming is newer than that, so its watch fires at once (relative to now, it was
            # missed until the next queued read, seconds later in a storm).
            self._watch_unresolved(partitions, self._watch_since)
            return
        if self._refresh_queue and not yield_to_stream:
            self._refresh_chunk(self._refresh_queue, self.config.refresh_chunk)
            return
        if self._refired_reads or self._changed_reads:
            changed = self._refired_reads or self._changed_reads
            chunk = list(itertools.islice(changed, self.config.sweep_chunk))
            for tp in chunk:
                del changed[tp]
                self._pending_reads.pop(tp, None)
            self._read_overlapped(chunk)
            return
        if not self._background_room():
            self._apply_reads(keep=0)
            return
        # Watches armed: one may fire any moment, and its read should not wait behind a big chunk.
        small = self.config.background_chunk if self._state_watches else self.config.sweep_chunk
        if self._refresh_later and not yield_to_stream:
            self._refresh_chunk(self._refresh_later, min(small, self.config.refresh_chunk))
            return
        if self._pending_reads:
            pending = self._pending_reads
            chunk = list(itertools.islice(pending, small))
            for tp in chunk:
                del pending[tp]
            self._read_overlapped(chunk)
            return
        now = self.clock()
        if not self._sweep and now >= self._next_sweep and not self._need_resync:
            self._sweep.extend(self._all_partitions())
            self._next_sweep = now + self.config.sweep_interval_s
        if self._sweep:
            chunk = [self._sweep.popleft() for _ in range(min(small, len(self._sweep)))]
            self._read_overlapped(chunk)
        else:
            self._apply_reads(keep=0)

    def _read_work_next(self, yield_to_stream: bool) -> bool:
        """Whether ``_sweep_some``'s next chunk is a read (not a watch arming or a re-derivation)."""
        if self._watch_queue or (self._refresh_queue and not yield_to_stream):
            return False
        if self._changed_reads or self._refired_reads:
            return True
        if self._refresh_later and not yield_to_stream:
            return False
        return bool(self._pending_reads or self._sweep)

    def _refresh_chunk(self, queue_: dict[str, None], size: int) -> None:
        members = list(itertools.islice(queue_, size))
        for m in members:
            del queue_[m]
        changed, refired = self._changed_reads, self._refired_reads
        if changed or refired:
            # Their state znode changed since the broker change: the read queued for each re-derives
            # it with what the controller wrote, so re-deriving it now would be done twice.
            rows = self.state.partitions
            members = [
                m
                for m in members
                if (row := rows.get(m)) is None
                or ((tp := TopicPartition(row.topic, row.partition)) not in changed and tp not in refired)
            ]
        self.state.refresh(members)
