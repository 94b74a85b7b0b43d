"""Garbage collection around controller events.

A 100,000-partition event allocates millions of objects, most of them kept (the context) or freed by
reference counting (temporaries). With the collector on, those allocations trigger collection after
collection, each rescanning the growing young and old generations: measured here, that more than
doubles the time of such an event. The controller's own data has no reference cycles, so:

* while an event runs the collector is paused;
* after an event that allocated many objects, one collection looks at what is new (anything frozen
  is skipped) and the survivors are frozen, so no later collection scans them again. The collector
  stays paused until then, and the collection waits for the event thread's next look at its queue,
  up to ``COLLECTION_DEFER_S`` when the queue is empty: the event woke other threads (the API thread
  holding a controlled shutdown's or an AlterIsr's answer, the senders with their requests) and a
  collection holds the interpreter lock for its whole pass (0.1 to 0.35 s after a controlled
  shutdown at 100,000 partitions here), so they get to run first;
* rarely, when the queue is empty, everything is unfrozen and collected once, so a cycle that
  became garbage after it was frozen cannot accumulate.

A collection holds the interpreter lock for its whole pass (about half a microsecond per object it
scans), and while it does, kazoo's connection thread cannot send the session's heartbeats: a pass
longer than about two thirds of the ZooKeeper session timeout loses the session, and with it the
controllership. At a million partitions the context alone is ~8 million tracked objects, a pass of
several seconds. So no collection here ever scans more than ``max_scan_objects``:

* after a bigger event the new objects are frozen without a collection (any cycle among them waits,
  frozen, for a full collection);
* the periodic full collection is skipped while the frozen set is bigger than that, and only the
  unfrozen generations are collected. Cycles that die among frozen objects then stay in memory; the
  controller creates almost none, so this trades a few kilobytes for never stalling the heartbeat.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Final

logger = logging.getLogger(__name__)


class _GcPause:
    """Counts the threads inside ``gc_paused``: the collector is process-wide, so it comes back on
    only when the last of them leaves (and only if it was on when the first entered)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.depth = 0
        self.was_enabled = False


_gc_pause = _GcPause()


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector for a bulk build or parse of many small objects.

    Creating ~10^6 dicts and tuples triggers many collections that scan every young object again
    and again; none of them can find garbage, since everything built is still referenced. Nests and
    may be entered by several threads at once.
    """
    with _gc_pause.lock:
        if _gc_pause.depth == 0:
            _gc_pause.was_enabled = gc.isenabled()
            gc.disable()
        _gc_pause.depth += 1
    try:
        yield
    finally:
        with _gc_pause.lock:
            _gc_pause.depth -= 1
            if _gc_pause.depth == 0 and _gc_pause.was_enabled:
                gc.enable()


YOUNG_LIMIT: Final = 50_000
"""Objects allocated during one event above which it is followed by a collection and a freeze."""

MAX_SCAN_OBJECTS: Final = 1_000_000
"""The most objects one collection may scan: ~0.5 s of held interpreter lock on a slow 2-core VM,
well inside the heartbeat budget of any session timeout the controller accepts (>= 4 s)."""

FULL_COLLECTION_EVERY_S: Final = 3600.0

COLLECTION_DEFER_S: Final = 0.1
"""How long the collection after a big event waits for a quiet moment (an empty queue) first."""


class EventGcPolicy:
    def __init__(
        self,
        young_limit: int = YOUNG_LIMIT,
        full_every_s: float = FULL_COLLECTION_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
        max_scan_objects: int = MAX_SCAN_OBJECTS,
        defer_s: float = COLLECTION_DEFER_S,
    ) -> None:
        self._young_limit = young_limit
        self._full_every_s = full_every_s
        self._clock = clock
        self._max_scan = max_scan_objects
        self._last_full = clock()
        self.collections = 0
        """Collections after big events."""
        self.freezes_without_collection = 0
        """Big events whose new objects were too many to scan: frozen as they were."""
        self.full_collections = 0
        self.skipped_full_collections = 0
        """Periodic full collections replaced by a young-only one: the frozen set was too big to scan."""
        self._held: ExitStack | None = None
        """The pause of a big event, kept until its collection (``collect_pending``)."""
        self.defer_s = defer_s

    @property
    def collection_pending(self) -> bool:
        """A big event ended and its collection has not run yet (the collector is still paused)."""
        return self._held is not None

    @contextmanager
    def around_event(self) -> Iterator[None]:
        """Pause the collector for one event; after a big one keep it paused until ``collect_pending``.

        The collection runs while still paused: resuming first would let the next allocation start an
        automatic pass over the same young objects. A collection still pending from the event before
        runs first.
        """
        self.collect_pending()
        managed = gc.isenabled()  # else someone else (a test, an embedding process) manages it
        with ExitStack() as pause:
            pause.enter_context(gc_paused())
            yield
            if managed and gc.get_count()[0] >= self._young_limit:
                self._held = pause.pop_all()

    def collect_pending(self) -> None:
        """Collect and freeze after a big event, then resume the collector.

        Too many new objects to scan within the pause budget (a failover of a very large cluster):
        they are frozen without a pass.
        """
        held, self._held = self._held, None
        if held is None:
            return
        with held:
            if collect_new_and_freeze(self._max_scan):
                self.collections += 1
            else:
                self.freezes_without_collection += 1

    def after_event(self, queue_empty: bool) -> None:
        """Now and then, with nothing queued, collect everything once (frozen objects included),
        unless that pass would be too long (see the module docstring)."""
        if not gc.isenabled():  # someone else manages it, or a big event's collection is still pending
            return
        if queue_empty and self._clock() - self._last_full >= self._full_every_s:
            if collect_everything_and_freeze(self._max_scan, log_skip=self.skipped_full_collections == 0):
                self.full_collections += 1
            else:
                self.skipped_full_collections += 1
            self._last_full = self._clock()


def collect_new_and_freeze(max_scan_objects: int = MAX_SCAN_OBJECTS) -> bool:
    """After a bulk build (run while the collector is still paused for it): one pass over what is
    new, unless that is more than ``max_scan_objects``, then freeze it all. Returns whether it collected.

    Frozen objects are skipped by every later pass; reference counting still frees them.
    """
    collected = gc.get_count()[0] <= max_scan_objects
    if collected:
        gc.collect()  # the unfrozen generations: what is new since the last freeze
    gc.freeze()
    return collected


def collect_everything_and_freeze(max_scan_objects: int = MAX_SCAN_OBJECTS, log_skip: bool = True) -> bool:
    """The rare full pass, frozen objects included, so a cycle that died after it was frozen is
    reclaimed; only the unfrozen generations when the frozen set is bigger than ``max_scan_objects``
    (see the module docstring). Returns whether the pass was full."""
    frozen = gc.get_freeze_count()
    if frozen > max_scan_objects:
        gc.collect()  # the unfrozen generations only
        if log_skip:
            logger.info(
                "periodic full garbage collection skipped: scanning %d frozen objects would hold the "
                "interpreter lock past the ZooKeeper heartbeat budget (limit %d)",
                frozen,
                max_scan_objects,
            )
        gc.freeze()
        return False
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    return True
