"""What the hosting fleets share: reading the cluster registry, a worker's presence, and balance.

Why: a worker hosts what the registry lists, not what its start-up environment named, so the mirror
fleet (``workers.mirror.fleet``) and the controller fleet (``workers.controller_fleet``) both re-read
the registry every ``HOSTING_POLL_S`` and publish which clusters they hold, so the workers of a role
can balance among themselves and the dashboard can show who hosts what (key names and the reader are
in ``dashboard.clusters.hosting``).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass

import redis
from django import db

from dashboard.clusters import hosting

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Registered:
    """A registry row as the fleets use it; a change of ``connect`` or ``mode`` re-points the host."""

    name: str
    connect: str
    mode: str


def read_registry(only: Iterable[str] = ()) -> dict[str, Registered]:
    """Every registered cluster (those named in ``only`` when it is not empty), by name.

    Runs on a fleet's own thread: the connection is closed again at once, so a worker holds no
    database connection between polls (SQLite locks, PostgreSQL connection limits).
    """
    from dashboard.clusters.models import Cluster

    wanted = set(only)
    try:
        rows = list(Cluster.objects.values_list("name", "zookeeper_connect", "mode"))
    finally:
        db.close_old_connections()
        db.connection.close()
    return {n: Registered(n, c, m) for n, c, m in rows if not wanted or n in wanted}


def env_filter(name: str) -> tuple[str, ...]:
    """``MIRROR_CLUSTERS=a,b`` -> ``("a", "b")``; unset or empty: no filter (every registered cluster)."""
    return tuple(sorted({x.strip() for x in os.environ.get(name, "").split(",") if x.strip()}))


def worker_token() -> str:
    """``host:pid``: the same for both roles of one worker, so the pages can join them."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Presence:
    """A worker's presence record for one role (``kcp:host:{role}:{token}``), refreshed every poll."""

    def __init__(
        self,
        client: redis.Redis,
        role: str,
        token: str,
        *,
        max_clusters: int,
        only: tuple[str, ...],
        ttl_s: float,
        controller_id: int | None = None,
    ) -> None:
        self.client = client
        self.role = role
        self.token = token
        self.max_clusters = max_clusters
        self.only = only
        self.ttl_ms = int(ttl_s * 1000)
        self.controller_id = controller_id

    def publish(self, held: Iterable[str]) -> None:
        now = int(time.time() * 1000)
        key = hosting.host_key(self.role, self.token)
        fields = {
            "host": self.token.rpartition(":")[0],
            "pid": os.getpid(),
            "max": self.max_clusters,
            "filter": ",".join(self.only),
            "held": ",".join(sorted(held)),
            "controller_id": "" if self.controller_id is None else self.controller_id,
            "at": now,
        }
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(key)
        pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
        pipe.pexpire(key, self.ttl_ms)
        pipe.zadd(hosting.hosts_key(self.role), {self.token: now + self.ttl_ms})
        pipe.zremrangebyscore(hosting.hosts_key(self.role), "-inf", now)
        pipe.execute()

    def withdraw(self) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.delete(hosting.host_key(self.role, self.token))
        pipe.zrem(hosting.hosts_key(self.role), self.token)
        pipe.execute()

    def others(self) -> list[hosting.WorkerRecord]:
        return [w for w in hosting.live_workers(self.client, self.role) if w.token != self.token]


def least_loaded(mine: int, others: Iterable[hosting.WorkerRecord], cluster: str) -> bool:
    """Whether this worker, holding ``mine``, should take ``cluster``: no other worker that may host it
    and has room holds fewer. Ties all try; the lease's ``SET NX`` picks one."""
    loads = [len(w.held) for w in others if w.accepts(cluster) and len(w.held) < w.max_clusters]
    return not loads or mine <= min(loads)
