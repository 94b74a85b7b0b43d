"""A worker's mirrors follow the cluster registry: every registered cluster gets one, within seconds.

Why: mirrors used to be bound at worker start-up to ``MIRROR_CLUSTERS``, so a cluster registered in
the UI stayed "no mirror data" until someone restarted a worker. Now every worker with the mirror
role re-reads the registry every ``HOSTING_POLL_S`` and

* contends for the lease of every registered cluster it does not hold (``MIRROR_CLUSTERS``, when
  set, is a filter of the names it may host), at most ``MIRROR_MAX_CLUSTERS`` at a time, and only
  while no other live worker that may host the cluster holds fewer (balance; ties race for the
  lease, ``SET NX`` picks one);
* hands one cluster back when it holds two more than the least loaded worker that may host it
  (at most once per lease period, so workers joining at once do not thrash);
* re-points a held mirror whose connect string or mode changed (a new ``Mirror``, same lease), and
  stops a removed cluster's mirror, releases its lease and deletes its snapshot keys (the
  state-change stream, i.e. the history, stays).

Each held cluster runs in a ``ClusterMirror`` of its own (its thread and its ``Mirror``'s loop), so a
100,000-partition resync of one cluster never holds up another's deltas beyond sharing the CPU.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

import redis
from django.conf import settings
from django.db import DatabaseError

from dashboard.clusters import layout
from dashboard.clusters.hosting import WorkerRecord
from workers.hosting import Presence, Registered, env_filter, least_loaded, read_registry, worker_token
from workers.mirror.host import ClusterMirror, default_publisher
from workers.mirror.lease import RedisLease
from workers.mirror.publish import Publisher

logger = logging.getLogger(__name__)


def delete_snapshot(client: redis.Redis, cluster: str) -> int:
    """Delete a removed cluster's mirror keys (``kcp:{c}:m:*``); the state-change stream stays."""
    deleted = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=layout.all_mirror_keys_pattern(cluster), count=1000):
        batch.append(key)
        if len(batch) >= 500:
            deleted += int(client.delete(*batch))
            batch = []
    if batch:
        deleted += int(client.delete(*batch))
    return deleted


class MirrorFleet:
    """The mirror role of one worker: ``start()`` returns at once, ``stop()`` stops every mirror."""

    def __init__(
        self,
        *,
        redis_url: str | None = None,
        max_clusters: int | None = None,
        only: tuple[str, ...] | None = None,
        lease_ttl_s: float | None = None,
        poll_s: float | None = None,
        token: str | None = None,
        publisher_factory: Callable[[], Publisher] = default_publisher,
        config_overrides: dict[str, object] | None = None,
    ) -> None:
        self.redis_url = redis_url or settings.REDIS_URL
        self.max_clusters = max(0, max_clusters if max_clusters is not None else settings.MIRROR_MAX_CLUSTERS)
        self.only = only if only is not None else env_filter("MIRROR_CLUSTERS")
        self.lease_ttl_s = float(lease_ttl_s if lease_ttl_s is not None else settings.MIRROR_LOCK_TTL_S)
        self.poll_s = float(poll_s if poll_s is not None else settings.HOSTING_POLL_S)
        self.token = token or worker_token()
        self.publisher_factory = publisher_factory
        self.config_overrides = config_overrides or {}
        self.held: dict[str, ClusterMirror] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_shed = 0.0

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="mirror-fleet", daemon=True)
        self._thread.start()
        filtered = f" (only {', '.join(self.only)})" if self.only else ""
        logger.info("mirror fleet %s: up to %d clusters%s", self.token, self.max_clusters, filtered)

    def stop(self, timeout: float = 20.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        client = redis.Redis.from_url(self.redis_url, socket_timeout=10, socket_connect_timeout=5)
        presence = Presence(
            client, "mirror", self.token, max_clusters=self.max_clusters, only=self.only, ttl_s=self.lease_ttl_s
        )
        try:
            while not self._stop.is_set():
                try:
                    self.tick(client, presence)
                except redis.RedisError as exc:
                    logger.warning("mirror fleet %s: Redis unavailable (%s)", self.token, exc)
                except DatabaseError as exc:  # not migrated yet, or the database is away: keep what runs
                    logger.warning("mirror fleet %s: cluster registry unreadable (%s)", self.token, exc)
                except Exception:
                    logger.exception("mirror fleet %s: a registry pass failed", self.token)
                self._stop.wait(self.poll_s)
        finally:
            for leader in self.held.values():
                leader.signal_stop()
            for leader in self.held.values():
                leader.join()
            self.held.clear()
            with contextlib.suppress(redis.RedisError):
                presence.withdraw()
            client.close()

    # -- one pass over the registry -------------------------------------------------------------
    def tick(self, client: redis.Redis, presence: Presence) -> None:
        registry = read_registry(self.only)
        self._drop_finished()
        for name in [n for n in self.held if n not in registry]:
            self._remove(client, name)
        for name, leader in list(self.held.items()):
            wanted = registry[name]
            if leader.cluster != wanted:
                logger.info("mirror of %s: registry changed (%s -> %s); re-pointing", name, leader.cluster, wanted)
                leader.stop(release=False)
                self._run_leader(client, wanted, leader.lease)
        presence.publish(self.held)
        others = presence.others()
        self._shed_if_unbalanced(others)
        for name, cluster in sorted(registry.items()):
            if name in self.held or len(self.held) >= self.max_clusters:
                continue
            if not least_loaded(len(self.held), others, name):
                continue
            lease = RedisLease(client, layout.lock_key(name), self.token, self.lease_ttl_s)
            if lease.acquire():
                logger.info("mirror fleet %s holds the lease of %s", self.token, name)
                self._run_leader(client, cluster, lease)
        presence.publish(self.held)

    def _run_leader(self, client: redis.Redis, cluster: Registered, lease: RedisLease) -> None:
        leader = ClusterMirror(
            cluster, client, lease, publisher_factory=self.publisher_factory, config_overrides=self.config_overrides
        )
        self.held[cluster.name] = leader
        leader.start()

    def _drop_finished(self) -> None:
        for name, leader in list(self.held.items()):
            if not leader.alive:
                logger.info("mirror of %s ended on %s (lease lost or failed)", name, self.token)
                del self.held[name]

    def _remove(self, client: redis.Redis, name: str) -> None:
        leader = self.held.pop(name)
        leader.stop(release=True)
        deleted = delete_snapshot(client, name)
        logger.info("mirror of %s stopped: the cluster was removed (%d snapshot keys deleted)", name, deleted)

    def _shed_if_unbalanced(self, others: list[WorkerRecord]) -> None:
        now = time.monotonic()
        if len(self.held) < 2 or now - self._last_shed < self.lease_ttl_s:
            return
        for name in sorted(self.held, reverse=True):
            loads = [len(w.held) for w in others if w.accepts(name) and len(w.held) < w.max_clusters]
            if loads and len(self.held) > min(loads) + 1:
                logger.info("mirror fleet %s: handing %s to a less loaded worker", self.token, name)
                self._last_shed = now
                self.held.pop(name).stop(release=True)
                return
