"""A short-lived ZooKeeper session on a registered cluster, for previews in the web process."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.conf import settings
from kazoo.retry import KazooRetry

from controller_core.zk.client import ZkSecurity, new_client
from controller_core.zk.store import ZkStore


def zk_security() -> ZkSecurity:
    """The dashboard's ZooKeeper identity and ACL (settings ``ZOOKEEPER_AUTH``, ``ZOOKEEPER_ACL``)."""
    return ZkSecurity.parse(settings.ZOOKEEPER_AUTH, settings.ZOOKEEPER_ACL)


@contextmanager
def cluster_store(connect: str, timeout: float | None = None) -> Iterator[ZkStore]:
    wait = float(timeout if timeout is not None else settings.ZOOKEEPER_SESSION_TIMEOUT_S)
    client = new_client(connect, timeout=wait, security=zk_security(), connection_retry=KazooRetry(max_tries=1))
    try:
        client.start(timeout=wait)
        yield ZkStore(client, timeout=wait)
    finally:
        client.stop()
        client.close()
