"""Mirrors follow the cluster registry (issue #32): registered, edited and removed clusters, two fleets.

In-process fleets on real ZooKeeper and Redis (the worker processes are ``test_hosting_workers``):
a cluster registered while the fleet runs is mirrored within seconds, a changed connect string
re-points its mirror, a removed one stops with its snapshot deleted, and two fleets share clusters.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
import redis
from django.db import OperationalError
from kazoo.client import KazooClient

from dashboard.clusters import hosting, layout
from dashboard.clusters.models import Cluster
from scripts.devservices import ZooKeeperServer
from scripts.support.kafka_layout import KafkaLayoutWriter
from tests.integration.mirror_helpers import small_cluster
from tests.support.zk import wait_for
from workers.mirror.fleet import MirrorFleet, delete_snapshot
from workers.mirror.publish import RecordingPublisher

pytestmark = pytest.mark.django_db(transaction=True)

T = TypeVar("T")


def registry_write(write: Callable[[], T], timeout: float = 5.0) -> T:
    """A registry write while the fleet's thread may be reading the registry.

    SQLite's shared in-memory test database answers "database table is locked" at once, without
    the busy wait a database file or PostgreSQL gives, when the write meets a read in progress on
    the fleet's connection (every ``poll_s``; under load the reads last long enough to be met).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            return write()
        except OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def _fleet(redis_url: str, **kwargs: object) -> MirrorFleet:
    return MirrorFleet(
        redis_url=redis_url,
        lease_ttl_s=1.5,
        poll_s=0.2,
        only=(),
        token=f"test:{uuid.uuid4().hex[:6]}",
        **{"publisher_factory": RecordingPublisher, "empty_registry_confirm_s": 0.5, **kwargs},  # type: ignore[arg-type]
    )


@pytest.fixture
def second_chroot(zk_chroot: str, zk: KazooClient) -> Iterator[str]:
    """A second Kafka layout under the test's chroot: broker 7 only, topic ``audit`` (2 partitions)."""
    zk.ensure_path("/second")
    other = KazooClient(hosts=zk_chroot + "/second", timeout=10.0)
    other.start(timeout=15)
    try:
        writer = KafkaLayoutWriter(other)
        writer.ensure_layout()
        writer.register_broker(7, port=9107, rack="r7")
        writer.elect_controller(7, 1)
        writer.create_topic("audit", {0: [7], 1: [7]})
        yield zk_chroot + "/second"
    finally:
        other.stop()
        other.close()


def _int(client: redis.Redis, key: str, field: str) -> int:
    return int(client.hget(key, field) or 0)


def test_a_registered_cluster_is_mirrored_repointed_and_stopped_without_restart(
    zk: KazooClient, zk_chroot: str, second_chroot: str, redis_url: str
) -> None:
    small_cluster(zk)
    client = redis.Redis.from_url(redis_url)
    fleet = _fleet(redis_url)
    fleet.start()
    try:
        registry_write(lambda: Cluster.objects.create(name="late", zookeeper_connect=zk_chroot, mode="observed"))
        wait_for(lambda: _int(client, layout.counts_key("late"), "partitions") == 4, timeout=10, what="mirrored")
        assert _int(client, layout.counts_key("late"), "brokers") == 3

        registry_write(
            lambda: Cluster.objects.filter(name="late").update(zookeeper_connect=second_chroot)
        )  # edited: another tree
        wait_for(lambda: _int(client, layout.counts_key("late"), "partitions") == 2, timeout=10, what="re-pointed")
        assert _int(client, layout.counts_key("late"), "brokers") == 1
        assert client.get(layout.lock_key("late")) == fleet.token.encode()

        registry_write(lambda: Cluster.objects.filter(name="late").delete())
        wait_for(lambda: "late" not in fleet.held, timeout=10, what="mirror stopped")
        wait_for(lambda: not client.exists(layout.meta_key("late")), timeout=5, what="snapshot deleted")
        assert client.get(layout.lock_key("late")) is None
    finally:
        fleet.stop()
        client.close()


