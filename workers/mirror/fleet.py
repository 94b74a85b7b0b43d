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
  stops a removed cluster's mirror, releases its lease and deletes its snapshot keys and its
  hosting hash (the state-change stream, i.e. the history, stays). Both wait for the old mirror
  to have stopped, however long that takes: a new mirror beside a still-running old one would
  write the same keys, and a snapshot deleted under a running mirror comes back half. The wait is
  checked each pass, never blocked on, so the fleet thread keeps its presence record (its TTL is
  the lease's) fresh meanwhile;
* believes an empty registry only once it has read empty for ``HOSTING_EMPTY_REGISTRY_CONFIRM_S``
  (``workers.hosting.RegistryReads``).

Each held cluster runs in a ``ClusterMirror`` of its own (its thread and its ``Mirror``'s loop), so a
100,000-partition resync of one cluster never holds up another's deltas beyond sharing the CPU.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Unpack

import redis
from django.conf import settings

from dashboard.clusters import hosting, layout
from dashboard.clusters.hosting import WorkerRecord
from workers.hosting import (
    Fleet,
    FleetOptions,
    Presence,
    Registered,
    least_loaded,
)
from workers.mirror.host import ClusterMirror, default_publisher
from workers.mirror.lease import RedisLease
from workers.mirror.publish import Publisher

logger = logging.getLogger(__name__)


def delete_snapshot(client: redis.Redis, cluster: str) -> int:
    """Delete a removed cluster's mirror keys (``kcp:{c}:m:*``); the state-change stream stays.

    The snapshot's meta key and the hosting hash go last, in one DEL: a reader (a page, a test) that
    sees the snapshot gone never sees a part of it, or the hosting hash, still there.
    """
    last = [layout.meta_key(cluster), hosting.cluster_hosting_key(cluster)]
    deleted = 0
    batch: list[bytes] = []
    for key in client.scan_iter(match=layout.all_mirror_keys_pattern(cluster), count=1000):
        if key.decode() in last:
            continue
        batch.append(key)
        if len(batch) >= 500:
            deleted += int(client.delete(*batch))
            batch = []
    return deleted + int(client.delete(*batch, *last))


@dataclass
class Stopping:
    """A mirror asked to stop, and what to do once it has: ``remove`` (delete the snapshot),
    ``repoint`` (start the registry's new version on the same lease) or ``shed`` (nothing)."""

    leader: ClusterMirror
    action: str
    since: float
    warned: bool = False


class MirrorFleet(Fleet[ClusterMirror]):
    """The mirror role of one worker: ``start()`` returns at once, ``stop()`` stops every mirror."""

    role = "mirror"
    default_stop_timeout_s = 15.0
    only_env = "MIRROR_CLUSTERS"
    redis_timeout_s = 10.0

    def __init__(
        self,
        *,
        max_clusters: int | None = None,
        lease_ttl_s: float | None = None,
        publisher_factory: Callable[[], Publisher] = default_publisher,
        config_overrides: dict[str, object] | None = None,
        **options: Unpack[FleetOptions],
    ) -> None:
        super().__init__(**options)
        self.max_clusters = max(0, max_clusters if max_clusters is not None else settings.MIRROR_MAX_CLUSTERS)
        self.lease_ttl_s = float(lease_ttl_s if lease_ttl_s is not None else settings.MIRROR_LOCK_TTL_S)
        self.publisher_factory = publisher_factory
        self.config_overrides = config_overrides or {}
        self.stopping: dict[str, Stopping] = {}
        self._last_shed = 0.0

    # -- lifecycle ------------------------------------------------------------------------------
    def stop(self, timeout: float = 20.0) -> None:
        super().stop(timeout)

    def _describe(self) -> str:
        return f"up to {self.max_clusters} clusters"

    def _presence(self, client: redis.Redis) -> Presence:
        return Presence(
            client, self.role, self.token, max_clusters=self.max_clusters, only=self.only, ttl_s=self.lease_ttl_s
        )

    def _stopping_hosts(self) -> list[ClusterMirror]:
        return [s.leader for s in self.stopping.values()]

    # -- one pass over the registry -------------------------------------------------------------
    def tick(self, client: redis.Redis, presence: Presence) -> None:
        registry = self._reads.read(client, self._holding())
        if registry is None:  # an empty read not yet believed: keep what runs
            presence.publish(self._holding())
            return
        self._drop_finished()
        self._finish_stopping(client, registry)
        for name in [n for n in self.held if n not in registry]:
            self._begin_stop(name, "remove")
        for name, leader in list(self.held.items()):
            wanted = registry[name]
            if leader.cluster != wanted:
                logger.info("mirror of %s: registry changed (%s -> %s); re-pointing", name, leader.cluster, wanted)
                self._begin_stop(name, "repoint")
        self._finish_stopping(client, registry)  # the ones that stopped at once
        presence.publish(self._holding())
        others = presence.others()
        self._shed_if_unbalanced(others)
        for name, cluster in sorted(registry.items()):
            if name in self.held or name in self.stopping or len(self._holding()) >= self.max_clusters:
                continue
            if not least_loaded(len(self._holding()), others, name):
                continue
            lease = RedisLease(client, layout.lock_key(name), self.token, self.lease_ttl_s)
            if lease.acquire():
                logger.info("mirror fleet %s holds the lease of %s", self.token, name)
                self._run_leader(client, cluster, lease)
        presence.publish(self._holding())

    def _holding(self) -> list[str]:
        """What this worker holds a lease of: running mirrors and the ones still stopping."""
        return [*self.held, *self.stopping]

    def _begin_stop(self, name: str, action: str) -> None:
        leader = self.held.pop(name)
        leader.signal_stop(release=action != "repoint")
        self.stopping[name] = Stopping(leader, action, time.monotonic())

    def _finish_stopping(self, client: redis.Redis, registry: dict[str, Registered]) -> None:
        """Act on every stopping mirror that has stopped; warn (once) about one that has not in time."""
        for name, stopping in list(self.stopping.items()):
            leader = stopping.leader
            if leader.alive:
                # It no longer renews its lease itself; until it has stopped nobody else may start a
                # mirror of this cluster, so the fleet renews it (the mirror releases it on its way out
                # unless it is re-pointed).
                with contextlib.suppress(redis.RedisError):
                    leader.lease.renew()
                waited = time.monotonic() - stopping.since
                if waited > self.stop_timeout_s and not stopping.warned:
                    stopping.warned = True
                    logger.warning(
                        "mirror of %s has not stopped %.0f s after being asked; %s waits for it",
                        name,
                        waited,
                        stopping.action,
                    )
                continue
            del self.stopping[name]
            wanted = registry.get(name)
            if stopping.action == "repoint" and wanted is not None and not leader.lost.is_set():
                self._run_leader(client, wanted, leader.lease)
            elif stopping.action == "repoint" and wanted is None:
                with contextlib.suppress(redis.RedisError):
                    leader.lease.release()
                self._delete(client, name)
            elif stopping.action == "remove":
                self._delete(client, name)

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

    def _delete(self, client: redis.Redis, name: str) -> None:
        deleted = delete_snapshot(client, name)
        logger.info("mirror of %s stopped: the cluster was removed (%d snapshot keys deleted)", name, deleted)

    def _shed_if_unbalanced(self, others: list[WorkerRecord]) -> None:
        now = time.monotonic()
        if len(self.held) < 2 or self.stopping or now - self._last_shed < self.lease_ttl_s:
            return
        for name in sorted(self.held, reverse=True):
            loads = [len(w.held) for w in others if w.accepts(name) and len(w.held) < w.max_clusters]
            if loads and len(self.held) > min(loads) + 1:
                logger.info("mirror fleet %s: handing %s to a less loaded worker", self.token, name)
                self._last_shed = now
                self._begin_stop(name, "shed")
                return
