"""A worker's controller candidates follow the cluster registry: every managed cluster gets candidates.

Why: candidates used to be bound at worker start-up to ``CONTROLLER_CLUSTER``, so a second managed
cluster needed new workers. Now every worker with the controller role re-reads the registry every
``HOSTING_POLL_S`` and, for each managed cluster (``CONTROLLER_CLUSTERS``, when set, filters the
names), takes one of the cluster's ``CONTROLLER_CANDIDATES_PER_CLUSTER`` candidate slots (default 2)
when one is free. A slot is a Redis lease (``kcp:{c}:ctl:slot:{i}``, value ``"{id}|{worker}"``,
``CONTROLLER_SLOT_TTL_S``); a worker holds at most one slot per cluster, so two candidates are on
two workers, and never one where another slot holder already uses its ``CONTROLLER_ID``. A worker
hosts at most ``CONTROLLER_MAX_CLUSTERS`` candidates and takes a slot only while no other live
worker that may host the cluster (and holds none of its slots) hosts fewer (balance at placement;
a running candidate is never moved, since moving a hot standby buys nothing and moving the active
one is a failover).

Which candidate is active is ZooKeeper's business (``/controller``, Kafka's election), not Redis's:
a slot only bounds how many candidates run. So a candidate keeps running while Redis is down (its
renewal fails with an error, not with "someone else holds it") and takes its slot again if it
expired meanwhile. It stops (resigns cleanly, deleting ``/controller`` when active) only when its
cluster is removed or no longer managed, or another worker holds its slot. A changed connect string
restarts it against the new ZooKeeper.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, replace

import redis
from django.conf import settings
from django.db import DatabaseError

from dashboard.clusters import hosting
from dashboard.lib.env import env_int
from workers.controller_host import ControllerHost, config_from_environment
from workers.hosting import Presence, Registered, env_filter, least_loaded, read_registry, worker_token
from workers.mirror.lease import RedisLease

logger = logging.getLogger(__name__)

_TAKE_SLOT = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 2
end
return 0
"""
"""Renew our slot, or take it again if it expired (Redis was away): 1 renewed, 2 retaken, 0 held by another."""


@dataclass
class HostedCandidate:
    """One candidate of one managed cluster on this worker, with its slot; a thread of its own."""

    cluster: Registered
    slot: int
    lease: RedisLease
    controller_id: int
    client: redis.Redis

    def __post_init__(self) -> None:
        self.host: ControllerHost | None = None
        self.lost = threading.Event()
        self.started = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"controller-{self.cluster.name}-{self.controller_id}", daemon=True
        )
        self._take = self.client.register_script(_TAKE_SLOT)
        self.period = self.lease.ttl_ms / 3000.0

    def start(self) -> None:
        self._thread.start()

    def signal_stop(self) -> None:
        self._stop.set()

    def join(self, timeout: float = 30.0) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    @property
    def active(self) -> bool:
        controller = self.host.controller if self.host is not None else None
        return controller is not None and controller.is_active

    def _keep_slot(self) -> bool:
        try:
            result = int(self._take(keys=[self.lease.key], args=[self.lease.token, self.lease.ttl_ms]))
        except redis.RedisError as exc:
            logger.debug("controller slot %s not renewed (%s); the candidate keeps running", self.lease.key, exc)
            return True
        if result == 0:
            logger.warning("controller slot %s is held by another worker; resigning", self.lease.key)
            self.lost.set()
            return False
        return True

    def _start_host(self) -> ControllerHost | None:
        name, config = config_from_environment(self.controller_id, self.cluster.name, self.cluster.connect)
        # Several candidates per worker: each binds a free port for its broker-facing API (advertised in
        # /controller), whatever CONTROLLER_API_PORT says.
        host = ControllerHost(name, replace(config, api_port=0))
        try:
            # Bounded well inside the slot's TTL: a ZooKeeper that does not answer must not keep this
            # thread from renewing the slot (another worker would take it, and so on round the fleet).
            host.start(connect_timeout=max(3.0, self.lease.ttl_ms / 2000.0))
        except Exception as exc:
            logger.warning(
                "controller candidate %d for %s (%s) could not start: %s; retrying",
                self.controller_id,
                self.cluster.name,
                self.cluster.connect,
                exc,
            )
            with contextlib.suppress(Exception):
                host.stop()
            return None
        self.started.set()
        return host

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                if self.host is None:
                    self.host = self._start_host()
                if not self._keep_slot():
                    break
                if self.active:
                    with contextlib.suppress(redis.RedisError):
                        self.client.hset(
                            hosting.cluster_hosting_key(self.cluster.name),
                            "controller_active_at",
                            int(time.time() * 1000),
                        )
                self._stop.wait(self.period if self.host is not None else min(self.period, 3.0))
        finally:
            if self.host is not None:
                self.host.stop()  # resigns: deletes /controller when active (Kafka's §7.8)
                self.host = None
                logger.info("controller candidate %d for %s resigned", self.controller_id, self.cluster.name)
            with contextlib.suppress(redis.RedisError):
                self.lease.release()


