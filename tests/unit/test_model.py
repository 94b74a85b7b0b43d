"""ReplicaAssignment.reassign_to examples from reference §2.1 and LeaderAndIsr operations (§2.2)."""

from __future__ import annotations

import pytest

from controller_core.model import (
    EMPTY_ASSIGNMENT,
    LeaderAndIsr,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)

pytestmark = pytest.mark.unit

RA = ReplicaAssignment.of


@pytest.mark.parametrize(
    ("start", "target", "expected"),
    [
        (RA([1, 2, 3, 4]), [4, 2, 5, 3], RA([4, 2, 5, 3, 1], adding=[5], removing=[1])),
        (RA([1, 2, 3]), [4, 5, 6], RA([4, 5, 6, 1, 2, 3], adding=[4, 5, 6], removing=[1, 2, 3])),
        (RA([1, 2, 3]), [3, 1, 2], RA([3, 1, 2])),
        # re-targeting an in-flight reassignment starts from the origin replicas
        (RA([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3]), [7, 8, 9], RA([7, 8, 9, 1, 2, 3], [7, 8, 9], [1, 2, 3])),
        # cancelling = targeting the origin
        (RA([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3]), [1, 2, 3], RA([1, 2, 3])),
    ],
)
def test_reassign_to(start: ReplicaAssignment, target: list[int], expected: ReplicaAssignment) -> None:
    assert start.reassign_to(target) == expected


def test_reassign_to_same_order_is_not_a_reassignment() -> None:
    assert not RA([1, 2, 3]).reassign_to([3, 1, 2]).is_being_reassigned


@pytest.mark.parametrize(
    "assignment",
    [RA([1, 2, 3]), RA([4, 2, 5, 3, 1], [5], [1]), RA([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3])],
)
def test_reassign_to_target_is_idempotent(assignment: ReplicaAssignment) -> None:
    assert assignment.reassign_to(assignment.target_replicas) == assignment


def test_origin_and_target_replicas() -> None:
    assignment = RA([4, 2, 5, 3, 1], adding=[5], removing=[1])
    assert assignment.origin_replicas == (4, 2, 3, 1)
    assert assignment.target_replicas == (4, 2, 5, 3)
    assert assignment.is_being_reassigned
    assert RA([1], removing=[1]).is_being_reassigned
    assert not RA([1, 2]).is_being_reassigned


def test_remove_replica_removes_it_everywhere() -> None:
    assert RA([4, 5, 6, 1, 2, 3], [4, 5, 6], [1, 2, 3]).remove_replica(5).remove_replica(2) == RA(
        [4, 6, 1, 3], [4, 6], [1, 3]
    )


def test_empty_assignment() -> None:
    assert EMPTY_ASSIGNMENT.replicas == ()
    assert EMPTY_ASSIGNMENT.preferred_replica is None
    assert not EMPTY_ASSIGNMENT.is_being_reassigned


def test_leader_and_isr_operations_bump_the_epoch_by_one_and_keep_the_zk_version() -> None:
    base = LeaderAndIsr(1, 7, (1, 2, 3), zk_version=12)
    assert base.new_leader(2) == LeaderAndIsr(2, 8, (1, 2, 3), 12)
    assert base.new_leader_and_isr(2, [2, 3]) == LeaderAndIsr(2, 8, (2, 3), 12)
    assert base.new_epoch() == LeaderAndIsr(1, 8, (1, 2, 3), 12)
    assert base.with_zk_version(13) == LeaderAndIsr(1, 7, (1, 2, 3), 13)


def test_equals_ignore_zk() -> None:
    base = LeaderAndIsr(1, 7, (1, 2), 3)
    assert base.equals_ignore_zk(base.with_zk_version(9))
    assert not base.equals_ignore_zk(base.new_epoch())


def test_during_delete() -> None:
    assert LeaderAndIsr.during_delete([2, 3]) == LeaderAndIsr(-2, 0, (2, 3), 0)
    assert not LeaderAndIsr.during_delete([1]).has_leader
    assert LeaderAndIsr(0, 0, ()).has_leader


def test_topic_partition_text_forms() -> None:
    tp = TopicPartition("my-topic", 12)
    assert str(tp) == "my-topic-12"
    assert TopicPartition.parse("my-topic-12") == tp
    assert str(PartitionAndReplica(tp, 3)) == "[Topic=my-topic,Partition=12,Replica=3]"
    with pytest.raises(ValueError, match="not a topic-partition"):
        TopicPartition.parse("nodash")
