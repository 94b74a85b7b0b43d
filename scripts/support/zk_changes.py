"""Random changes to Kafka's ZooKeeper layout, for the warm standby's property test and soak.

Each ``Change`` is one admin-style write (a broker (de)registering or rewriting its registration, a
topic created, reassigned or deleted, a partition state rewritten or made unreadable, the admin
znodes created, rewritten or deleted), made with the same codecs the controller and brokers use.
``apply`` performs it with a plain kazoo client and never fails on a change that no longer applies
(the topic is gone, the znode exists): random sequences stay valid whatever came before.
"""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError, NotEmptyError

from controller_core.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.zk import codecs, paths

KINDS = (
    "broker_up",
    "broker_down",
    "broker_update",
    "topic_create",
    "topic_reassign",
    "topic_delete",
    "state_set",
    "state_set",
    "state_set",
    "state_garbage",
    "delete_request",
    "delete_request_done",
    "reassign_request",
    "reassign_done",
    "preferred_request",
    "preferred_done",
)
TOPICS = tuple(f"t{i}" for i in range(6))
BROKERS = tuple(range(1, 6))


@dataclass(frozen=True)
class Change:
    kind: str
    seed: int

    def apply(self, zk: KazooClient) -> None:
        rng = random.Random(self.seed)
        topic = rng.choice(TOPICS)
        broker = rng.choice(BROKERS)
        # A change that no longer applies (random sequences) is a no-op.
        with contextlib.suppress(NodeExistsError, NoNodeError, NotEmptyError):
            _APPLY[self.kind](zk, rng, topic, broker)


def random_changes(rng: random.Random, count: int) -> list[Change]:
    return [Change(rng.choice(KINDS), rng.randrange(1 << 30)) for _ in range(count)]


def _registration(rng: random.Random, broker: int) -> bytes:
    reg = BrokerRegistration(
        broker,
        (EndPoint("PLAINTEXT", "127.0.0.1", 9000 + broker + rng.randrange(3) * 100),),
        rack=rng.choice([None, "r1", "r2"]),
        timestamp_ms=rng.randrange(1 << 40),
    )
    return codecs.encode_broker_registration(reg)


def _replicas(rng: random.Random) -> tuple[int, ...]:
    return tuple(rng.sample(BROKERS, rng.randint(1, 3)))


def _broker_up(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    zk.create(paths.broker_id_path(broker), _registration(rng, broker), makepath=True)


def _broker_down(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    zk.delete(paths.broker_id_path(broker))


def _broker_update(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    zk.set(paths.broker_id_path(broker), _registration(rng, broker))


def _topic_create(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    count = rng.randint(1, 4)
    assignment = {p: ReplicaAssignment(_replicas(rng)) for p in range(count)}
    zk.create(
        paths.topic_path(topic),
        codecs.encode_topic_assignment(assignment, rng.choice([None, codecs.new_topic_id()])),
        makepath=True,
    )
    for p in range(count):
        if rng.random() < 0.8:
            _write_state(zk, rng, TopicPartition(topic, p), assignment[p].replicas)


def _topic_reassign(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    data, _ = zk.get(paths.topic_path(topic))
    current = codecs.decode_topic_assignment(topic, data)
    changed: dict[int, ReplicaAssignment] = {}
    for p, a in current.partitions.items():
        if rng.random() < 0.5:
            target = _replicas(rng)
            full = target + tuple(r for r in a.replicas if r not in target)
            adding = tuple(r for r in target if r not in a.replicas)
            removing = tuple(r for r in a.replicas if r not in target)
            changed[p] = ReplicaAssignment(full, adding, removing)
        else:
            changed[p] = ReplicaAssignment(a.replicas)
    zk.set(paths.topic_path(topic), codecs.encode_topic_assignment(changed, current.topic_id))


def _topic_delete(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    zk.delete(paths.topic_path(topic), recursive=True)


def _write_state(zk: KazooClient, rng: random.Random, tp: TopicPartition, replicas: tuple[int, ...]) -> None:
    isr = tuple(r for r in replicas if rng.random() < 0.8) or replicas[:1]
    payload = codecs.encode_leader_and_isr(LeaderAndIsr(rng.choice(isr), rng.randrange(100), isr), rng.randrange(1, 9))
    path = paths.partition_state_path(tp)
    if zk.exists(path):
        zk.set(path, payload)
    else:
        zk.create(path, payload, makepath=True)


def _state_set(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    data, _ = zk.get(paths.topic_path(topic))
    current = codecs.decode_topic_assignment(topic, data)
    if current.partitions:
        p = rng.choice(sorted(current.partitions))
        _write_state(zk, rng, TopicPartition(topic, p), current.partitions[p].replicas)


def _state_garbage(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    zk.set(paths.partition_state_path(TopicPartition(topic, 0)), b"{not json")


def _delete_request(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    zk.create(paths.delete_topic_path(topic), b"", makepath=True)


def _delete_request_done(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    zk.delete(paths.delete_topic_path(topic))


def _reassign_request(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    payload = codecs.encode_reassignment({TopicPartition(topic, rng.randrange(3)): _replicas(rng)})
    if zk.exists(paths.REASSIGN_PARTITIONS_PATH):
        zk.set(paths.REASSIGN_PARTITIONS_PATH, payload)
    else:
        zk.create(paths.REASSIGN_PARTITIONS_PATH, payload, makepath=True)


def _reassign_done(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    zk.delete(paths.REASSIGN_PARTITIONS_PATH)


def _preferred_request(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    payload = codecs.encode_preferred_replica_election([TopicPartition(topic, rng.randrange(3))])
    zk.create(paths.PREFERRED_REPLICA_ELECTION_PATH, payload, makepath=True)


def _preferred_done(zk: KazooClient, rng: random.Random, topic: str, broker: int) -> None:
    zk.delete(paths.PREFERRED_REPLICA_ELECTION_PATH)


_APPLY = {
    "broker_up": _broker_up,
    "broker_down": _broker_down,
    "broker_update": _broker_update,
    "topic_create": _topic_create,
    "topic_reassign": _topic_reassign,
    "topic_delete": _topic_delete,
    "state_set": _state_set,
    "state_garbage": _state_garbage,
    "delete_request": _delete_request,
    "delete_request_done": _delete_request_done,
    "reassign_request": _reassign_request,
    "reassign_done": _reassign_done,
    "preferred_request": _preferred_request,
    "preferred_done": _preferred_done,
}
