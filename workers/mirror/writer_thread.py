"""The mirror's Redis writes on a thread of their own, in order, with at most one flush in flight.

Why: a flush of a failover storm (20,000 rows, their state-set moves, the counters) kept the
mirror's one thread waiting 0.1-0.5 s on Redis, and everything the thread had not read yet (the
next batch of changed state znodes, the stream's next records) waited with it. Here the mirror
thread hands the flush over and goes on reading; what it changes meanwhile coalesces into the next
flush, which it hands over only once this one is done (``flushing``). One thread runs every job
in submission order (flushes, heartbeats), so a row is never written older after newer, a
heartbeat's status never overtakes the delta it stamps (F19's ``scope_seqs``), and ``seq`` only
moves on this thread while it runs.

Before it is started (unit tests, a mirror driven by hand) ``submit`` runs the job at once, on the
caller's thread: the same code, synchronous.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

logger = logging.getLogger(__name__)

Job = Callable[[], None]


class WriterThread:
    """Run jobs one at a time on a background thread; know whether a flush is in flight.

    Example::

        writer = WriterThread("mirror-demo-writer", wake=lambda: events.put(Wakeup()))
        writer.start()
        if not writer.flushing:
            writer.submit(flush_job, flush=True)   # wake() runs when it is done
        writer.submit(heartbeat_job)
        writer.drain()                             # before a full rewrite
        writer.stop()
    """

    def __init__(self, name: str, wake: Callable[[], None], on_error: Callable[[str], None]) -> None:
        self.name = name
        self._wake = wake
        self._on_error = on_error
        self._jobs: queue.SimpleQueue[tuple[Job, bool] | None] = queue.SimpleQueue()
        self._idle = threading.Condition()
        self._pending = 0
        self._flushing = False
        self._thread: threading.Thread | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def flushing(self) -> bool:
        """A flush was submitted and has not finished (the next one waits, coalescing)."""
        return self._flushing

    def start(self) -> None:
        if self.running:
            return
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def submit(self, job: Job, *, flush: bool = False) -> None:
        """Queue ``job`` (run it now when the thread is not running)."""
        if not self.running:
            self._call(job)
            return
        with self._idle:
            self._pending += 1
            if flush:
                self._flushing = True
        self._jobs.put((job, flush))

    def drain(self, timeout: float | None = 30.0) -> bool:
        """Wait until every submitted job has run (False on timeout)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def stop(self, timeout: float = 10.0) -> None:
        """Run what is queued, then end the thread."""
        thread = self._thread
        if thread is None:
            return
        self._jobs.put(None)
        thread.join(timeout)
        self._thread = None

    def _call(self, job: Job) -> None:
        try:
            job()
        except Exception:
            # Jobs handle Redis errors themselves (a resync); anything else is a bug, and the
            # snapshot in Redis may now miss a flush: rebuild it.
            logger.exception("%s: a write job failed", self.name)
            self._on_error("internal error in a Redis write")

    def _run(self) -> None:
        while True:
            item = self._jobs.get()
            if item is None:
                return
            job, flush = item
            self._call(job)
            with self._idle:
                self._pending -= 1
                if flush:
                    self._flushing = False
                self._idle.notify_all()
            if flush:
                self._wake()
