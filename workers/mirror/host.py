"""Host cluster mirrors in a long-running process: the Celery worker's mirror fleet or ``run_mirror``.

``ClusterMirror`` runs one cluster's ``Mirror`` while its holder keeps the cluster's Redis lease
(``lease.py``): it renews every TTL/3 and stops the mirror at once when a renewal fails. A cluster
whose ZooKeeper cannot be reached keeps its lease and says so in its meta (``zk_state=UNREACHABLE``
with ``zk_error``), so its pages read "ZooKeeper unreachable", not an empty cluster; the mirror starts
as soon as ZooKeeper answers. Each ``ClusterMirror`` and its ``Mirror`` have threads of their own, so
one cluster's resync never waits for another's.

``MirrorHost`` contends for one named cluster (``manage.py run_mirror --cluster NAME``); the worker's
``MirrorFleet`` (``fleet.py``) contends for every registered cluster. Both use ``ClusterMirror``::

    host = MirrorHost("demo")
    host.start()      # returns at once; contending and mirroring happen on a thread
    ...
    host.stop()       # stops the mirror, releases the lease, closes ZooKeeper and Redis
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable

import redis
from django.conf import settings
from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from controller_core.zk.buffered_reads import BufferedReads
from controller_core.zk.client import ZkSecurity, new_client
from controller_core.zk.poll_handler import PollingThreadingHandler
from dashboard.clusters import layout
from dashboard.clusters.models import Cluster
from workers.hosting import Registered
from workers.mirror.lease import RedisLease
from workers.mirror.mirror import Mirror, MirrorConfig
from workers.mirror.publish import ChannelLayerPublisher, Publisher

logger = logging.getLogger(__name__)

UNREACHABLE = "UNREACHABLE"


def default_publisher() -> Publisher:
    from channels.layers import get_channel_layer

    return ChannelLayerPublisher(get_channel_layer())


def mirror_config(cluster: Registered, overrides: dict[str, object] | None = None) -> MirrorConfig:
    values: dict[str, object] = {
        "cluster": cluster.name,
        "mode": cluster.mode,
        "window_s": settings.MIRROR_WINDOW_MS / 1000.0,
        "sweep_s": float(settings.MIRROR_SWEEP_S) if settings.MIRROR_SWEEP_S > 0 else None,
        "default_min_isr": settings.MIRROR_DEFAULT_MIN_ISR,
    }
    values.update(overrides or {})
    return MirrorConfig(**values)  # type: ignore[arg-type]


def _zk_client(connect: str) -> KazooClient:
    client = new_client(  # authenticated per ZOOKEEPER_AUTH (controller_core.zk.client)
        connect,
        timeout=float(settings.ZOOKEEPER_SESSION_TIMEOUT_S),
        security=ZkSecurity.parse(settings.ZOOKEEPER_AUTH, settings.ZOOKEEPER_ACL),
        connection_retry=KazooRetry(max_tries=-1, max_delay=2.0),
        command_retry=KazooRetry(max_tries=3, max_delay=1.0),
        # kazoo's own select builds an epoll object per call, three per reply: in a storm that was
        # the process's second-busiest thread (controller_core/zk/poll_handler.py).
        handler=PollingThreadingHandler(),
    )
    # Many ZooKeeper packets per recv: a storm's 40,000 state-znode notifications cost kazoo's
    # connection thread about 45 us of Python each, read one by one (controller_core/zk/buffered_reads.py).
    BufferedReads(client).install()
    return client


def tune_gil_switch(interval_us: int) -> None:
    """Set the process's GIL switch interval (``MIRROR_GIL_SWITCH_US``; 0 leaves Python's 5 ms).

    Why: every socket call of kazoo's connection thread releases the GIL, and while the mirror
    thread computes (a storm's reads and re-derivations) getting it back takes up to the switch
    interval: three or four waits per ZooKeeper reply or watch notification. Process-wide by
    nature, so it is set where a mirror starts and logged.
    """
    if interval_us > 0 and abs(sys.getswitchinterval() - interval_us / 1e6) > 1e-9:
        sys.setswitchinterval(interval_us / 1e6)
        logger.info("GIL switch interval set to %d us for the mirror's ZooKeeper reader", interval_us)


class ClusterMirror:
    """Run one cluster's mirror while holding its (already acquired) lease; ``run()`` blocks.

    It ends when ``stop()`` is called or the lease is lost; ``release`` on stop says whether to give
    the lease back (a re-pointed cluster keeps it for the next ``ClusterMirror``).
    """

    def __init__(
        self,
        cluster: Registered,
        client: redis.Redis,
        lease: RedisLease,
        *,
        publisher_factory: Callable[[], Publisher] = default_publisher,
        config_overrides: dict[str, object] | None = None,
    ) -> None:
        self.cluster = cluster
        self.client = client
        self.lease = lease
        self.period = lease.ttl_ms / 3000.0
        self.publisher_factory = publisher_factory
        self.config_overrides = config_overrides or {}
        self.mirror: Mirror | None = None
        self.active = threading.Event()
        self.lost = threading.Event()  # the lease was lost (or could not be renewed)
        self.release_on_stop = True
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        tune_gil_switch(settings.MIRROR_GIL_SWITCH_US)
        self._thread = threading.Thread(target=self.run, name=f"mirror-host-{self.cluster.name}", daemon=True)
        self._thread.start()

    def stop(self, *, release: bool = True, timeout: float = 15.0) -> None:
        self.release_on_stop = release
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def signal_stop(self, *, release: bool = True) -> None:
        """Ask to stop without waiting (``join`` later): a fleet stops all its mirrors at once."""
        self.release_on_stop = release
        self._stop.set()

    def join(self, timeout: float = 15.0) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _renew(self) -> bool:
        try:
            if self.lease.renew():
                return True
            logger.warning("mirror host %s lost the lease of %s; stopping", self.lease.token, self.cluster.name)
        except redis.RedisError as exc:
            # Cannot prove we still hold it: stop, a standby (or we) will take over cleanly.
            logger.warning("mirror host %s cannot renew its lease (%s); stopping", self.lease.token, exc)
        self.lost.set()
        return False

    def _note_unreachable(self) -> None:
        """Keep the pages honest while ZooKeeper does not answer: unreachable, not empty."""
        now_ms = int(time.time() * 1000)
        with contextlib.suppress(redis.RedisError):
            self.client.hset(
                layout.meta_key(self.cluster.name),
                mapping={
                    "zk_state": UNREACHABLE,
                    "zk_error": f"cannot connect to ZooKeeper {self.cluster.connect}",
                    "heartbeat_at": now_ms,
                    "owner": self.lease.token,
                    "mode": self.cluster.mode,
                },
            )

    def run(self) -> None:
        name = self.cluster.name
        zk = _zk_client(self.cluster.connect)
        publisher: Publisher | None = None
        mirror: Mirror | None = None
        try:
            connected = zk.start_async()
            warned = False
            while not self._stop.is_set():
                connected.wait(min(self.period, 2.0))
                if zk.connected:
                    break
                if not warned:
                    logger.warning("mirror of %s: ZooKeeper %s unreachable; retrying", name, self.cluster.connect)
                    warned = True
                self._note_unreachable()
                if not self._renew():
                    return
            if self._stop.is_set():
                return
            with contextlib.suppress(redis.RedisError):
                self.client.hdel(layout.meta_key(name), "zk_error")
            publisher = self.publisher_factory()
            mirror = Mirror(
                mirror_config(self.cluster, self.config_overrides), zk, self.client, publisher, owner=self.lease.token
            )
            self.mirror = mirror
            mirror.start()
            self.active.set()
            logger.info("mirror of %s running (%s, %s mode)", name, self.cluster.connect, self.cluster.mode)
            while not self._stop.wait(self.period):
                if not self._renew():
                    break
        except Exception:
            logger.exception("mirror host %s failed while leading %s", self.lease.token, name)
            self.lost.set()
        finally:
            self.active.clear()
            if mirror is not None:
                mirror.stop()
            self.mirror = None
            if publisher is not None:
                publisher.close()
            if self.release_on_stop or self.lost.is_set():
                with contextlib.suppress(redis.RedisError):
                    self.lease.release()
            zk.stop()
            zk.close()


def registered(cluster_name: str) -> Registered:
    cluster = Cluster.objects.get(name=cluster_name)
    return Registered(cluster.name, cluster.zookeeper_connect, cluster.mode)


class MirrorHost:
    """Contend for, and while holding it run, the mirror of cluster ``cluster_name``."""

    def __init__(
        self,
        cluster_name: str,
        *,
        redis_url: str | None = None,
        lease_ttl_s: float | None = None,
        publisher_factory: Callable[[], Publisher] = default_publisher,
        config_overrides: dict[str, object] | None = None,
    ) -> None:
        self.cluster_name = cluster_name
        self.redis_url = redis_url or settings.REDIS_URL
        self.lease_ttl_s = float(lease_ttl_s if lease_ttl_s is not None else settings.MIRROR_LOCK_TTL_S)
        self.publisher_factory = publisher_factory
        self.config_overrides = config_overrides or {}
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self._leader: ClusterMirror | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.active = threading.Event()

    @property
    def mirror(self) -> Mirror | None:
        return None if self._leader is None else self._leader.mirror

    def start(self) -> None:
        """Begin contending on a thread of our own; return at once."""
        cluster = registered(self.cluster_name)  # fail fast on an unknown name
        self._thread = threading.Thread(
            target=self._run, args=(cluster,), name=f"mirror-host-{cluster.name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        leader = self._leader
        if leader is not None:
            leader.signal_stop()
        if self._thread is not None:
            self._thread.join(timeout)

    def join(self) -> None:
        """Block until ``stop()`` (for foreground use)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.5)

    def _run(self, cluster: Registered) -> None:
        client = redis.Redis.from_url(self.redis_url, socket_timeout=10, socket_connect_timeout=5)
        lease = RedisLease(client, layout.lock_key(cluster.name), self.token, self.lease_ttl_s)
        period = self.lease_ttl_s / 3
        try:
            while not self._stop.is_set():
                try:
                    acquired = lease.acquire()
                except redis.RedisError as exc:
                    logger.warning("mirror host %s: Redis unavailable (%s)", self.token, exc)
                    acquired = False
                if acquired:
                    logger.info("mirror host %s holds the lease of %s", self.token, cluster.name)
                    leader = ClusterMirror(
                        cluster,
                        client,
                        lease,
                        publisher_factory=self.publisher_factory,
                        config_overrides=self.config_overrides,
                    )
                    self._leader = leader
                    leader.start()
                    while leader.alive:
                        if self._stop.is_set():
                            leader.signal_stop()
                        if leader.active.is_set():
                            self.active.set()
                        leader.join(0.1)
                    self.active.clear()
                    self._leader = None
                self._stop.wait(period)
        finally:
            client.close()
