"""Permission re-checks of server pushes, shared by one user's sockets in a web process.

Why: every socket re-checks its user's right to view at most every ``permissions.RECHECK_S`` before
it forwards a push (``LiveConsumer.allowed``), and each check is a few queries through the one thread
that all consumers' database calls share. A wall of viewers opened together falls due together: 100
sockets queued 100 checks in that thread during a storm, and each socket's push waited for its own.
Sockets of the same user and cluster ask the same question, so a check started within ``SHARE_S``
answers all of them: a revoked right is still seen within ``RECHECK_S`` plus ``SHARE_S`` (plus the
check itself) of the socket's previous check. Checks triggered by the browser's own messages are
not shared (they are always fresh: ``LiveConsumer._recheck``).

Example::

    ok = await shared_recheck(user, "demo")   # one query set for all of ``user``'s sockets on demo
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

from channels.db import database_sync_to_async

from dashboard.live import permissions

#: How old a started check may be and still answer another socket of the same user and cluster.
SHARE_S: Final = 1.0
_MAX_ENTRIES: Final = 10_000

_checks: dict[tuple[Any, str], tuple[float, asyncio.Task[bool]]] = {}


def share_window() -> float:
    """``SHARE_S``, never more than a fifth of ``RECHECK_S`` (tests set that to 0: always fresh)."""
    return min(SHARE_S, permissions.RECHECK_S / 5)


async def _check(user: Any, cluster: str) -> bool:
    return bool(await database_sync_to_async(permissions.still_allowed)(user, cluster))


async def shared_recheck(user: Any, cluster: str) -> bool:
    """Whether ``user`` may still view ``cluster``: a check started within ``share_window()`` or a new one.

    The check runs as a task of its own, so a socket that closes while waiting cancels only its wait.
    """
    key = (getattr(user, "pk", None), cluster)
    now = time.monotonic()
    loop = asyncio.get_running_loop()
    entry = _checks.get(key)
    if entry is None or now - entry[0] > share_window() or entry[1].get_loop() is not loop:
        if len(_checks) >= _MAX_ENTRIES:
            _checks.clear()
        entry = (now, loop.create_task(_check(user, cluster)))
        _checks[key] = entry
    return await asyncio.shield(entry[1])
