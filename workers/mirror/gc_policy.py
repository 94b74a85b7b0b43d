"""How the mirror uses CPython's cyclic collector: its snapshot is long-lived and free of cycles.

A mirror of 100,000 partitions holds a few hundred thousand long-lived objects, and a storm replaces
tens of thousands of rows between two flushes. Walked by the cyclic collector, they paused the loop
for about a second (full collections) or took 40-50 % of a 50,000-row flush (young collections at
CPython's default threshold of 700; measured with a 100,000-partition model, process CPU time).
Reference counting frees replaced rows; the rare real cycles (kazoo, redis, tracebacks) are reclaimed
by a full collection when the mirror is idle. Process-wide, like ``gc.freeze``: the mirror's host
(``run_mirror``, a worker) takes this policy.
"""

from __future__ import annotations

import gc

# The youngest generation's threshold while a mirror runs (CPython's default: 700).
GC_YOUNG_THRESHOLD = 50_000


def settle_after_sync() -> None:
    """After a full resync: collect once, freeze what survived, and raise the young threshold."""
    gc.collect()
    gc.freeze()
    young, older, oldest = gc.get_threshold()
    gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), older, oldest)


class IdleCollector:
    """A full collection now and then, only when the mirror has nothing pending (never mid-storm)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._next_at = 0.0

    def maybe_collect(self, now: float, idle: bool) -> None:
        if idle and now >= self._next_at:
            self._next_at = now + self.interval_s
            gc.unfreeze()
            gc.collect()
            gc.freeze()
