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
restarts it against the new ZooKeeper, once the old one has stopped (two candidates of one id
on one slot would contend with each other); a removed cluster's hosting hash and this candidate's
status hash are deleted once it has stopped. Stopping is asked for and then checked each pass,
never blocked on, so the fleet thread keeps its presence record (TTL one slot period) fresh while
a candidate resigns. An empty registry is believed only after ``HOSTING_EMPTY_REGISTRY_CONFIRM_S``
(``workers.hosting.RegistryReads``).

Taking a slot is one Lua script (``_TAKE_FREE_SLOT``): "no slot holder uses my id" and "take the
first free slot" in one step, so two workers started with the same ``CONTROLLER_ID`` cannot both
take slots of one cluster by reading before either wrote.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, replace
from typing import Unpack

import redis
from django.conf import settings

from dashboard.clusters import hosting
from dashboard.lib.env import env_int
from dashboard.lib.redis_keys import controller_status_key
from workers.controller_host import ControllerHost, config_from_environment
from workers.hosting import (
    Fleet,
    FleetOptions,
    Presence,
    Registered,
    least_loaded,
)
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

_TAKE_FREE_SLOT = """
local prefix = ARGV[1] .. '|'
for i = 1, #KEYS do
  local value = redis.call('get', KEYS[i])
  if value and string.sub(value, 1, #prefix) == prefix then
    return -1
  end
end
for i = 1, #KEYS do
  if redis.call('set', KEYS[i], ARGV[2], 'NX', 'PX', ARGV[3]) then
    return i - 1
  end
end
return -2
"""
"""Take the first free slot of a cluster (KEYS: its slot keys in order) unless a holder uses our id
(ARGV[1]); ARGV[2] our value, ARGV[3] the TTL in ms. Returns the slot's index, -1 (our id is taken)
or -2 (no free slot)."""


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


class ControllerFleet(Fleet[HostedCandidate]):
    """The controller role of one worker: ``start()`` returns at once, ``stop()`` resigns every candidate."""

    role = "controller"
    only_env = "CONTROLLER_CLUSTERS"

    def __init__(
        self,
        controller_id: int | None = None,
        *,
        max_clusters: int | None = None,
        per_cluster: int | None = None,
        slot_ttl_s: float | None = None,
        **options: Unpack[FleetOptions],
    ) -> None:
        cid = controller_id if controller_id is not None else env_int("CONTROLLER_ID", -1)
        if cid < 0:
            raise ValueError("the controller role needs an id: set CONTROLLER_ID")
        super().__init__(**options)
        self.controller_id = cid
        self.max_clusters = max(0, max_clusters if max_clusters is not None else settings.CONTROLLER_MAX_CLUSTERS)
        self.per_cluster = max(
            0, per_cluster if per_cluster is not None else settings.CONTROLLER_CANDIDATES_PER_CLUSTER
        )
        self.slot_ttl_s = float(slot_ttl_s if slot_ttl_s is not None else settings.CONTROLLER_SLOT_TTL_S)
        self.stopping: dict[str, tuple[HostedCandidate, float]] = {}
        self._removal_deadlines: dict[str, float] = {}

    def _describe(self) -> str:
        return (
            f"candidate id {self.controller_id}, up to {self.max_clusters} clusters,"
            f" {self.per_cluster} candidates per cluster"
        )

    def _presence(self, client: redis.Redis) -> Presence:
        return Presence(
            client,
            self.role,
            self.token,
            max_clusters=self.max_clusters,
            only=self.only,
            ttl_s=self.slot_ttl_s,
            controller_id=self.controller_id,
        )

    def _stopping_hosts(self) -> list[HostedCandidate]:
        return [candidate for candidate, _ in self.stopping.values()]

    def tick(self, client: redis.Redis, presence: Presence) -> None:
        read = self._reads.read(client, [*self.held, *self.stopping])
        if read is None:  # an empty read not yet believed: keep what runs
            presence.publish([*self.held, *self.stopping])
            return
        registry = {n: c for n, c in read.items() if c.mode == "managed"}
        self._finish_stopping(client, registry)
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
            self.stopping[name] = (candidate, time.monotonic())
        self._finish_stopping(client, registry)  # the ones that stopped at once
        presence.publish([*self.held, *self.stopping])
        others = presence.others()
        for name, cluster in sorted(registry.items()):
            if name in self.held or name in self.stopping or len(self.held) + len(self.stopping) >= self.max_clusters:
                continue
            values = self._slot_values(client, name)
            if any(v is not None and v[0] == self.controller_id for v in values) or all(v is not None for v in values):
                continue  # cheap pre-check; the script below decides
            holders = {v[1] for v in values if v is not None}
            if not least_loaded(len(self.held), [w for w in others if w.token not in holders], name):
                continue
            value = hosting.slot_value(self.controller_id, self.token)
            slot = self._take_free_slot(client, name, value)
            if slot is None:
                continue
            lease = RedisLease(client, hosting.slot_key(name, slot), value, self.slot_ttl_s)
            logger.info("controller fleet %s: candidate for %s (slot %d)", self.token, name, slot)
            self._host(client, cluster, slot, lease)
        presence.publish([*self.held, *self.stopping])

    def _finish_stopping(self, client: redis.Redis, registry: dict[str, Registered]) -> None:
        """Act on every stopping candidate that has stopped: restart a re-pointed one on its slot,
        clean up after a removed cluster; warn once about one that takes longer than it should."""
        for name, (candidate, since) in list(self.stopping.items()):
            if candidate.alive:
                with contextlib.suppress(redis.RedisError):
                    candidate.lease.renew()  # its own renewals ended; the slot stays ours until it has stopped
                waited = time.monotonic() - since
                if waited > self.stop_timeout_s:
                    logger.warning("controller candidate for %s has not stopped after %.0f s; waiting", name, waited)
                    self.stopping[name] = (candidate, time.monotonic())  # warn again one timeout later
                continue
            del self.stopping[name]
            wanted = registry.get(name)
            if wanted is not None and not candidate.lost.is_set():  # re-pointed: back on a slot at once
                value = hosting.slot_value(self.controller_id, self.token)
                slot = self._take_free_slot(client, name, value)
                if slot is not None:
                    lease = RedisLease(client, hosting.slot_key(name, slot), value, self.slot_ttl_s)
                    self._host(client, wanted, slot, lease)
            elif wanted is None:
                with contextlib.suppress(redis.RedisError):
                    client.delete(hosting.cluster_hosting_key(name), controller_status_key(name, self.controller_id))

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

    def _take_free_slot(self, client: redis.Redis, name: str, value: str) -> int | None:
        """Take a free slot of ``name`` in one step: none while another holder uses our id."""
        keys = [hosting.slot_key(name, i) for i in range(self.per_cluster)]
        if not keys:
            return None
        take = client.register_script(_TAKE_FREE_SLOT)
        result = int(take(keys=keys, args=[self.controller_id, value, int(self.slot_ttl_s * 1000)]))
        return result if result >= 0 else None
