"""Managed mode: states come from the controller's state-change stream, replayed from its snapshot."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from dashboard.clusters import layout
from dashboard.lib.redis_keys import state_change_stream_key
from dashboard.live import groups, protocol
from scripts.support.kafka_layout import KafkaLayoutWriter, state_change_record
from tests.integration.mirror_helpers import CLUSTER, counts, small_cluster, start_mirror, stop_mirror
from tests.support.zk import wait_for
from workers.mirror.mirror import Mirror
from workers.mirror.publish import RecordingPublisher

STREAM = state_change_stream_key(CLUSTER)


def xadd(client: redis.Redis, *records: str) -> None:
    for record in records:
        client.xadd(STREAM, {"r": record})


def row(client: redis.Redis, member: str) -> layout.PartitionRow:
    return layout.decode_row(member, client.hget(layout.partitions_key(CLUSTER), member) or b"")


@pytest.fixture
def cluster(zk: KazooClient) -> KafkaLayoutWriter:
    return small_cluster(zk)


@pytest.fixture
def history(rds: redis.Redis) -> None:
    """What a controller left in the stream before the mirror started: old noise, then a failover snapshot."""
    xadd(rds, state_change_record("partition_transition", "orders", 0, controller_epoch=2, seq=1,
                                  from_state="OnlinePartition", to_state="OfflinePartition"))  # fmt: skip
    import json

    rds.xadd(STREAM, {"r": json.dumps({"kind": "failover", "controller_id": 1, "controller_epoch": 3, "seq": 1})})
    snapshot = {
        "kind": "state_snapshot", "controller_id": 1, "controller_epoch": 3, "seq": 2,
        "partition_states": {"OnlinePartition": ["orders-0", "orders-1", "orders-2", "orders-3"]},
        "replica_states": {"OnlineReplica": ["orders-0@1", "orders-0@2", "orders-1@2", "orders-1@3", "orders-2@3",
                                             "orders-2@1", "orders-3@1"],
                           "OfflineReplica": ["orders-3@3"]},
    }  # fmt: skip
    rds.xadd(STREAM, {"r": json.dumps(snapshot)})


@pytest.fixture
def managed(
    zk_chroot: str,
    rds: redis.Redis,
    cluster: KafkaLayoutWriter,
    history: None,
) -> Iterator[tuple[Mirror, RecordingPublisher]]:
    mirror, publisher, client = start_mirror(zk_chroot, rds, mode="managed")
    yield mirror, publisher
    stop_mirror(mirror, client)


def test_it_rebuilds_states_from_the_last_controller_snapshot(
    managed: tuple[Mirror, RecordingPublisher], rds: redis.Redis
) -> None:
    r3 = row(rds, "orders/000003")
    assert (r3.state, r3.derived, r3.replica_derived) == ("OnlinePartition", False, False)
    assert r3.replica_states == {1: "OnlineReplica", 3: "OfflineReplica"}  # from the snapshot, not derived
    assert counts(rds)["r:OfflineReplica"] == 1
    assert row(rds, "orders/000000").state == "OnlinePartition"  # the older Offline record was before the snapshot


def test_stream_records_show_up_live_with_their_transitions(
    managed: tuple[Mirror, RecordingPublisher],
    rds: redis.Redis,
    cluster: KafkaLayoutWriter,
) -> None:
    _mirror, publisher = managed
    cluster.write_states({TopicPartition("orders", 1): (-1, 1, [2])}, 3)
    xadd(
        rds,
        state_change_record("partition_transition", "orders", 1, controller_epoch=3, seq=3,
                            from_state="OnlinePartition", to_state="OfflinePartition",
                            leader_after=-1, isr_after=[2], leader_epoch_after=1),
        state_change_record("replica_transition", "orders", 1, controller_epoch=3, seq=4, replica=3,
                            from_state="OnlineReplica", to_state="OfflineReplica"),
    )  # fmt: skip
    wait_for(lambda: counts(rds).get("p:OfflinePartition") == 1, timeout=5, what="the offline partition")
    r1 = row(rds, "orders/000001")
    assert (r1.leader, r1.state, r1.derived, r1.replica_states[3]) == (-1, "OfflinePartition", False, "OfflineReplica")
    edges: dict[str, int] = {}
    for group, msg in publisher.messages:
        if group == groups.cluster(CLUSTER) and msg["type"] == protocol.DELTA:
            for edge, n in msg["data"]["edges"].get("partition", {}).items():
                edges[edge] = edges.get(edge, 0) + n
    assert edges == {"OnlinePartition>OfflinePartition": 1}
