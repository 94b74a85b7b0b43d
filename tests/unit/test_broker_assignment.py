"""Replica assignment as Kafka's AdminUtils does it (rack-unaware and rack-aware), and topic specs."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence

import pytest

from controller_core.admin import (
    AdminOperationError,
    BrokerMetadata,
    InvalidPartitionsError,
    InvalidReplicationFactorError,
    RackAwareMode,
    TopicSpec,
    assign_replicas_to_brokers,
    create_topic,
    rack_alternated_broker_list,
)
from controller_core.model import BrokerRegistration, EndPoint

RACKS = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}


def brokers(racks: Mapping[int, str | None]) -> list[BrokerMetadata]:
    return [BrokerMetadata(b, r) for b, r in racks.items()]


def test_rack_unaware_assignment_matches_kafka() -> None:
    # Kafka's AdminUtilsTest.testReplicaAssignment.
    assignment = assign_replicas_to_brokers(brokers(dict.fromkeys(range(5))), 10, 3, fixed_start_index=0)
    assert assignment == {
        0: (0, 1, 2),
        1: (1, 2, 3),
        2: (2, 3, 4),
        3: (3, 4, 0),
        4: (4, 0, 1),
        5: (0, 2, 3),
        6: (1, 3, 4),
        7: (2, 4, 0),
        8: (3, 0, 1),
        9: (4, 1, 2),
    }


def test_the_rack_alternated_list_takes_one_broker_per_rack_in_turn() -> None:
    assert rack_alternated_broker_list(RACKS) == [0, 3, 1, 5, 4, 2]
    assert rack_alternated_broker_list({k: v for k, v in RACKS.items() if k != 5}) == [0, 3, 1, 4, 2]


def test_rack_aware_assignment_matches_kafka() -> None:
    # Kafka's AdminRackAwareTest.testGetRackAlternatedBrokerListAndAssignReplicasToBrokers.
    assignment = assign_replicas_to_brokers(brokers(RACKS), 7, 3, fixed_start_index=0, start_partition_id=0)
    assert assignment == {
        0: (0, 3, 1),
        1: (3, 1, 5),
        2: (1, 5, 4),
        3: (5, 4, 2),
        4: (4, 2, 0),
        5: (2, 0, 3),
        6: (0, 4, 2),
    }


@pytest.mark.parametrize("seed", range(20))
def test_rack_aware_replicas_span_as_many_racks_as_they_can(seed: int) -> None:
    racks = {i: f"r{i % 3}" for i in range(1, 10)}
    assignment = assign_replicas_to_brokers(brokers(racks), 30, 3, rng=random.Random(seed))
    for replicas in assignment.values():
        assert len(set(replicas)) == 3
        assert len({racks[r] for r in replicas}) == 3
    leaders = Counter(r[0] for r in assignment.values())
    assert set(leaders.values()) == {30 // 9, 30 // 9 + 1}  # leaders spread evenly


def test_partitions_can_start_at_an_offset() -> None:
    assignment = assign_replicas_to_brokers(
        brokers(dict.fromkeys(range(3))), 2, 2, fixed_start_index=0, start_partition_id=4
    )
    assert sorted(assignment) == [4, 5]


@pytest.mark.parametrize(
    ("partitions", "rf", "error"),
    [(0, 1, InvalidPartitionsError), (3, 0, InvalidReplicationFactorError), (3, 4, InvalidReplicationFactorError)],
)
def test_invalid_requests_are_refused(partitions: int, rf: int, error: type[Exception]) -> None:
    with pytest.raises(error):
        assign_replicas_to_brokers(brokers(dict.fromkeys(range(3))), partitions, rf)


def test_mixed_rack_information_follows_the_rack_aware_mode() -> None:
    mixed = brokers({1: "a", 2: None, 3: "b"})
    with pytest.raises(AdminOperationError, match="not all brokers have rack information"):
        assign_replicas_to_brokers(mixed, 3, 2)
    safe = assign_replicas_to_brokers(mixed, 3, 2, rack_aware_mode=RackAwareMode.SAFE, fixed_start_index=0)
    assert safe == assign_replicas_to_brokers(brokers(dict.fromkeys([1, 2, 3])), 3, 2, fixed_start_index=0)
    disabled = assign_replicas_to_brokers(
        brokers(RACKS), 4, 2, rack_aware_mode=RackAwareMode.DISABLED, fixed_start_index=0
    )
    assert disabled[0] == (0, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [("demo-a:12:3", TopicSpec("demo-a", 12, 3)), (" t.x_1:1:1 ", TopicSpec("t.x_1", 1, 1))],
)
def test_topic_specs_parse(text: str, expected: TopicSpec) -> None:
    assert TopicSpec.parse(text) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("demo", "expected NAME:PARTITIONS:REPLICATION_FACTOR"),
        ("demo:x:3", "expected NAME:PARTITIONS:REPLICATION_FACTOR"),
        ("bad/name:1:1", "characters other than"),
        ("demo:0:1", "partitions must be larger than 0"),
        ("demo:1:0", "replication factor must be larger than 0"),
    ],
)
def test_bad_topic_specs_say_why(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TopicSpec.parse(text)


class RecordingTopicStore:
    def __init__(self, racks: Mapping[int, str | None]) -> None:
        self.racks = racks
        self.created: dict[str, tuple[Mapping[int, Sequence[int]], Mapping[str, str] | None]] = {}

    def get_all_broker_registrations(self) -> dict[int, BrokerRegistration]:
        return {
            b: BrokerRegistration(b, (EndPoint("PLAINTEXT", "h", 9000 + b),), epoch=b, rack=r)
            for b, r in self.racks.items()
        }

    def get_all_topics(self) -> set[str]:
        return set(self.created)

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int]],
        config: Mapping[str, str] | None = None,
        topic_id: str | None = None,
    ) -> None:
        self.created[topic] = (assignment, config)


def test_create_topic_assigns_over_the_registered_brokers() -> None:
    store = RecordingTopicStore({1: "a", 2: "b", 3: "a", 4: "b"})
    assignment = create_topic(store, TopicSpec("demo", 8, 2), config={"min.insync.replicas": "2"}, rng=random.Random(1))
    written, config = store.created["demo"]
    assert {p: tuple(r) for p, r in written.items()} == assignment
    assert config == {"min.insync.replicas": "2"}
    assert all(len({store.racks[r] for r in replicas}) == 2 for replicas in assignment.values())


def test_create_topic_needs_brokers() -> None:
    with pytest.raises(AdminOperationError, match="no brokers are registered"):
        create_topic(RecordingTopicStore({}), TopicSpec("demo", 1, 1))
