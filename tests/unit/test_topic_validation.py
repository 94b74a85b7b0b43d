"""Kafka's topic admin validation (``controller_core.topic_validation``), pure: every §6d case."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller_core.topic_validation import (
    MAX_PARTITIONS,
    ClusterFacts,
    TopicRequestError,
    assign_replicas,
    collides,
    parse_assignment,
    validate_add_partitions,
    validate_create,
    validate_delete,
    validate_name,
)

FACTS = ClusterFacts(
    topics=frozenset({"orders", "pay.ments", "doomed", "moving", "__consumer_offsets"}),
    live_brokers=frozenset({1, 2, 3}),
    marked_for_deletion=frozenset({"doomed"}),
    reassigning=frozenset({"moving"}),
    assignments={"orders": {0: [1, 2], 1: [2, 3]}, "moving": {0: [1, 2]}, "doomed": {0: [1, 2]}},
)


def refused(fn: Any, *args: Any, **kwargs: Any) -> TopicRequestError:
    with pytest.raises(TopicRequestError) as info:
        fn(*args, **kwargs)
    return info.value


# -- names -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("", "empty"),
        (".", "cannot be '.'"),
        ("..", "cannot be '..'"),
        ("x" * 250, "maximum is 249"),
        ("has space", "characters other than"),
        ("a/b", "characters other than"),
        ("nul\0", "characters other than"),
        ("\u043erders", "characters other than"),  # Cyrillic o: a homoglyph
        ("trailing ", "characters other than"),
        ("a/../../controller", "characters other than"),
        (None, "must be a string"),
        (7, "must be a string"),
    ],
)
def test_bad_names(name: Any, message: str) -> None:
    assert message in str(refused(validate_name, name))


def test_the_longest_legal_name_passes() -> None:
    assert validate_name("a" * 249) == "a" * 249


@given(
    st.text(
        alphabet=st.characters(
            blacklist_characters="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
        ),
        min_size=1,
    )
)
def test_any_name_with_an_illegal_character_is_refused(bad: str) -> None:
    with pytest.raises(TopicRequestError):
        validate_name("ok" + bad)


def test_collisions_by_dot_and_underscore() -> None:
    assert collides("pay_ments", "pay.ments") and not collides("orders", "orders")
    error = refused(validate_create, {"name": "pay_ments", "partitions": 1, "replication_factor": 1}, FACTS)
    assert error.status == 409 and "collides with existing topic 'pay.ments'" in str(error)


# -- create ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("request_", "status", "message"),
    [
        ({"name": "orders", "partitions": 1, "replication_factor": 1}, 409, "already exists"),
        ({"name": "doomed", "partitions": 1, "replication_factor": 1}, 409, "marked for deletion"),
        ({"name": "__consumer_offsets", "partitions": 1, "replication_factor": 1}, 400, "internal"),
        ({"name": "t", "partitions": 0, "replication_factor": 1}, 400, "partitions must be between 1"),
        ({"name": "t", "partitions": -3, "replication_factor": 1}, 400, "partitions must be between 1"),
        ({"name": "t", "partitions": "3.0", "replication_factor": 1}, 400, "partitions must be a whole number"),
        ({"name": "t", "partitions": 3.0, "replication_factor": 1}, 400, "partitions must be a whole number"),
        ({"name": "t", "partitions": True, "replication_factor": 1}, 400, "partitions must be a whole number"),
        ({"name": "t", "partitions": None, "replication_factor": 1}, 400, "partitions must be a whole number"),
        ({"name": "t", "partitions": 10**9, "replication_factor": 1}, 400, f"between 1 and {MAX_PARTITIONS}"),
        ({"name": "t", "partitions": 3, "replication_factor": 0}, 400, "replication_factor must be between 1"),
        ({"name": "t", "partitions": 3, "replication_factor": -1}, 400, "replication_factor must be between 1"),
        ({"name": "t", "partitions": 3, "replication_factor": 4}, 400, "larger than the 3 available broker"),
        ({"name": "t", "partitions": 3}, 400, "required"),
        ({"name": "t", "partitions": 3, "replication_factor": 1, "color": "red"}, 400, "unknown field(s) color"),
        ({"name": "t", "partitions": 1, "replication_factor": 1, "assignment": {"0": [1]}}, 400, "either"),
        ("not an object", 400, "must be a JSON object"),
    ],
)
def test_create_refusals(request_: Any, status: int, message: str) -> None:
    error = refused(validate_create, request_, FACTS)
    assert error.status == status and message in str(error)


def test_create_assigns_like_kafka() -> None:
    plan = validate_create({"name": "new", "partitions": 6, "replication_factor": 2}, FACTS, random.Random(1))
    assert sorted(plan.assignment) == list(range(6))
    assert all(len(set(r)) == 2 and set(r) <= {1, 2, 3} for r in plan.assignment.values())
    leaders = [r[0] for r in plan.assignment.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]  # leaders round-robin


def test_kafkas_documented_assignment_example() -> None:
    """AdminUtils' doc: 5 brokers, 10 partitions, RF 3, start index 0."""
    got = assign_replicas([0, 1, 2, 3, 4], 10, 3, start_index=0)
    assert got[0] == [0, 1, 2] and got[4] == [4, 0, 1] and got[5] == [0, 2, 3] and got[9] == [4, 1, 2]


