"""Write a cluster into ZooKeeper the way Kafka's brokers and controller do, for tests and benchmarks.

Why here (``scripts.support``, not the product packages nor the tests): the integration tests,
the browser tests and ``scripts/bench_live.py`` all need a cluster whose znodes are byte-for-byte
Kafka's (through ``controller_core.zk.codecs``), and a benchmark must write 100,000 partition
states fast, so state writes go in large multis (about 85,000 writes a second, DESIGN §4), like a
controller's batched writes.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kazoo.client import KazooClient

from controller_core.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.zk import codecs, paths
from controller_core.zk.multiread import MultiReader

PartitionState = tuple[int, int, Sequence[int]]  # leader, leader epoch, isr


class KafkaLayoutWriter:
    """Example::

    w = KafkaLayoutWriter(zk)
    w.ensure_layout()
    w.register_broker(1, "127.0.0.1", 9092, rack="r1")
    w.create_topic("orders", {0: [1, 2], 1: [2, 1]})
    w.write_states({TopicPartition("orders", 0): (1, 0, [1, 2])}, controller_epoch=1)
    """

    def __init__(self, zk: KazooClient, batch: int = 2_000) -> None:
        self.zk = zk
        self.batch = batch

    def ensure_layout(self) -> None:
        for path in (*paths.PERSISTENT_PATHS, paths.ADMIN_PATH):
            self.zk.ensure_path(path)

    def register_broker(
        self, broker_id: int, host: str = "127.0.0.1", port: int = 9092, rack: str | None = None, ephemeral: bool = True
    ) -> None:
        reg = BrokerRegistration(
            id=broker_id,
            endpoints=(EndPoint("PLAINTEXT", host, port), EndPoint("CONTROL", host, port + 1000)),
            rack=rack,
            timestamp_ms=int(time.time() * 1000),
        )
        self.zk.create(paths.broker_id_path(broker_id), codecs.encode_broker_registration(reg), ephemeral=ephemeral)

    def deregister_broker(self, broker_id: int) -> None:
        self.zk.delete(paths.broker_id_path(broker_id))

    def elect_controller(self, broker_id: int, epoch: int) -> None:
        """Write ``/controller`` (ephemeral) and ``/controller_epoch`` as a winning election does."""
        epoch_data = codecs.encode_controller_epoch(epoch)
        if self.zk.exists(paths.CONTROLLER_EPOCH_PATH):
            self.zk.set(paths.CONTROLLER_EPOCH_PATH, epoch_data)
        else:
            self.zk.create(paths.CONTROLLER_EPOCH_PATH, epoch_data)
        if self.zk.exists(paths.CONTROLLER_PATH):
            self.zk.delete(paths.CONTROLLER_PATH)
        self.zk.create(paths.CONTROLLER_PATH, codecs.encode_controller(broker_id), ephemeral=True)

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        min_isr: int | None = None,
        topic_id: str | None = None,
    ) -> None:
        data = codecs.encode_topic_assignment(
            {p: ReplicaAssignment.of(r) for p, r in assignment.items()}, topic_id or codecs.new_topic_id()
        )
        if min_isr is not None:
            config = codecs.encode_entity_config({"min.insync.replicas": str(min_isr)})
            self.zk.ensure_path(paths.CONFIG_PATH + "/" + paths.CONFIG_TYPE_TOPIC)
            self.zk.create(paths.topic_config_path(topic), config)
        self.zk.create(paths.topic_path(topic), data)

    def set_assignment(self, topic: str, assignment: Mapping[int, ReplicaAssignment], topic_id: str | None) -> None:
        self.zk.set(paths.topic_path(topic), codecs.encode_topic_assignment(assignment, topic_id))

    def create_topics_bulk(self, topics: Mapping[str, Mapping[int, Sequence[int]]]) -> None:
        """Create many topic znodes in multis (benchmarks)."""
        items = list(topics.items())
        for start in range(0, len(items), 100):  # stay well under jute.maxbuffer (1 MB)
            tx = self.zk.transaction()
            for topic, assignment in items[start : start + 100]:
                data = codecs.encode_topic_assignment(
                    {p: ReplicaAssignment.of(r) for p, r in assignment.items()}, codecs.new_topic_id()
                )
                tx.create(paths.topic_path(topic), data)
            _check(tx.commit())

    def write_states(self, states: Mapping[TopicPartition, PartitionState], controller_epoch: int) -> list[float]:
        """Create or overwrite state znodes in multis; return each multi's commit time (epoch s)."""
        items = list(states.items())
        reads = MultiReader(self.zk).get_data([paths.partition_state_path(tp) for tp, _ in items], size_hint=80)
        present = {tp for (tp, _), read in zip(items, reads, strict=True) if read.ok}
        self.ensure_partition_parents(tp for tp, _ in items if tp not in present)
        committed: list[float] = []
        for start in range(0, len(items), self.batch):
            tx = self.zk.transaction()
            for tp, (leader, leader_epoch, isr) in items[start : start + self.batch]:
                data = codecs.encode_leader_and_isr(LeaderAndIsr(leader, leader_epoch, tuple(isr)), controller_epoch)
                if tp in present:
                    tx.set_data(paths.partition_state_path(tp), data)
                else:
                    tx.create(paths.partition_state_path(tp), data)
            _check(tx.commit())
            committed.append(time.time())
        return committed

    def ensure_partition_parents(self, partitions: Iterable[TopicPartition]) -> None:
        """Create ``.../partitions/<p>`` parents in multis (a controller does this before first states)."""
        by_topic: dict[str, list[int]] = {}
        for tp in partitions:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        ops: list[str] = []
        for topic, parts in by_topic.items():
            self.zk.ensure_path(paths.partitions_path(topic))
            existing = set(self.zk.get_children(paths.partitions_path(topic)))
            ops += [paths.partition_path(TopicPartition(topic, p)) for p in parts if str(p) not in existing]
        for start in range(0, len(ops), self.batch):
            tx = self.zk.transaction()
            for path in ops[start : start + self.batch]:
                tx.create(path)
            _check(tx.commit())

    def request_reassignment(self, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
        self.zk.create(paths.REASSIGN_PARTITIONS_PATH, codecs.encode_reassignment(targets))

    def request_deletion(self, topic: str) -> None:
        self.zk.create(paths.delete_topic_path(topic))


def _check(results: list[Any]) -> None:
    for result in results:
        if isinstance(result, Exception):
            raise result


def state_change_record(
    kind: str,
    topic: str,
    partition: int,
    *,
    controller_epoch: int,
    seq: int,
    replica: int | None = None,
    from_state: str | None = None,
    to_state: str | None = None,
    leader_after: int | None = None,
    isr_after: Sequence[int] | None = None,
    leader_epoch_after: int | None = None,
    controller_id: int = 1,
) -> str:
    """One record of the controller's stream, as JSON, shaped like ``StateChangeLogger``'s."""
    entity = f"{topic}-{partition}" if replica is None else f"{topic}-{partition}@{replica}"
    return json.dumps(
        {
            "ts": time.time() * 1000.0,
            "controller_id": controller_id,
            "controller_epoch": controller_epoch,
            "seq": seq,
            "kind": kind,
            "event_id": None,
            "cause": "test",
            "entity": entity,
            "topic": topic,
            "partition": partition,
            "replica": replica,
            "from_state": from_state,
            "to_state": to_state,
            "leader_after": leader_after,
            "isr_after": list(isr_after) if isr_after is not None else None,
            "leader_epoch_after": leader_epoch_after,
        },
        separators=(",", ":"),
    )