def test_an_unreachable_zookeeper_reads_unreachable_not_empty(redis_url: str) -> None:
    Cluster.objects.create(name="gone", zookeeper_connect="127.0.0.1:1/nowhere", mode="observed")
    client = redis.Redis.from_url(redis_url)
    fleet = _fleet(redis_url)
    fleet.start()
    try:
        wait_for(
            lambda: client.hget(layout.meta_key("gone"), "zk_state") == b"UNREACHABLE", timeout=10, what="unreachable"
        )
        assert b"127.0.0.1:1/nowhere" in (client.hget(layout.meta_key("gone"), "zk_error") or b"")
    finally:
        fleet.stop()
        client.close()


def test_two_fleets_share_the_clusters_and_one_takes_over_when_the_other_stops(
    zk: KazooClient, zk_chroot: str, second_chroot: str, redis_url: str
) -> None:
    small_cluster(zk)
    Cluster.objects.create(name="one", zookeeper_connect=zk_chroot, mode="observed")
    Cluster.objects.create(name="two", zookeeper_connect=second_chroot, mode="observed")
    client = redis.Redis.from_url(redis_url)
    fleets = [_fleet(redis_url), _fleet(redis_url)]
    for fleet in fleets:
        fleet.start()
    try:
        wait_for(lambda: sorted(len(f.held) for f in fleets) == [1, 1], timeout=15, what="one cluster each")
        first, second = fleets
        first.stop()
        wait_for(lambda: sorted(second.held) == ["one", "two"], timeout=10, what="the other takes both")
        wait_for(lambda: _int(client, layout.counts_key("one"), "partitions") == 4, timeout=10, what="still mirrored")
    finally:
        for fleet in fleets:
            fleet.stop()
        client.close()


def test_the_per_worker_maximum_bounds_what_one_fleet_holds(
    zk: KazooClient, zk_chroot: str, second_chroot: str, redis_url: str
) -> None:
    small_cluster(zk)
    Cluster.objects.create(name="one", zookeeper_connect=zk_chroot, mode="observed")
    Cluster.objects.create(name="two", zookeeper_connect=second_chroot, mode="observed")
    fleet = _fleet(redis_url, max_clusters=1)
    fleet.start()
    try:
        wait_for(lambda: len(fleet.held) == 1, timeout=10, what="one cluster held")
        time.sleep(1.0)  # five more registry passes
        assert len(fleet.held) == 1
    finally:
        fleet.stop()


def test_a_cluster_whose_zookeeper_goes_away_later_reads_unreachable_not_empty(
    zk: KazooClient, zk_chroot: str, zk_server: ZooKeeperServer, redis_url: str, settings: Any
) -> None:
    from django.contrib.auth.models import User
    from django.test import Client

    settings.REDIS_URL = redis_url
    small_cluster(zk)
    Cluster.objects.create(name="fading", zookeeper_connect=zk_chroot, mode="observed")
    client = redis.Redis.from_url(redis_url)
    fleet = _fleet(redis_url)
    fleet.start()
    web = Client()
    web.force_login(User.objects.create_user("vic", password="pw-correct-horse"))
    try:
        wait_for(lambda: _int(client, layout.counts_key("fading"), "partitions") == 4, timeout=10, what="mirrored")
        zk_server.stop()
        try:
            wait_for(
                lambda: client.hget(layout.meta_key("fading"), "zk_state") in (b"SUSPENDED", b"LOST"),
                timeout=30,  # ~1 s on a quiet machine; 15 s ran out once with three busy test workers
                what="the mirror reports the lost connection",
            )
            page = web.get("/clusters/fading/").content.decode()
            assert "ZooKeeper unreachable" in page
            assert _int(client, layout.counts_key("fading"), "partitions") == 4  # what it last saw, kept
            metrics = web.get("/clusters/fading/metrics").content.decode()
            assert 'kcp_mirror_zookeeper_unreachable{cluster="fading"} 1.0' in metrics
        finally:
            zk_server.start()
        wait_for(lambda: client.hget(layout.meta_key("fading"), "zk_state") == b"CONNECTED", timeout=30, what="back")
    finally:
        fleet.stop()
        client.close()


