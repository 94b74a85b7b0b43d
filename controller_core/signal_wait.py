"""Wait on the main thread in a way that lets Python signal handlers run promptly.

A process-directed signal (``kill <pid>``, systemd's SIGTERM) is delivered by the kernel to any thread
that does not block it, usually the main thread but not always: seen here about once in 200 signals
with a few busy threads. CPython runs Python-level handlers only on the main thread, and only when
that thread executes bytecode. When the C handler ran on another thread, a main thread blocked in
``threading.Event.wait()`` with no timeout is never interrupted, so the handler (a graceful
resignation, a controlled shutdown) waits until something else wakes the main thread: for a daemon
whose main thread only waits for "stop", that is never. Waking up every ``poll_s`` bounds that delay.
"""

from __future__ import annotations

import threading

POLL_S = 0.5


def wait_for(event: threading.Event, poll_s: float = POLL_S) -> None:
    """Block until ``event`` is set, returning to the interpreter every ``poll_s`` so that pending
    signal handlers (which may be what sets ``event``) run within ``poll_s`` of their signal."""
    while not event.wait(poll_s):
        pass
