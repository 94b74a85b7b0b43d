"""How the mirror uses CPython's cyclic collector: its snapshot is long-lived and free of cycles.

A mirror of 100,000 partitions holds a few hundred thousand long-lived objects, and a storm replaces
tens of thousands of rows between two flushes. Walked by the cyclic collector, they paused the loop
for about a second (full collections) or took 40-50 % of a 50,000-row flush (young collections at
CPython's default threshold of 700; measured with a 100,000-partition model, process CPU time).
Reference counting frees replaced rows; the rare real cycles (kazoo, redis, tracebacks) are reclaimed
by a full collection when the mirror is idle. Process-wide, like ``gc.freeze``: the mirror's host
(``run_mirror``, a worker) takes this policy.

A full sync builds the new snapshot with the collector paused (``gc_paused``, counted across the
process) and then scans only what it built, as the controller does after a big event
(``controller_core.gc_policy``). One worker hosts several mirrors, and a collection holds the
interpreter lock for its whole pass: a small mirror's idle full collection taken in the middle of
a big mirror's 100,000-partition sync, over everything the sync had unfrozen, stalled the small
mirror's flushes and heartbeats for 0.4-1 s alone and ~5 s under the test suite's load (its pages
read stale: ``test_hosting_workers``). So an idle collection also waits until no one in the
process holds the collector paused (another mirror's sync or storm, a controller's event).

During a storm the collector is paused altogether (``StormPause``): even at the raised threshold, a
20,000-leader failover and its recovery at 100,000 partitions ran 13 young passes, 0.46 s of held
interpreter lock at load 5 (``bench_live --profile-storm``), stalling the mirror thread, kazoo's
thread and the Redis writer alike, on the page's critical path. What they free (a few MB of cycles
from client libraries) waits for the storm to end, or ``MAX_STORM_PAUSE_S`` at most.
"""

from __future__ import annotations

import gc
from contextlib import ExitStack

from controller_core.gc_policy import collect_everything_and_freeze, collect_new_and_freeze, gc_paused

# The youngest generation's threshold while a mirror runs (CPython's default: 700).
GC_YOUNG_THRESHOLD = 50_000
# The longest the collector stays paused through one storm: then it runs once (at the normal
# threshold) before the next pause, so a mirror that is never idle still reclaims its cycles.
MAX_STORM_PAUSE_S = 5.0


def settle_after_sync() -> None:
    """After a full resync, still inside its pause: collect what it built (unless too much to scan
    in one pass), freeze it, and raise the young threshold."""
    collect_new_and_freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), older, oldest)


class IdleCollector:
    """A full collection every ``interval_s``, only when the mirror has nothing pending (never
    mid-storm) and no one else in the process holds the collector paused."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._next_at = 0.0
        self.collections = 0  # passes taken, full or (frozen set too big) of the unfrozen generations
        self.skipped_full_collections = 0

    def synced(self, now: float) -> None:
        """A sync just collected what it built: the next full pass is an interval away."""
        self._next_at = now + self.interval_s

    def maybe_collect(self, now: float, idle: bool) -> None:
        # A collector that is off is someone's pause (a sync, a storm, a controller's event): a pass
        # now would stall them. Tried again at the next heartbeat.
        if idle and now >= self._next_at and gc.isenabled():
            self._next_at = now + self.interval_s
            # Said once, as the controller's EventGcPolicy says it: not every interval for as long as
            # the snapshot stays that big.
            if not collect_everything_and_freeze(log_skip=self.skipped_full_collections == 0):
                self.skipped_full_collections += 1
            self.collections += 1


class StormPause:
    """The cyclic collector paused while the mirror has work queued, back on when it is idle.

    ``update`` is called once per loop turn. The pause is ``controller_core.gc_policy.gc_paused``
    (counted, process-wide): a controller or another mirror in the same worker pausing too keeps the
    collector off until the last one resumes, and it comes back on only if it was on before.
    """

    def __init__(self, max_pause_s: float = MAX_STORM_PAUSE_S) -> None:
        self.max_pause_s = max_pause_s
        self.pauses = 0
        self._held: ExitStack | None = None
        self._since = 0.0

    @property
    def paused(self) -> bool:
        return self._held is not None

    def update(self, now: float, busy: bool) -> None:
        if self._held is None:
            if busy:
                stack = ExitStack()
                stack.enter_context(gc_paused())
                self._held, self._since = stack, now
                self.pauses += 1
        elif not busy or now - self._since >= self.max_pause_s:
            self.release()

    def release(self) -> None:
        """Resume the collector (at the latest when the mirror stops)."""
        held, self._held = self._held, None
        if held is not None:
            held.close()
