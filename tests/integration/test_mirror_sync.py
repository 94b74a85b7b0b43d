"""The mirror against real ZooKeeper and Redis: Kafka-format znodes in, Redis snapshot and deltas out."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator

import pytest
import redis
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from dashboard.clusters import layout
from dashboard.live import groups, protocol
from scripts.support.kafka_layout import KafkaLayoutWriter
from tests.integration.mirror_helpers import CLUSTER, counts, meta, small_cluster, start_mirror, stop_mirror
from tests.support.zk import wait_for
from workers.mirror.gc_policy import GC_YOUNG_THRESHOLD
from workers.mirror.mirror import Mirror
from workers.mirror.publish import RecordingPublisher


@pytest.fixture
def cluster(zk: KazooClient) -> KafkaLayoutWriter:
    return small_cluster(zk)


@pytest.fixture
def running(
    zk_chroot: str, rds: redis.Redis, cluster: KafkaLayoutWriter
) -> Iterator[tuple[Mirror, RecordingPublisher]]:
    mirror, publisher, client = start_mirror(zk_chroot, rds)
    yield mirror, publisher
    stop_mirror(mirror, client)


def test_it_writes_a_full_snapshot_from_zookeeper(running: tuple[Mirror, RecordingPublisher], rds: redis.Redis) -> None:
    c = counts(rds)
    assert c["partitions"] == 4 and c["brokers"] == 3 and c["topics"] == 1
    assert c["p:OnlinePartition"] == 4 and c["r:OnlineReplica"] == 8
    assert c["offline"] == 0 and c["urp"] == 0 and c["nonpref"] == 0
    assert c["b:1:leaders"] == 2 and c["b:1:replicas"] == 3
    m = meta(rds)
    assert m["controller_id"] == "1" and m["controller_epoch"] == "3" and m["zk_state"] == "CONNECTED"
    row = layout.decode_row("orders/000001", rds.hget(layout.partitions_key(CLUSTER), "orders/000001") or b"")
    assert (row.leader, row.isr, row.state, row.derived) == (2, (2, 3), "OnlinePartition", True)
    summary = json.loads(rds.hget(layout.topics_key(CLUSTER), "orders") or b"{}")
    assert summary["n"] == 4 and summary["rf"] == 2 and summary["mi"] == 2
    broker = json.loads(rds.hget(layout.brokers_key(CLUSTER), "2") or b"{}")
    assert broker["rack"] == "r2" and "PLAINTEXT://127.0.0.1:9092" in broker["endpoints"]
    assert rds.zcard(layout.partition_state_set(CLUSTER, "OnlinePartition")) == 4
    assert rds.zrange(layout.replica_state_set(CLUSTER, "OnlineReplica", 3), 0, -1) == [
        b"orders/000001",
        b"orders/000002",
        b"orders/000003",
    ]
    # The storm-time collector policy the sync installs (a 50,000-row flush spent 40-50 % in it).
    assert gc.get_threshold()[0] >= GC_YOUNG_THRESHOLD


def test_a_new_controller_is_stored_with_the_flush_that_carries_it(
    zk_chroot: str, rds: redis.Redis, cluster: KafkaLayoutWriter
) -> None:
    # No heartbeat after the first: only the flush can store the new controller. A page that reads the
    # snapshot after the flush's seq must see the controller that seq carries, or it never will.
    mirror, _publisher, client = start_mirror(zk_chroot, rds, heartbeat_s=3600.0)
    try:
        start_seq = int(meta(rds)["seq"])
        assert (meta(rds)["controller_id"], meta(rds)["controller_epoch"]) == ("1", "3")
        cluster.elect_controller(2, 4)
        wait_for(lambda: int(meta(rds)["seq"]) > start_seq, what="a flush after the election")
        wait_for(lambda: meta(rds)["controller_epoch"] == "4", timeout=2, what="epoch 4 stored")
        m = meta(rds)
        assert (m["controller_id"], m["controller_epoch"]) == ("2", "4")
    finally:
        stop_mirror(mirror, client)


def test_a_broker_death_shows_as_offline_partitions_and_replicas(
    running: tuple[Mirror, RecordingPublisher], rds: redis.Redis, cluster: KafkaLayoutWriter
) -> None:
    _mirror, publisher = running
    start_seq = int(meta(rds)["seq"])
    cluster.deregister_broker(1)
    # A controller would now write leaderless states for the partitions broker 1 led alone.
    cluster.write_states({TopicPartition("orders", 0): (-1, 1, [1]), TopicPartition("orders", 3): (3, 1, [3])}, 3)
    wait_for(lambda: counts(rds).get("p:OfflinePartition") == 1, what="one offline partition")
    wait_for(lambda: counts(rds).get("r:OfflineReplica") == 3, what="broker 1's three replicas offline")
    c = counts(rds)
    assert c["brokers"] == 2 and c["offline"] == 1 and c["p:OnlinePartition"] == 3
    assert c["umi"] == 2  # orders-0 and orders-3 have ISR 1 < min.insync.replicas 2
    # The state sets are written just after the counters (snapshot.py: rows follow the delta).
    offline_set = layout.partition_state_set(CLUSTER, "OfflinePartition")
    wait_for(lambda: rds.zrange(offline_set, 0, -1) == [b"orders/000000"], timeout=2, what="the state set")
    deltas = [m for g, m in publisher.messages if g == groups.cluster(CLUSTER) and m["type"] == protocol.DELTA]
    seqs = [m["seq"] for m in deltas if m["seq"] > start_seq]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert int(meta(rds)["seq"]) == max(seqs)
    edges: dict[str, int] = {}
    for m in deltas:
        for edge, n in m["data"]["edges"].get("partition", {}).items():
            edges[edge] = edges.get(edge, 0) + n
    # orders-0 and orders-3 went offline with broker 1; the re-read then found orders-3's new leader.
    assert edges.get("OnlinePartition>OfflinePartition", 0) - edges.get("OfflinePartition>OnlinePartition", 0) == 1
    prevs = [m["prev"] for m in deltas if m["seq"] > start_seq]
    assert all(p < s for p, s in zip(prevs, seqs, strict=True))


def test_new_topics_and_admin_requests_are_mirrored(
    running: tuple[Mirror, RecordingPublisher], rds: redis.Redis, cluster: KafkaLayoutWriter
) -> None:
    cluster.create_topic("payments", {0: [2, 3], 1: [3, 2]})
    wait_for(lambda: counts(rds).get("topics") == 2 and counts(rds).get("p:NewPartition") == 2, what="new topic")
    cluster.write_states(
        {TopicPartition("payments", 0): (2, 0, [2, 3]), TopicPartition("payments", 1): (3, 0, [3, 2])}, 3
    )
    # State znodes are not watched: the follow-up reads after topic creation pick these up.
    wait_for(lambda: counts(rds).get("p:OnlinePartition") == 6, timeout=10, what="payments online")
    cluster.request_reassignment({TopicPartition("orders", 0): [2, 3]})
    wait_for(lambda: rds.hget(layout.admin_key(CLUSTER), "reassign_partitions") is not None, what="admin request")
    wait_for(lambda: counts(rds).get("reassigning") == 1, what="reassigning partition")
    cluster.request_deletion("payments")
    wait_for(
        lambda: json.loads(rds.hget(layout.topics_key(CLUSTER), "payments") or b"{}").get("del") is True,
        what="deletion mark",
    )