@given(brokers=st.sets(st.integers(0, 50), min_size=1, max_size=8), partitions=st.integers(1, 40), data=st.data())
def test_generated_assignments_always_pass_kafkas_own_checks(brokers: set[int], partitions: int, data: Any) -> None:
    rf = data.draw(st.integers(1, len(brokers)))
    assignment = assign_replicas(sorted(brokers), partitions, rf, rng=random.Random(data.draw(st.integers())))
    assert parse_assignment({str(p): r for p, r in assignment.items()}, brokers) == assignment


# -- explicit assignment ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("assignment", "message"),
    [
        ({"0": [1, 1, 2]}, "Duplicate replica assignment found"),
        ({"0": [1, 2], "1": [1]}, "All partitions should have the same number of replicas"),
        ({"0": [1], "2": [2]}, "consecutive integer sequence"),
        ({"-1": [1]}, "consecutive 0-based integer sequence"),
        ({"0": [9]}, "unknown broker(s) [9]"),
        ({"0": [-1]}, "broker id must be between 0"),
        ({}, "the assignment is empty"),
        ([], "the assignment is empty"),
        ({"0": []}, "non-empty list"),
        ({"0": ["1"]}, "broker id must be a whole number"),
        ({"zero": [1]}, "not a non-negative integer"),
        ("0:1,2", "must be an object"),
    ],
)
def test_bad_explicit_assignments(assignment: Any, message: str) -> None:
    error = refused(validate_create, {"name": "t", "assignment": assignment}, FACTS)
    assert message in str(error) and error.status == 400


def test_an_oversized_assignment_is_refused_before_zookeeper_would() -> None:
    facts = ClusterFacts(topics=frozenset(), live_brokers=frozenset(range(100_000, 100_032)))
    big = {str(p): [100_000 + (p + i) % 32 for i in range(32)] for p in range(MAX_PARTITIONS)}
    assert "znode budget" in str(refused(validate_create, {"name": "t", "assignment": big}, facts))


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"retention.ms": "-2"}, "retention.ms"),
        ({"min.insync.replicas": "3"}, "larger than the replication factor 2"),
        ({"no.such.key": "1"}, "unknown topic config"),
        ({"retention.ms": 5}, "must be a string"),
        ({"cleanup.policy": 'delete"}'}, "not one of"),
        ({"retention.ms": "1\n2"}, "control characters"),
        ({"compression.type": "x" * 5000}, "too long"),
    ],
)
def test_bad_configs(config: dict[str, Any], message: str) -> None:
    request = {"name": "t", "partitions": 1, "replication_factor": 2, "config": config}
    assert message in str(refused(validate_create, request, FACTS))


def test_a_valid_config_passes() -> None:
    request = {"name": "t", "partitions": 1, "replication_factor": 2, "config": {"retention.ms": "-1"}}
    assert validate_create(request, FACTS).config == {"retention.ms": "-1"}


# -- add partitions --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "request_", "status", "message"),
    [
        ("orders", {"partitions": 2}, 400, "must be larger"),
        ("orders", {"partitions": 1}, 400, "must be larger"),
        ("orders", {"partitions": "4"}, 400, "whole number"),
        ("orders", {"partitions": 4.5}, 400, "whole number"),
        ("doomed", {"partitions": 4}, 409, "queued for deletion"),
        ("moving", {"partitions": 4}, 409, "reassignment in progress"),
        ("nope", {"partitions": 4}, 404, "does not exist"),
        ("orders", {"partitions": 4, "assignment": [[1, 2]]}, 400, "needs exactly 2"),
        ("orders", {"partitions": 3, "assignment": [[1, 2, 3]]}, 400, "need 2 replicas"),
        ("orders", {"partitions": 3, "assignment": {"0": [1, 2]}}, 400, "consecutive integer sequence 2..2"),
    ],
)
def test_add_partition_refusals(topic: str, request_: Any, status: int, message: str) -> None:
    error = refused(validate_add_partitions, topic, request_, FACTS)
    assert error.status == status and message in str(error)


def test_added_partitions_continue_the_assignment() -> None:
    plan = validate_add_partitions("orders", {"partitions": 4}, FACTS)
    assert sorted(plan.added) == [2, 3] and all(len(r) == 2 for r in plan.added.values())
    explicit = validate_add_partitions("orders", {"partitions": 3, "assignment": [[3, 1]]}, FACTS)
    assert explicit.added == {2: [3, 1]}


# -- delete ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "request_", "status", "message"),
    [
        ("nope", {"confirm": "nope"}, 404, "does not exist"),
        (".*", {"confirm": ".*"}, 400, "looks like a pattern"),
        ("orders,orders", {"confirm": "orders,orders"}, 400, "looks like a pattern"),
        ("__consumer_offsets", {"confirm": "__consumer_offsets"}, 403, "internal"),
        ("moving", {"confirm": "moving"}, 409, "reassignment in progress"),
        ("orders", {}, 400, "type the topic name 'orders'"),
        ("orders", {"confirm": "order"}, 400, "type the topic name"),
        ("orders", {"confirm": "orders", "force": True}, 400, "unknown field(s) force"),
    ],
)
def test_delete_refusals(topic: str, request_: Any, status: int, message: str) -> None:
    error = refused(validate_delete, topic, request_, FACTS)
    assert error.status == status and message in str(error)


def test_delete_when_disabled_and_when_already_pending() -> None:
    assert refused(validate_delete, "orders", {"confirm": "orders"}, FACTS, deletion_enabled=False).status == 403
    assert validate_delete("doomed", {"confirm": "doomed"}, FACTS).already_pending
    assert not validate_delete("orders", {"confirm": "orders"}, FACTS).already_pending