class _SlowToClose(RecordingPublisher):
    """A publisher whose ``close`` (on the mirror's way out) waits for ``gate``: a mirror slow to stop."""

    gate = threading.Event()
    created: list[tuple[float, _SlowToClose]] = []
    closed_at: list[float] = []

    def __init__(self) -> None:
        super().__init__()
        _SlowToClose.created.append((time.monotonic(), self))

    def close(self) -> None:
        _SlowToClose.gate.wait(20)
        _SlowToClose.closed_at.append(time.monotonic())

    @classmethod
    def reset(cls) -> None:
        """Gate shut, nothing created or closed yet (the class-level record is shared by the tests)."""
        cls.gate.clear()
        cls.created.clear()
        cls.closed_at.clear()


def _presence_at(client: redis.Redis, token: str) -> int:
    return int(client.hget(hosting.host_key("mirror", token), "at") or 0)


def test_a_repointed_mirror_starts_only_after_the_old_one_stopped_and_the_fleet_keeps_its_presence(
    zk: KazooClient, zk_chroot: str, second_chroot: str, redis_url: str
) -> None:
    small_cluster(zk)
    _SlowToClose.reset()
    client = redis.Redis.from_url(redis_url)
    fleet = _fleet(redis_url, publisher_factory=_SlowToClose, stop_timeout_s=0.5)
    Cluster.objects.create(name="slow", zookeeper_connect=zk_chroot, mode="observed")
    fleet.start()
    try:
        wait_for(lambda: _int(client, layout.counts_key("slow"), "partitions") == 4, timeout=10, what="mirrored")
        registry_write(lambda: Cluster.objects.filter(name="slow").update(zookeeper_connect=second_chroot))
        wait_for(lambda: "slow" in fleet.stopping, timeout=5, what="the old mirror asked to stop")
        before = _presence_at(client, fleet.token)
        time.sleep(2.0)  # the old mirror is stuck in close(), well past stop_timeout_s
        assert "slow" not in fleet.held and len(_SlowToClose.created) == 1  # no second mirror beside it
        assert _presence_at(client, fleet.token) > before  # the fleet thread was not blocked on the join
        assert client.get(layout.lock_key("slow")) == fleet.token.encode()  # still ours
        _SlowToClose.gate.set()
        wait_for(lambda: _int(client, layout.counts_key("slow"), "partitions") == 2, timeout=10, what="re-pointed")
        assert len(_SlowToClose.created) == 2 and _SlowToClose.created[1][0] >= _SlowToClose.closed_at[0]
    finally:
        _SlowToClose.gate.set()
        fleet.stop()
        client.close()


def test_a_removed_cluster_is_deleted_only_after_its_mirror_stopped_with_its_hosting_hash(
    zk: KazooClient, zk_chroot: str, second_chroot: str, redis_url: str
) -> None:
    small_cluster(zk)
    _SlowToClose.reset()
    client = redis.Redis.from_url(redis_url)
    fleet = _fleet(redis_url, publisher_factory=_SlowToClose, stop_timeout_s=0.5)
    Cluster.objects.create(name="keep", zookeeper_connect=second_chroot, mode="observed")
    Cluster.objects.create(name="drop", zookeeper_connect=zk_chroot, mode="observed")
    fleet.start()
    try:
        wait_for(lambda: _int(client, layout.counts_key("drop"), "partitions") == 4, timeout=10, what="mirrored")
        client.hset(hosting.cluster_hosting_key("drop"), "controller_active_at", 1)
        registry_write(lambda: Cluster.objects.filter(name="drop").delete())
        wait_for(lambda: "drop" in fleet.stopping, timeout=5, what="the mirror asked to stop")
        time.sleep(1.5)
        assert client.exists(layout.meta_key("drop"))  # not deleted under a mirror that still runs
        _SlowToClose.gate.set()
        wait_for(lambda: not client.exists(layout.meta_key("drop")), timeout=5, what="snapshot deleted")
        assert not client.exists(hosting.cluster_hosting_key("drop"))
        assert "drop" not in fleet.stopping and "keep" in fleet.held
    finally:
        _SlowToClose.gate.set()
        fleet.stop()
        client.close()


