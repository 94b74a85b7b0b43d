"""The mirror rebuilds itself after losing Redis or its ZooKeeper session, and shows staleness meanwhile."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from dashboard.clusters import layout
from dashboard.live import groups, protocol
from scripts.devservices import RedisServer
from scripts.support.kafka_layout import KafkaLayoutWriter
from tests.integration.mirror_helpers import CLUSTER, counts, meta, small_cluster, start_mirror, stop_mirror
from tests.support.zk import expire_session, wait_for
from workers.mirror.mirror import Mirror
from workers.mirror.publish import RecordingPublisher


@pytest.fixture
def cluster(zk: KazooClient) -> KafkaLayoutWriter:
    return small_cluster(zk)


@pytest.fixture
def running(
    zk_chroot: str,
    rds: redis.Redis,
    cluster: KafkaLayoutWriter,
) -> Iterator[tuple[Mirror, RecordingPublisher, KazooClient]]:
    mirror, publisher, client = start_mirror(zk_chroot, rds)
    yield mirror, publisher, client
    stop_mirror(mirror, client)


def resync_notices(publisher: RecordingPublisher) -> list[str]:
    return [m["gen"] for g, m in publisher.messages if g == groups.status(CLUSTER) and m["type"] == protocol.RESYNC]


def test_a_flushed_redis_is_rebuilt_with_a_new_generation(
    running: tuple[Mirror, RecordingPublisher, KazooClient],
    rds: redis.Redis,
) -> None:
    mirror, publisher, _client = running
    first_gen, first_seq = meta(rds)["gen"], int(meta(rds)["seq"])
    rds.flushdb()
    wait_for(lambda: meta(rds).get("gen") not in (None, first_gen), timeout=10, what="a new generation")
    assert counts(rds)["partitions"] == 4
    assert rds.zcard(layout.partition_state_set(CLUSTER, "OnlinePartition")) == 4
    assert int(meta(rds)["seq"]) > first_seq  # sequence numbers never go back
    assert resync_notices(publisher)[-1] == meta(rds)["gen"]
    assert mirror.resyncs == 2


def test_a_redis_restart_is_survived(
    running: tuple[Mirror, RecordingPublisher, KazooClient],
    rds: redis.Redis,
    redis_server: RedisServer,
    cluster: KafkaLayoutWriter,
) -> None:
    mirror, _publisher, _client = running
    redis_server.stop()
    # While Redis is away, ZooKeeper keeps changing: the rebuilt snapshot must include it.
    cluster.write_states({TopicPartition("orders", 1): (3, 1, [3])}, 3)
    cluster.deregister_broker(2)
    redis_server.start()
    wait_for(
        lambda: mirror.resyncs >= 2 and _safe_counts(rds).get("brokers") == 2,
        timeout=20,
        what="the snapshot rebuilt after the restart",
    )
    assert _safe_counts(rds)["partitions"] == 4
    row = layout.decode_row("orders/000001", rds.hget(layout.partitions_key(CLUSTER), "orders/000001") or b"")
    assert (row.leader, row.isr) == (3, (3,))


def test_zookeeper_session_expiry_shows_stale_then_resyncs(
    running: tuple[Mirror, RecordingPublisher, KazooClient],
    rds: redis.Redis,
    zk_chroot: str,
    cluster: KafkaLayoutWriter,
) -> None:
    mirror, publisher, client = running
    gen = meta(rds)["gen"]
    states: list[str] = []
    client.add_listener(states.append)
    expire_session(client, zk_chroot)
    # The watches died with the session: a change made now is seen only thanks to the resync.
    cluster.create_topic("after-expiry", {0: [1]})
    wait_for(lambda: meta(rds).get("gen") != gen, timeout=20, what="a resync after session expiry")
    wait_for(lambda: counts(rds).get("topics") == 2, timeout=10, what="the topic created during the outage")
    assert "LOST" in states
    statuses = [
        m["status"] for g, m in publisher.messages if g == groups.status(CLUSTER) and m["type"] == protocol.STATUS
    ]
    assert any(s["zk_state"] == "LOST" for s in statuses), "pages were never told the mirror was stale"
    assert meta(rds)["zk_state"] == "CONNECTED" and mirror.resyncs >= 2


def _safe_counts(rds: redis.Redis) -> dict[str, int]:
    try:
        return counts(rds)
    except redis.RedisError:
        return {}
