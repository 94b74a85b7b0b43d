"""What the hosting fleets share: reading the cluster registry, a worker's presence, and balance.

Why: a worker hosts what the registry lists, not what its start-up environment named, so the mirror
fleet (``workers.mirror.fleet``) and the controller fleet (``workers.controller_fleet``) both re-read
the registry every ``HOSTING_POLL_S`` and publish which clusters they hold, so the workers of a role
can balance among themselves and the dashboard can show who hosts what (key names and the reader are
in ``dashboard.clusters.hosting``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import redis
from django import db
from django.db import DatabaseError

from dashboard.clusters import hosting, removal
from dashboard.lib.env import env_str

logger = logging.getLogger(__name__)

EMPTY_REGISTRY_CONFIRM_S = float(env_str("HOSTING_EMPTY_REGISTRY_CONFIRM_S", "60"))
"""How long an empty registry must read empty before a fleet believes every cluster was removed."""


@dataclass(frozen=True, slots=True)
class Registered:
    """A registry row as the fleets use it; a change of ``connect`` or ``mode`` re-points the host."""

    name: str
    connect: str
    mode: str


def read_registry(only: Iterable[str] = ()) -> dict[str, Registered]:
    """Every registered cluster (those named in ``only`` when it is not empty), by name."""
    return read_registry_rows(only)[0]


def read_registry_rows(only: Iterable[str] = ()) -> tuple[dict[str, Registered], int]:
    """The registered clusters ``only`` allows, by name, and how many rows the whole registry has.

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
    return {n: Registered(n, c, m) for n, c, m in rows if not wanted or n in wanted}, len(rows)


class RegistryReads:
    """A fleet's registry reads, which do not believe an empty registry at once.

    Why: a removed cluster's holder stops it and deletes its snapshot. A registry that reads empty
    while the fleet holds clusters is more often a database being restored, re-created or swapped
    (a worker pointed at a fresh SQLite file, a PostgreSQL failover to an empty replica) than an
    operator removing every cluster; believing it would wipe every snapshot in one poll. So an empty
    registry (no rows at all, filters aside) counts as "every cluster removed" at once only when
    every held cluster has a removal tombstone (``dashboard.clusters.removal``: it was deleted
    through Django), else once it has read empty for ``confirm_empty_s``; until then ``read``
    answers ``None``: keep what runs. A read with at least one row proves the registry is the
    populated one, so its absences are removals at once.
    """

    def __init__(self, only: tuple[str, ...], confirm_empty_s: float) -> None:
        self.only = only
        self.confirm_empty_s = confirm_empty_s
        self._empty_since: float | None = None

    def read(self, client: redis.Redis, held: Iterable[str]) -> dict[str, Registered] | None:
        held = sorted(set(held))
        registry, total = read_registry_rows(self.only)
        if total > 0 or not held or removal.removed(client, held) == set(held):
            self._empty_since = None
            return registry
        now = time.monotonic()
        if self._empty_since is None:
            self._empty_since = now
            logger.warning(
                "the cluster registry reads empty while this worker hosts clusters; keeping them for %.0f s "
                "unless a cluster reappears",
                self.confirm_empty_s,
            )
        if now - self._empty_since < self.confirm_empty_s:
            return None
        return registry


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


def poll_registry(
    role: str,
    token: str,
    stop: threading.Event,
    poll_s: float,
    client: redis.Redis,
    presence: Presence,
    tick: Callable[[redis.Redis, Presence], None],
    shut_down: Callable[[], None],
) -> None:
    """A fleet thread's body: ``tick`` every ``poll_s`` until ``stop``, then ``shut_down`` and withdraw.

    A pass that fails keeps what runs: Redis away, a registry not migrated yet or a database away,
    or anything else (logged with its traceback); the next pass tries again.
    """
    try:
        while not stop.is_set():
            try:
                tick(client, presence)
            except redis.RedisError as exc:
                logger.warning("%s fleet %s: Redis unavailable (%s)", role, token, exc)
            except DatabaseError as exc:
                logger.warning("%s fleet %s: cluster registry unreadable (%s)", role, token, exc)
            except Exception:
                logger.exception("%s fleet %s: a registry pass failed", role, token)
            stop.wait(poll_s)
    finally:
        shut_down()
        with contextlib.suppress(redis.RedisError):
            presence.withdraw()
        client.close()
