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
from typing import Any, ClassVar, Generic, Protocol, TypedDict, TypeVar

import redis
from django import db
from django.conf import settings
from django.db import DatabaseError

from dashboard.clusters import hosting, removal
from dashboard.lib.env import env_str

logger = logging.getLogger(__name__)
H = TypeVar("H", bound="Hosted")

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


class Hosted(Protocol):
    """What a fleet hosts per cluster (a mirror, a controller candidate): stopped in two steps."""

    def signal_stop(self) -> None: ...

    def join(self, timeout: float = ...) -> None: ...


class FleetOptions(TypedDict, total=False):
    """What every fleet takes besides its own settings (``Fleet.__init__``; None: the default)."""

    redis_url: str | None  # settings.REDIS_URL
    poll_s: float | None  # settings.HOSTING_POLL_S
    token: str | None  # worker_token(): host:pid
    only: tuple[str, ...] | None  # the role's ``only_env`` variable
    stop_timeout_s: float | None  # the role's ``default_stop_timeout_s``
    empty_registry_confirm_s: float | None  # EMPTY_REGISTRY_CONFIRM_S


class Fleet(Generic[H]):
    """A role's fleet apart from what it hosts: its thread, its registry poll and its shutdown.

    Subclasses set ``role``, fill ``held`` and ``stopping`` in ``tick`` and say how they publish
    their presence (``_presence``), what their stopping entries host (``_stopping_hosts``) and what
    ``start`` logs (``_describe``).
    """

    role: ClassVar[str]
    #: The variable naming the clusters this role may host (``a,b``; unset: every registered one).
    only_env: ClassVar[str]
    #: How long ``stop`` waits for each hosted cluster to stop.
    default_stop_timeout_s: ClassVar[float] = 30.0
    #: How long a Redis call of the fleet's thread may take before it counts as Redis unavailable.
    redis_timeout_s: ClassVar[float] = 5.0
    stopping: dict[str, Any]

    def __init__(
        self,
        *,
        redis_url: str | None = None,
        poll_s: float | None = None,
        token: str | None = None,
        only: tuple[str, ...] | None = None,
        stop_timeout_s: float | None = None,
        empty_registry_confirm_s: float | None = None,
    ) -> None:
        self.redis_url = redis_url or settings.REDIS_URL
        self.poll_s = float(poll_s if poll_s is not None else settings.HOSTING_POLL_S)
        self.token = token or worker_token()
        self.only = only if only is not None else env_filter(self.only_env)
        self.held: dict[str, H] = {}
        self.stop_timeout_s = stop_timeout_s if stop_timeout_s is not None else self.default_stop_timeout_s
        confirm = EMPTY_REGISTRY_CONFIRM_S if empty_registry_confirm_s is None else empty_registry_confirm_s
        self._reads = RegistryReads(self.only, confirm)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"{self.role}-fleet", daemon=True)
        self._thread.start()
        filtered = f" (only {', '.join(self.only)})" if self.only else ""
        logger.info("%s fleet %s: %s%s", self.role, self.token, self._describe(), filtered)

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def tick(self, client: redis.Redis, presence: Presence) -> None:
        raise NotImplementedError

    def _describe(self) -> str:
        raise NotImplementedError

    def _presence(self, client: redis.Redis) -> Presence:
        raise NotImplementedError

    def _stopping_hosts(self) -> Iterable[H]:
        raise NotImplementedError

    def _run(self) -> None:
        client = redis.Redis.from_url(self.redis_url, socket_timeout=self.redis_timeout_s, socket_connect_timeout=5)
        presence = self._presence(client)
        poll_registry(self.role, self.token, self._stop, self.poll_s, client, presence, self.tick, self._stop_all)

    def _stop_all(self) -> None:
        """Signal every held host to stop, then wait for them and for those already stopping."""
        held = list(self.held.values())
        for host in held:
            host.signal_stop()
        for host in [*held, *self._stopping_hosts()]:
            host.join(self.stop_timeout_s)
        self.held.clear()
        self.stopping.clear()
