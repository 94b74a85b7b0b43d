"""A kazoo threading handler for a busy watcher: ``select`` on ``poll(2)``, and inline watch callbacks.

Why: kazoo 2.11's ``SequentialThreadingHandler.select`` (``kazoo.handlers.utils.selector_select``)
builds a ``selectors.DefaultSelector`` for every call: on Linux an ``epoll_create``, an
``epoll_ctl`` per socket, the wait, and a ``close``, plus the selector's Python bookkeeping. Its
connection thread calls it three times per reply it reads (the loop's wait, then before the
header's and the body's ``recv``). A storm's thousands of replies and watch notifications made
that thread the mirror's second-busiest: 2.1 s of CPU over a 100,000-partition broker failure and
recovery, against 2.5 s for the mirror's own thread, all of it holding the GIL the mirror thread
needs (measured with ``scripts/bench_live.py --profile-storm``). ``select.poll`` needs no file
descriptor of its own and has no ``FD_SETSIZE`` limit (the reason kazoo left ``select.select``).

Inline watches: kazoo hands every fired watch to its callback thread through a queue, so each of
a storm's 20,000 state-znode notifications woke a second thread (0.6 s of its CPU, and a GIL
hand-over each way) only to put an event on the mirror's own queue. A watch function marked
``@inline_watch`` promises to do no more than that (no blocking, no ZooKeeper call, no exception)
and is called on the connection thread itself. Order: inline callbacks may run before unmarked
callbacks queued earlier; mark only watches whose handling does not depend on that order (the
mirror's state-znode watches only ask for a read, and reads never regress).

    client = KazooClient(hosts=..., handler=PollingThreadingHandler())
"""

from __future__ import annotations

import logging
import select
from collections.abc import Callable, Sequence
from typing import Any, Final, TypeVar

from kazoo.handlers.threading import SequentialThreadingHandler
from kazoo.protocol.states import Callback

logger = logging.getLogger(__name__)

INLINE_ATTRIBUTE: Final = "_kazoo_inline_watch"

F = TypeVar("F", bound=Callable[..., None])


def inline_watch(func: F) -> F:
    """Mark a watch function as safe to run on kazoo's connection thread (see the module docstring).

    Works on methods too: a bound method reads the attribute from its function.
    """
    setattr(func, INLINE_ATTRIBUTE, True)
    return func


_READ = select.POLLIN | select.POLLPRI
_WRITE = select.POLLOUT
# Hang-up and error wake both sides, as in ``selectors.EpollSelector``: the next recv/send reports it.
_EITHER = select.POLLHUP | select.POLLERR


def poll_select(
    rlist: Sequence[Any], wlist: Sequence[Any], xlist: Sequence[Any], timeout: float | None = None
) -> tuple[list[Any], list[Any], list[Any]]:
    """``select.select``'s contract (file objects or descriptors in, the ready ones out) on ``poll``.

    ``xlist`` is accepted and never reported, as in kazoo's own implementation.
    """
    if timeout is not None:
        if not isinstance(timeout, int | float):
            raise TypeError("timeout must be a number")
        if timeout < 0:
            raise ValueError("timeout must be non-negative")
    poller = select.poll()
    if not wlist:
        # kazoo's every call: one or two sockets to read (the fast path, no mask bookkeeping).
        for fileobj in rlist:
            poller.register(_fd(fileobj), _READ)
        ready = poller.poll(None if timeout is None else timeout * 1000.0)
        if not ready:
            return [], [], []
        _check(ready)
        fds = {fd for fd, _revents in ready}
        return [f for f in rlist if _fd(f) in fds], [], []
    reads = [(_fd(f), f) for f in rlist]
    writes = [(_fd(f), f) for f in wlist]
    masks: dict[int, int] = {}
    for pairs, mask in ((reads, _READ), (writes, _WRITE)):
        for fd, _f in pairs:
            masks[fd] = masks.get(fd, 0) | mask
    for fd, mask in masks.items():
        poller.register(fd, mask)
    events = poller.poll(None if timeout is None else timeout * 1000.0)
    _check(events)
    got = dict(events)
    readable = [f for fd, f in reads if got.get(fd, 0) & (_READ | _EITHER)]
    writable = [f for fd, f in writes if got.get(fd, 0) & (_WRITE | _EITHER)]
    return readable, writable, []


def _check(events: list[tuple[int, int]]) -> None:
    for fd, revents in events:
        if revents & select.POLLNVAL:
            raise ValueError(f"invalid file descriptor {fd}")


def _fd(fileobj: Any) -> int:
    fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
    if not isinstance(fd, int) or fd < 0:
        raise ValueError(f"invalid file descriptor {fd!r}")
    return fd


class PollingThreadingHandler(SequentialThreadingHandler):  # type: ignore[misc]
    """kazoo's threading handler with ``poll_select`` and ``inline_watch`` (see the module docstring)."""

    def select(self, *args: Any, **kwargs: Any) -> tuple[list[Any], list[Any], list[Any]]:
        return poll_select(*args, **kwargs)

    def dispatch_callback(self, callback: Callback) -> None:
        if callback.type == "watch" and getattr(callback.func, INLINE_ATTRIBUTE, False):
            try:
                callback.func(*callback.args)
            except Exception:  # the connection thread must survive a broken promise
                logger.exception("inline watch %r failed", callback.func)
            return
        super().dispatch_callback(callback)