class ControllerFleet:
    """The controller role of one worker: ``start()`` returns at once, ``stop()`` resigns every candidate."""

    def __init__(
        self,
        controller_id: int | None = None,
        *,
        redis_url: str | None = None,
        max_clusters: int | None = None,
        per_cluster: int | None = None,
        only: tuple[str, ...] | None = None,
        slot_ttl_s: float | None = None,
        poll_s: float | None = None,
        token: str | None = None,
    ) -> None:
        cid = controller_id if controller_id is not None else env_int("CONTROLLER_ID", -1)
        if cid < 0:
            raise ValueError("the controller role needs an id: set CONTROLLER_ID")
        self.controller_id = cid
        self.redis_url = redis_url or settings.REDIS_URL
        self.max_clusters = max(0, max_clusters if max_clusters is not None else settings.CONTROLLER_MAX_CLUSTERS)
        self.per_cluster = max(
            0, per_cluster if per_cluster is not None else settings.CONTROLLER_CANDIDATES_PER_CLUSTER
        )
        self.only = only if only is not None else env_filter("CONTROLLER_CLUSTERS")
        self.slot_ttl_s = float(slot_ttl_s if slot_ttl_s is not None else settings.CONTROLLER_SLOT_TTL_S)
        self.poll_s = float(poll_s if poll_s is not None else settings.HOSTING_POLL_S)
        self.token = token or worker_token()
        self.held: dict[str, HostedCandidate] = {}
        self._removal_deadlines: dict[str, float] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="controller-fleet", daemon=True)
        self._thread.start()
        filtered = f" (only {', '.join(self.only)})" if self.only else ""
        logger.info(
            "controller fleet %s: candidate id %d, up to %d clusters, %d candidates per cluster%s",
            self.token,
            self.controller_id,
            self.max_clusters,
            self.per_cluster,
            filtered,
        )

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        client = redis.Redis.from_url(self.redis_url, socket_timeout=5, socket_connect_timeout=5)
        presence = Presence(
            client,
            "controller",
            self.token,
            max_clusters=self.max_clusters,
            only=self.only,
            ttl_s=self.slot_ttl_s,
            controller_id=self.controller_id,
        )
        try:
            while not self._stop.is_set():
                try:
                    self.tick(client, presence)
                except redis.RedisError as exc:
                    logger.warning("controller fleet %s: Redis unavailable (%s)", self.token, exc)
                except DatabaseError as exc:  # not migrated yet, or the database is away: keep what runs
                    logger.warning("controller fleet %s: cluster registry unreadable (%s)", self.token, exc)
                except Exception:
                    logger.exception("controller fleet %s: a registry pass failed", self.token)
                self._stop.wait(self.poll_s)
        finally:
            for candidate in self.held.values():
                candidate.signal_stop()
            for candidate in self.held.values():
                candidate.join()
            self.held.clear()
            with contextlib.suppress(redis.RedisError):
                presence.withdraw()
            client.close()

    def tick(self, client: redis.Redis, presence: Presence) -> None:
        registry = {n: c for n, c in read_registry(self.only).items() if c.mode == "managed"}
        for name, candidate in list(self.held.items()):
            wanted = registry.get(name)
            if wanted is not None:
                self._removal_deadlines.pop(name, None)
            if candidate.alive and wanted == candidate.cluster:
                continue
            if wanted is None and candidate.alive and candidate.active and self._defer_active_resignation(name):
                continue
            if wanted is None:
                logger.info("controller candidate for %s: the cluster was removed or is no longer managed", name)
            elif candidate.alive:
                logger.info("controller candidate for %s: connect string changed; restarting", name)
            del self.held[name]
            candidate.signal_stop()
            candidate.join()
            if wanted is not None and not candidate.lost.is_set():
                self._host(client, wanted, candidate.slot, candidate.lease)
        presence.publish(self.held)
        others = presence.others()
        for name, cluster in sorted(registry.items()):
            if name in self.held or len(self.held) >= self.max_clusters:
                continue
            slot = self._free_slot(client, name)
            if slot is None:
                continue
            holders = self._slot_holders(client, name)
            if not least_loaded(len(self.held), [w for w in others if w.token not in holders], name):
                continue
            value = hosting.slot_value(self.controller_id, self.token)
            lease = RedisLease(client, hosting.slot_key(name, slot), value, self.slot_ttl_s)
            if lease.acquire():
                logger.info("controller fleet %s: candidate for %s (slot %d)", self.token, name, slot)
                self._host(client, cluster, slot, lease)
        presence.publish(self.held)

    def _defer_active_resignation(self, name: str) -> bool:
        """Whether the active candidate of a removed cluster should wait before resigning.

        The other workers' standbys notice the removal within a poll or two; if the active one resigned
        first, a standby still running would win the election it triggers (a needless epoch) and resign
        right after. So the active one gives them ``2 * HOSTING_POLL_S + 1 s`` to stop first.
        """
        deadline = self._removal_deadlines.setdefault(name, time.monotonic() + 2 * self.poll_s + 1.0)
        if time.monotonic() < deadline:
            return True
        del self._removal_deadlines[name]
        return False

    def _host(self, client: redis.Redis, cluster: Registered, slot: int, lease: RedisLease) -> None:
        candidate = HostedCandidate(cluster, slot, lease, self.controller_id, client)
        self.held[cluster.name] = candidate
        candidate.start()

    def _slot_values(self, client: redis.Redis, name: str) -> list[tuple[int, str] | None]:
        pipe = client.pipeline(transaction=False)
        for i in range(self.per_cluster):
            pipe.get(hosting.slot_key(name, i))
        return [hosting.parse_slot_value(v.decode()) if v is not None else None for v in pipe.execute()]

    def _slot_holders(self, client: redis.Redis, name: str) -> set[str]:
        return {v[1] for v in self._slot_values(client, name) if v is not None}

    def _free_slot(self, client: redis.Redis, name: str) -> int | None:
        """A free slot of ``name`` this worker may take: none while another holder uses our id."""
        values = self._slot_values(client, name)
        if any(v is not None and v[0] == self.controller_id for v in values):
            return None
        return next((i for i, v in enumerate(values) if v is None), None)
