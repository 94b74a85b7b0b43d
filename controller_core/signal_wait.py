"""Wait on the main thread in a way that lets Python signal handlers run promptly and safely.

Two failures of the obvious ``stop.wait()`` in a daemon whose signal handler does ``stop.set()``:

* **Missed signal.** A process-directed signal (``kill <pid>``, systemd's SIGTERM) is delivered by
  the kernel to any thread that does not block it, usually the main thread but not always: seen here
  about once in 200 signals with a few busy threads. CPython runs Python-level handlers only on the
  main thread, and only when that thread executes bytecode. When the C handler ran on another thread, a
  main thread blocked in ``threading.Event.wait()`` with no timeout is never interrupted, so the
  handler (a graceful resignation, a controlled shutdown) waits until something else wakes the main
  thread: for a daemon whose main thread only waits for "stop", that is never.
* **Deadlock.** ``Event.wait`` runs Python code while holding the event's internal lock (entering the
  wait and again after each timeout), and a Python signal handler runs on the main thread between any
  two bytecodes. A handler that calls ``set()`` on the event the main thread is waiting on then waits
  for a lock its own thread holds, for ever: the process ignores every later SIGTERM and needs SIGKILL.
  Most likely right when the wait begins, which is when tests (and a quick ``systemctl restart``)
  signal a process that has just said it is ready: a broker agent hung this way in CI.

So the main thread never enters ``Event.wait`` here: it polls ``is_set()`` (a plain read, no lock)
between short sleeps. A sleep interrupted by a signal runs the handler at once; the wait ends within
``poll_s`` of it.
"""

from __future__ import annotations

import math
import threading
import time

POLL_S = 0.05


def wait_for(event: threading.Event, poll_s: float = POLL_S) -> None:
    """Block until ``event`` is set (by a signal handler or another thread), never holding its lock."""
    wait_until_set(event, math.inf, poll_s)


def wait_until_set(event: threading.Event, timeout_s: float, poll_s: float = POLL_S) -> bool:
    """``event.wait(timeout_s)`` for the main thread of a process whose signal handlers set ``event``:
    the same answer (whether it is set), without ever holding the event's lock."""
    deadline = time.monotonic() + max(0.0, timeout_s)
    while not event.is_set():
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        time.sleep(min(poll_s, remaining))
    return True
