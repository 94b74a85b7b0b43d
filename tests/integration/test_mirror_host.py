"""One active mirror per cluster: hosts contend for a Redis lease and a standby takes over."""

from __future__ import annotations

import pytest
import redis
from kazoo.client import KazooClient

from dashboard.clusters import layout
from dashboard.clusters.models import Cluster
from scripts.support.kafka_layout import KafkaLayoutWriter
from tests.integration.mirror_helpers import small_cluster
from tests.support.zk import wait_for
from workers.mirror.host import MirrorHost
from workers.mirror.lease import RedisLease
from workers.mirror.publish import RecordingPublisher

pytestmark = pytest.mark.django_db


@pytest.fixture
def cluster(zk: KazooClient) -> KafkaLayoutWriter:
    return small_cluster(zk)


def test_a_standby_takes_over_when_the_active_host_stops(
    zk_chroot: str,
    redis_url: str,
    cluster: KafkaLayoutWriter,
) -> None:
    Cluster.objects.create(name="hosted", zookeeper_connect=zk_chroot, mode="observed")
    hosts = [
        MirrorHost("hosted", redis_url=redis_url, lease_ttl_s=1.5, publisher_factory=RecordingPublisher)
        for _ in range(2)
    ]
    for host in hosts:
        host.start()
    try:
        wait_for(lambda: any(h.active.is_set() for h in hosts), timeout=10, what="one active host")
        active = next(h for h in hosts if h.active.is_set())
        standby = next(h for h in hosts if h is not active)
        assert not standby.active.is_set()
        client = redis.Redis.from_url(redis_url)
        wait_for(lambda: client.hget(layout.meta_key("hosted"), "owner") == active.token.encode(), what="owner in meta")
        active.stop()
        wait_for(standby.active.is_set, timeout=10, what="the standby taking over")
        wait_for(
            lambda: client.hget(layout.meta_key("hosted"), "owner") == standby.token.encode(),
            timeout=10,
            what="new owner",
        )
        assert int(client.hget(layout.counts_key("hosted"), "partitions") or 0) == 4
        client.close()
    finally:
        for host in hosts:
            host.stop()


def test_a_lease_is_renewed_and_released_only_by_its_holder(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    mine = RedisLease(client, "kcp:x:m:lock", "me", ttl_s=5)
    theirs = RedisLease(client, "kcp:x:m:lock", "them", ttl_s=5)
    assert mine.acquire() and not theirs.acquire()
    assert not theirs.renew() and not theirs.release()
    assert mine.renew() and mine.holder() == "me"
    assert mine.release() and theirs.acquire()
    client.close()


def test_an_unknown_cluster_fails_fast() -> None:
    with pytest.raises(Cluster.DoesNotExist):
        MirrorHost("nope").start()
