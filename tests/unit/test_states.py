"""The state tables are exactly Kafka's (reference §3.1, §4.1) and every state has a colour."""

from __future__ import annotations

import pytest

from controller_core.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    STATE_COLORS,
    PartitionState,
    ReplicaState,
    is_valid_partition_transition,
    is_valid_replica_transition,
    transition_edges,
)

pytestmark = pytest.mark.unit

# Written out from the reference by hand, not derived from the code under test.
KAFKA_REPLICA_TABLE = {
    "NewReplica": {"NonExistentReplica"},
    "OnlineReplica": {"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"},
    "OfflineReplica": {"NewReplica", "OnlineReplica", "OfflineReplica", "ReplicaDeletionIneligible"},
    "ReplicaDeletionStarted": {"OfflineReplica"},
    "ReplicaDeletionSuccessful": {"ReplicaDeletionStarted"},
    "ReplicaDeletionIneligible": {"OfflineReplica", "ReplicaDeletionStarted"},
    "NonExistentReplica": {"ReplicaDeletionSuccessful"},
}
KAFKA_PARTITION_TABLE = {
    "NewPartition": {"NonExistentPartition"},
    "OnlinePartition": {"NewPartition", "OnlinePartition", "OfflinePartition"},
    "OfflinePartition": {"NewPartition", "OnlinePartition", "OfflinePartition"},
    "NonExistentPartition": {"OfflinePartition"},
}
KAFKA_REPLICA_IDS = {
    "NewReplica": 1,
    "OnlineReplica": 2,
    "OfflineReplica": 3,
    "ReplicaDeletionStarted": 4,
    "ReplicaDeletionSuccessful": 5,
    "ReplicaDeletionIneligible": 6,
    "NonExistentReplica": 7,
}
KAFKA_PARTITION_IDS = {"NewPartition": 0, "OnlinePartition": 1, "OfflinePartition": 2, "NonExistentPartition": 3}


def test_it_has_kafkas_replica_table() -> None:
    table = {str(t): {str(s) for s in prev} for t, prev in REPLICA_VALID_PREVIOUS.items()}
    assert table == KAFKA_REPLICA_TABLE


def test_it_has_kafkas_partition_table() -> None:
    table = {str(t): {str(s) for s in prev} for t, prev in PARTITION_VALID_PREVIOUS.items()}
    assert table == KAFKA_PARTITION_TABLE


def test_it_allows_offline_to_offline_as_kafkas_code_does() -> None:
    assert is_valid_partition_transition(PartitionState.OFFLINE, PartitionState.OFFLINE)


@pytest.mark.parametrize("state", list(ReplicaState))
def test_it_uses_kafkas_replica_byte_values(state: ReplicaState) -> None:
    assert state.kafka_id == KAFKA_REPLICA_IDS[state.value]


@pytest.mark.parametrize("state", list(PartitionState))
def test_it_uses_kafkas_partition_byte_values(state: PartitionState) -> None:
    assert state.kafka_id == KAFKA_PARTITION_IDS[state.value]


@pytest.mark.parametrize("state", [*PartitionState, *ReplicaState])
def test_every_state_has_a_colour(state: PartitionState | ReplicaState) -> None:
    assert STATE_COLORS[state].startswith("#")


def test_every_state_is_a_target_in_its_table() -> None:
    assert set(REPLICA_VALID_PREVIOUS) == set(ReplicaState)
    assert set(PARTITION_VALID_PREVIOUS) == set(PartitionState)


@pytest.mark.parametrize("src", list(ReplicaState))
@pytest.mark.parametrize("dst", list(ReplicaState))
def test_replica_transition_check_matches_the_table(src: ReplicaState, dst: ReplicaState) -> None:
    assert is_valid_replica_transition(src, dst) == (src.value in KAFKA_REPLICA_TABLE[dst.value])


@pytest.mark.parametrize("src", list(PartitionState))
@pytest.mark.parametrize("dst", list(PartitionState))
def test_partition_transition_check_matches_the_table(src: PartitionState, dst: PartitionState) -> None:
    assert is_valid_partition_transition(src, dst) == (src.value in KAFKA_PARTITION_TABLE[dst.value])


def test_diagram_edges_are_the_table() -> None:
    edges = set(transition_edges(PARTITION_VALID_PREVIOUS))
    expected = {(src, dst) for dst, prev in KAFKA_PARTITION_TABLE.items() for src in prev}
    assert edges == expected
    replica_edges = set(transition_edges(REPLICA_VALID_PREVIOUS))
    assert replica_edges == {(src, dst) for dst, prev in KAFKA_REPLICA_TABLE.items() for src in prev}