def test_an_empty_registry_is_believed_only_after_it_stays_empty(
    zk: KazooClient, zk_chroot: str, redis_url: str
) -> None:
    from django.db import connection

    small_cluster(zk)
    client = redis.Redis.from_url(redis_url)
    fleet = _fleet(redis_url, empty_registry_confirm_s=3.0)
    Cluster.objects.create(name="only", zookeeper_connect=zk_chroot, mode="observed")
    fleet.start()
    try:
        wait_for(lambda: _int(client, layout.counts_key("only"), "partitions") == 4, timeout=10, what="mirrored")

        def wipe() -> None:  # what a swapped or restored database reads like: no tombstone
            with connection.cursor() as cursor:
                cursor.execute(f"DELETE FROM {Cluster._meta.db_table}")

        registry_write(wipe)
        time.sleep(1.5)  # several passes
        assert "only" in fleet.held and client.exists(layout.meta_key("only"))
        wait_for(lambda: not client.exists(layout.meta_key("only")), timeout=8, what="believed, then deleted")
        assert "only" not in fleet.held
    finally:
        fleet.stop()
        client.close()


def test_the_last_cluster_removed_through_django_stops_at_once(
    zk: KazooClient, zk_chroot: str, redis_url: str, settings: Any
) -> None:
    """Its tombstone (``dashboard.clusters.removal``) proves the empty registry: no wait."""
    settings.REDIS_URL = redis_url  # where the post_delete receiver writes the tombstone
    small_cluster(zk)
    client = redis.Redis.from_url(redis_url)
    fleet = _fleet(redis_url, empty_registry_confirm_s=60.0)
    Cluster.objects.create(name="last", zookeeper_connect=zk_chroot, mode="observed")
    fleet.start()
    try:
        wait_for(lambda: _int(client, layout.counts_key("last"), "partitions") == 4, timeout=10, what="mirrored")
        registry_write(lambda: Cluster.objects.filter(name="last").delete())
        wait_for(lambda: not client.exists(layout.meta_key("last")), timeout=8, what="stopped and deleted")
        assert "last" not in fleet.held and client.exists("kcp:last:removed")
        registry_write(
            lambda: Cluster.objects.create(name="last", zookeeper_connect=zk_chroot, mode="observed")
        )  # registered again
        assert not client.exists("kcp:last:removed")
        wait_for(lambda: "last" in fleet.held, timeout=8, what="mirrored again")
    finally:
        fleet.stop()
        client.close()


class _RecordingDeletes(redis.Redis):
    """A real Redis client that also notes the keys of each DEL it sends."""

    def __init__(self, url: str) -> None:
        super().__init__(connection_pool=redis.ConnectionPool.from_url(url))
        self.deletes: list[set[str]] = []

    def delete(self, *names: Any) -> Any:
        self.deletes.append({n.decode() if isinstance(n, bytes) else str(n) for n in names})
        return super().delete(*names)


def test_a_removed_clusters_meta_key_and_hosting_hash_go_last_and_together(redis_url: str) -> None:
    """A page (or a test) that sees the snapshot's meta key gone must see every other key gone too."""
    name = f"gone-{uuid.uuid4().hex[:6]}"
    client = _RecordingDeletes(redis_url)
    try:
        meta, hosting_hash = layout.meta_key(name), hosting.cluster_hosting_key(name)
        row_prefix = layout.all_mirror_keys_pattern(name).removesuffix("*")
        client.mset({f"{row_prefix}row:{i}": i for i in range(1_200)})
        client.set(meta, "x")
        client.hset(hosting_hash, "controller_active_at", 1)

        assert delete_snapshot(client, name) == 1_202
        assert len(client.deletes) == 3  # 500 rows, 500 rows, then the last 200 with the two
        assert all(meta not in keys and hosting_hash not in keys for keys in client.deletes[:-1])
        assert {meta, hosting_hash} <= client.deletes[-1]
        assert not client.keys(f"{row_prefix}*") and not client.exists(hosting_hash)
    finally:
        client.close()
