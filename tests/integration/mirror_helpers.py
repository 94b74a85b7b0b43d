"""Shared pieces of the mirror's integration tests: a small Kafka-layout cluster and a running mirror."""

from __future__ import annotations

from typing import Any

import redis
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from dashboard.clusters import layout
from scripts.support.kafka_layout import KafkaLayoutWriter
from workers.mirror.mirror import Mirror, MirrorConfig
from workers.mirror.publish import RecordingPublisher

CLUSTER = "itest"
ASSIGNMENT = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 3]}


def small_cluster(zk: KazooClient) -> KafkaLayoutWriter:
    """Three brokers, controller 1 at epoch 3, topic ``orders`` (4 partitions, RF 2) with leaders."""
    w = KafkaLayoutWriter(zk)
    w.ensure_layout()
    for b in (1, 2, 3):
        w.register_broker(b, port=9090 + b, rack=f"r{b}")
    w.elect_controller(1, 3)
    w.create_topic("orders", ASSIGNMENT, min_isr=2)
    w.write_states({TopicPartition("orders", p): (r[0], 0, r) for p, r in ASSIGNMENT.items()}, 3)
    return w


def start_mirror(
    zk_chroot: str, rds: redis.Redis, mode: str = "observed", heartbeat_s: float = 0.3
) -> tuple[Mirror, RecordingPublisher, KazooClient]:
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    publisher = RecordingPublisher()
    mirror = Mirror(MirrorConfig(CLUSTER, mode=mode, window_s=0.1, heartbeat_s=heartbeat_s), client, rds, publisher)
    mirror.start()
    assert mirror.ready.wait(15), "the mirror never finished its first sync"
    return mirror, publisher, client


def stop_mirror(mirror: Mirror, client: KazooClient) -> None:
    mirror.stop()
    client.stop()
    client.close()


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def counts(rds: redis.Redis) -> dict[str, int]:
    return {_s(k): int(v) for k, v in rds.hgetall(layout.counts_key(CLUSTER)).items()}


def meta(rds: redis.Redis) -> dict[str, str]:
    return {_s(k): _s(v) for k, v in rds.hgetall(layout.meta_key(CLUSTER)).items()}
