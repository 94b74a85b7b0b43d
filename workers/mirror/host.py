"""Host one cluster's mirror in a long-running process: a Celery worker bootstep or ``run_mirror``.

Every host contends for the cluster's Redis lease (``lease.py``); the holder runs the ``Mirror``,
the others stand by and poll, so when the active host dies a standby takes over within about one
lease TTL. Losing the lease (a renewal fails) stops the mirror at once.

Usage (the lead's Celery bootstep calls exactly this)::

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
import threading
import uuid
from collections.abc import Callable

import redis
from django.conf import settings
from kazoo.retry import KazooRetry

from controller_core.zk.client import ZkSecurity, new_client
from dashboard.clusters import layout
from dashboard.clusters.models import Cluster
from workers.mirror.lease import RedisLease
from workers.mirror.mirror import Mirror, MirrorConfig
from workers.mirror.publish import ChannelLayerPublisher, Publisher

logger = logging.getLogger(__name__)


def default_publisher() -> Publisher:
    from channels.layers import get_channel_layer

    return ChannelLayerPublisher(get_channel_layer())


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
        self.mirror: Mirror | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.active = threading.Event()

    def _config(self, cluster: Cluster) -> MirrorConfig:
        values: dict[str, object] = {
            "cluster": cluster.name,
            "mode": cluster.mode,
            "window_s": settings.MIRROR_WINDOW_MS / 1000.0,
            "sweep_s": float(settings.MIRROR_SWEEP_S) if settings.MIRROR_SWEEP_S > 0 else None,
            "default_min_isr": settings.MIRROR_DEFAULT_MIN_ISR,
        }
        values.update(self.config_overrides)
        return MirrorConfig(**values)  # type: ignore[arg-type]

    def start(self) -> None:
        """Begin contending on a thread of our own; return at once."""
        cluster = Cluster.objects.get(name=self.cluster_name)  # fail fast on an unknown name
        self._thread = threading.Thread(
            target=self._run, args=(cluster,), name=f"mirror-host-{cluster.name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def join(self) -> None:
        """Block until ``stop()`` (for foreground use)."""
        while self._thread is not None and self._thread.is_alive():
            self._thread.join(0.5)

    def _run(self, cluster: Cluster) -> None:
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
                    self._lead(cluster, client, lease, period)
                self._stop.wait(period)
        finally:
            client.close()

    def _lead(self, cluster: Cluster, client: redis.Redis, lease: RedisLease, period: float) -> None:
        zk = new_client(  # authenticated per ZOOKEEPER_AUTH (controller_core.zk.client)
            cluster.zookeeper_connect,
            timeout=float(settings.ZOOKEEPER_SESSION_TIMEOUT_S),
            security=ZkSecurity.parse(settings.ZOOKEEPER_AUTH, settings.ZOOKEEPER_ACL),
            connection_retry=KazooRetry(max_tries=-1, max_delay=2.0),
            command_retry=KazooRetry(max_tries=3, max_delay=1.0),
        )
        publisher = self.publisher_factory()
        mirror: Mirror | None = None
        try:
            zk.start(timeout=30)
            mirror = Mirror(self._config(cluster), zk, client, publisher, owner=self.token)
            self.mirror = mirror
            mirror.start()
            self.active.set()
            while not self._stop.wait(period):
                try:
                    if not lease.renew():
                        logger.warning("mirror host %s lost the lease of %s; stopping", self.token, cluster.name)
                        break
                except redis.RedisError as exc:
                    # Cannot prove we still hold it: stop, a standby (or we) will take over cleanly.
                    logger.warning("mirror host %s cannot renew its lease (%s); stopping", self.token, exc)
                    break
        except Exception:
            logger.exception("mirror host %s failed while leading %s", self.token, cluster.name)
        finally:
            self.active.clear()
            if mirror is not None:
                mirror.stop()
            self.mirror = None
            publisher.close()
            with contextlib.suppress(redis.RedisError):
                lease.release()
            zk.stop()
            zk.close()
