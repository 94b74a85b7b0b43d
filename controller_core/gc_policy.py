"""Garbage collection around controller events.

A 100,000-partition event allocates millions of objects, most of them kept (the context) or freed by
reference counting (temporaries). With the collector on, those allocations trigger collection after
collection, each rescanning the growing young and old generations: measured here, that more than
doubles the time of such an event. The controller's own data has no reference cycles, so:

* while an event runs the collector is paused;
* after an event that allocated many objects, one collection looks at what is new (anything frozen
  is skipped) and the survivors are frozen, so no later collection scans them again;
* rarely, when the queue is empty, everything is unfrozen and collected once, so a cycle that
  became garbage after it was frozen cannot accumulate.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

from controller_core.protocol import gc_paused

YOUNG_LIMIT: Final = 50_000
"""Objects allocated during one event above which it is followed by a collection and a freeze."""

FULL_COLLECTION_EVERY_S: Final = 3600.0


class EventGcPolicy:
    def __init__(
        self,
        young_limit: int = YOUNG_LIMIT,
        full_every_s: float = FULL_COLLECTION_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._young_limit = young_limit
        self._full_every_s = full_every_s
        self._clock = clock
        self._last_full = clock()
        self.collections = 0
        self.full_collections = 0

    @contextmanager
    def around_event(self) -> Iterator[None]:
        """Pause the collector for one event; if it allocated a lot, collect and freeze before resuming.

        The collection runs while still paused: resuming first would let the next allocation start an
        automatic pass over the same young objects.
        """
        managed = gc.isenabled()  # else someone else (a test, an embedding process) manages it
        with gc_paused():
            yield
            if managed and gc.get_count()[0] >= self._young_limit:
                gc.collect()
                gc.freeze()
                self.collections += 1

    def after_event(self, queue_empty: bool) -> None:
        """Now and then, with nothing queued, collect everything once (frozen objects included)."""
        if not gc.isenabled():
            return
        if queue_empty and self._clock() - self._last_full >= self._full_every_s:
            gc.unfreeze()
            gc.collect()
            gc.freeze()
            self._last_full = self._clock()
            self.full_collections += 1
