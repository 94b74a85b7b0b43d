"""The web process's Redis clients: one connection pool per (URL, timeouts), shared by every request.

Why one helper: the pages and the request guards both need a client on ``settings.REDIS_URL`` that
reuses connections across requests, but with different patience (a page may wait for a snapshot
read; the rate limiter in front of every action must fail fast when Redis hangs). Each asks for
its timeouts here instead of keeping its own cached pool.
"""

from __future__ import annotations

from functools import lru_cache

import redis
from django.conf import settings


@lru_cache(maxsize=8)
def pool(url: str, socket_timeout: float, connect_timeout: float) -> redis.ConnectionPool:
    """The process's pool for ``url`` with these timeouts (seconds), made on first use."""
    return redis.ConnectionPool.from_url(url, socket_timeout=socket_timeout, socket_connect_timeout=connect_timeout)


def shared_redis(socket_timeout: float, connect_timeout: float) -> redis.Redis:
    """A client on the process's pool for ``settings.REDIS_URL`` with these timeouts (seconds)."""
    return redis.Redis(connection_pool=pool(settings.REDIS_URL, socket_timeout, connect_timeout))
