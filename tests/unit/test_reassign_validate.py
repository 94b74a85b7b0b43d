"""Validation of Kafka reassignment JSON against the cluster (``controller_core.reassign_plan.validate``)."""

from __future__ import annotations

from typing import Any

import pytest

from controller_core.model import ReplicaAssignment
from controller_core.model import TopicPartition as TP
from controller_core.reassign_plan import (
    MAX_INPUT_BYTES,
    ClusterView,
    encoded_size,
    parse_document,
    to_kafka_json,
    validate,
)
from controller_core.zk.paths import MAX_ZNODE_BYTES

CLUSTER = ClusterView(
    assignments={
        TP("orders", 0): ReplicaAssignment.of([1, 2]),
        TP("orders", 1): ReplicaAssignment.of([2, 3]),
        # moving from [3, 1] to [3, 4]
        TP("moving", 0): ReplicaAssignment.of([3, 4, 1], adding=[4], removing=[1]),
        TP("doomed", 0): ReplicaAssignment.of([1, 2]),
    },
    brokers=frozenset({1, 2, 3, 4}),
    topics_being_deleted=frozenset({"doomed"}),
)


def doc(*entries: Any, **top: Any) -> dict[str, Any]:
    return {"version": 1, "partitions": list(entries), **top}


def entry(topic: str = "orders", partition: Any = 0, replicas: Any = (3, 4), **more: Any) -> dict[str, Any]:
    return {
        "topic": topic,
        "partition": partition,
        "replicas": list(replicas) if isinstance(replicas, tuple) else replicas,
        **more,
    }


def test_a_good_request_is_accepted() -> None:
    v = validate(doc(entry(), entry(partition=1, replicas=(1, 4))), CLUSTER)
    assert v.ok, v.errors
    assert v.partitions == {TP("orders", 0): (3, 4), TP("orders", 1): (1, 4)}


def test_log_dirs_any_is_accepted_and_paths_refused() -> None:
    assert validate(doc(entry(log_dirs=["any", "any"])), CLUSTER).ok
    v = validate(doc(entry(log_dirs=["/data/a", "any"])), CLUSTER)
    assert not v.ok and "AlterReplicaLogDirs" in v.errors[0]
    assert "one entry per replica" in validate(doc(entry(log_dirs=["any"])), CLUSTER).errors[0]


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (doc(entry(replicas=(3, 9))), "unknown broker(s) 9 (registered brokers: 1, 2, 3, 4)"),
        (doc(entry(replicas=(3, -1))), "broker ids must be non-negative integers (got -1)"),
        (doc(entry(replicas=[3, "4"])), 'broker ids must be non-negative integers (got "4")'),
        (doc(entry(replicas=[3, 4.5])), "broker ids must be non-negative integers (got 4.5)"),
        (doc(entry(replicas=[3, True])), "broker ids must be non-negative integers (got true)"),
        (doc(entry(replicas=(3, 3))), "duplicate replica(s) 3"),
        (doc(entry(replicas=[])), "the replica list is empty"),
        (doc(entry(replicas="3,4")), "replicas must be a list"),
        (doc(entry(topic="nope")), "unknown topic 'nope'"),
        (doc(entry(partition=7)), "unknown partition (topic 'orders' has partitions 0..1)"),
        (doc(entry(partition="0")), "partition must be a non-negative integer"),
        (doc(entry(partition=-1)), "partition must be a non-negative integer"),
        (doc(entry(topic="")), "topic must be a non-empty string"),
        (doc(entry(), entry(replicas=(1, 4))), "orders-0 is listed more than once"),
        (doc(entry(replicas=(1, 3, 4))), "the replication factor would change from 2 to 3"),
        (doc(entry(replicas=(4,))), "the replication factor would change from 2 to 1"),
        (doc(entry(topic="doomed")), "topic 'doomed' is queued for deletion"),
        (
            doc(entry(topic="moving", replicas=(2, 4))),
            'already being reassigned to [3, 4] (from [3, 1]); tick "replace"',
        ),
        (doc(entry(), version=2), "version must be 1 (got 2)"),
        (doc(entry(), version="1"), 'version must be 1 (got "1")'),
        ({"partitions": [entry()]}, "version must be 1 (got null)"),
        (doc(entry(), extra=1), "unknown key(s) extra"),
        (doc(entry(rack="x")), "unknown key(s) rack"),
        (doc(), "partitions is empty"),
        ({"version": 1}, "partitions must be a list"),
        ([entry()], "must be a JSON object"),
        (doc("orders-0"), "partitions[0] must be an object"),
    ],
)
def test_each_bad_input_gets_a_clear_message(document: Any, message: str) -> None:
    v = validate(document, CLUSTER)
    assert not v.ok
    assert any(message in e for e in v.errors), v.errors
    assert v.partitions == {}


def test_replace_retargets_a_running_move_knowingly() -> None:
    v = validate(doc(entry(topic="moving", replicas=(2, 4))), CLUSTER, replace=True)
    assert v.ok, v.errors
    assert v.replacing == [TP("moving", 0)]


def test_a_pending_request_refuses_another() -> None:
    busy = ClusterView(CLUSTER.assignments, CLUSTER.brokers, pending_request={TP("orders", 1): (1, 3)})
    v = validate(doc(entry()), busy)
    assert any("already pending in /admin/reassign_partitions (1 partitions: orders-1)" in e for e in v.errors)


def test_oversized_requests_are_refused() -> None:
    many = {TP("big-topic-with-a-long-name", p): ReplicaAssignment.of([1, 2]) for p in range(25_000)}
    cluster = ClusterView(many, frozenset({1, 2, 3}))
    request = {tp: (2, 3) for tp in many}
    assert encoded_size(request) > MAX_ZNODE_BYTES
    v = validate(to_kafka_json(request), cluster)
    assert any("over ZooKeeper's znode limit" in e for e in v.errors)
    assert v.partitions == {}
    _, error = parse_document("x" * (MAX_INPUT_BYTES + 1))
    assert error is not None and "at most" in error


def test_parse_document_reports_bad_json_and_empty_input() -> None:
    assert parse_document('{"version":1,')[1] is not None and "not valid JSON" in str(parse_document("{")[1])
    assert "empty" in str(parse_document("   ")[1])
    assert parse_document('{"version": 1, "partitions": []}') == ({"version": 1, "partitions": []}, None)
