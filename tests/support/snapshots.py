"""Before/after snapshots that prove a refused request wrote nothing to ZooKeeper or Redis."""

from __future__ import annotations

from urllib.parse import urlsplit

import redis
from kazoo.client import KazooClient


def zk_tree(client: KazooClient, root: str = "/") -> dict[str, tuple[bytes, int]]:
    """Every znode under ``root`` (the client's chroot) with its data and data version."""
    out: dict[str, tuple[bytes, int]] = {}
    stack = [root]
    while stack:
        path = stack.pop()
        data, stat = client.get(path)
        out[path] = (data, stat.version)
        for child in client.get_children(path):
            stack.append(("" if path == "/" else path) + "/" + child)
    return out


def zk_write_stamps(client: KazooClient, znode_paths: list[str]) -> dict[str, tuple[int, int]]:
    """``(data version, mzxid)`` of each znode: any write to it since moves both.

    Why not the data alone: a zombie writing back the bytes a znode already holds still moves its
    version and ``mzxid``; comparing these proves nobody wrote at all.
    """
    out: dict[str, tuple[int, int]] = {}
    for path in znode_paths:
        _, stat = client.get(path)
        out[path] = (stat.version, stat.mzxid)
    return out


RATE_LIMIT_PREFIX = "kcp:ratelimit:"


def redis_keys(url: str, ignore: tuple[str, ...] = (RATE_LIMIT_PREFIX,)) -> dict[str, bytes | None]:
    """Every key of the Redis database with a dump of its value (type-independent).

    The rate limiter's own counters (``kcp:ratelimit:``) are left out by default: counting a request,
    refused or not, is the one Redis write the hardening layer makes (dashboard/security/ratelimit.py).
    """
    conn = redis.Redis.from_url(url)
    try:
        return {k.decode(): conn.dump(k) for k in conn.scan_iter(count=1000) if not k.decode().startswith(ignore)}
    finally:
        conn.close()


def isolated_db(url: str, db: int = 13) -> str:
    """``url`` with another database number of the same server, emptied.

    Why: with ``TEST_REUSE_SERVICES=1`` other test runs share the dev Redis and write database 0
    while a test snapshots it; a test that points the dashboard (``settings.REDIS_URL``) here sees
    only its own writes.
    """
    isolated = urlsplit(url)._replace(path=f"/{db}").geturl()
    conn = redis.Redis.from_url(isolated)
    try:
        conn.flushdb()
    finally:
        conn.close()
    return isolated
