"""The Python engine reads and classifies records with the Spark job's semantics (SQL nulls included).

The cases are the ones the histories rarely hold: a record without ``kind`` or ``to_state``, a
partition named only by its entity, a snapshot with a null list, a torn line, a field of the wrong
type. What is expected is what ``transforms.prepare_events`` gives for the same record (SQL's
three-valued logic: a null condition in ``when`` is not true). The whole-run equality with Spark is
``tests/integration/test_analytics_small.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from workers.analytics import records as R
from workers.analytics.small import events as E
from workers.analytics.transforms import GONE, LEADERLESS, LED

pytestmark = pytest.mark.unit


def prepared(**fields: Any) -> dict[str, Any]:
    event = E.prepare(E.coerce({"ts": 1000.0, **fields}), "c")
    assert event is not None
    return event


def test_leader_after_minus_one_is_leaderless_whatever_the_kind_even_none() -> None:
    assert prepared(kind=None, leader_after=-1)["state"] == LEADERLESS
    assert prepared(kind=R.KIND_ISR_CHANGE, leader_after=-1)["state"] == LEADERLESS
    assert prepared(kind=R.KIND_FAILED_CHANGE, leader_after=-1)["state"] is None


def test_a_transition_without_to_state_defines_nothing_and_moves_no_soft_leader() -> None:
    # defines_leader is NULL (transition AND NULL): NOT NULL is NULL, so no soft leader either.
    event = prepared(kind=R.KIND_PARTITION_TRANSITION, leader_after=3)
    assert event["state"] is None and event["soft_leader"] is None
    assert prepared(kind=None, leader_after=3)["soft_leader"] is None  # NOT (kind = failed) is NULL
    assert prepared(kind=R.KIND_ISR_CHANGE, leader_after=3)["soft_leader"] == 3


def test_states_from_transitions_and_elections() -> None:
    assert prepared(kind=R.KIND_ELECTION, leader_after=2)["state"] == LED
    assert prepared(kind=R.KIND_PARTITION_TRANSITION, to_state=R.STATE_ONLINE, leader_after=0)["state"] == LED
    assert prepared(kind=R.KIND_PARTITION_TRANSITION, to_state=R.STATE_OFFLINE)["state"] == LEADERLESS
    assert prepared(kind=R.KIND_PARTITION_TRANSITION, to_state=R.STATE_NON_EXISTENT)["state"] == GONE


def test_topic_and_partition_come_from_the_entity_when_left_out() -> None:
    event = prepared(kind=R.KIND_ISR_CHANGE, entity="orders-eu-3@5")
    assert (event["topic"], event["partition"]) == ("orders-eu", 3)
    kept = prepared(kind=R.KIND_ISR_CHANGE, entity="orders-3", topic="t", partition=9)
    assert (kept["topic"], kept["partition"]) == ("t", 9)
    overflow = prepared(kind=R.KIND_ISR_CHANGE, entity="orders-99999999999")
    assert (overflow["topic"], overflow["partition"]) == ("orders", None)  # try_cast: null, not an error
    assert prepared(kind=R.KIND_ISR_CHANGE, entity="no-number")["partition"] is None


def test_isr_shrinks_and_expands_and_snapshot_entities() -> None:
    event = prepared(kind=R.KIND_ISR_CHANGE, isr_before=[1, 2, 3], isr_after=[1, 3, 4])
    assert event["isr_shrink"] and event["isr_expand"]
    assert not prepared(kind=R.KIND_ISR_CHANGE, isr_before=[1], isr_after=None)["isr_shrink"]
    snapshot = prepared(kind=R.KIND_STATE_SNAPSHOT, partition_states={"Online": ["a-0"], "Offline": ["a-1"]})
    assert snapshot["extra"]["snapshot_entities"] == ["a-0", "a-1"]
    # Spark's flatten: a null inner list makes the whole list null.
    nulled = prepared(kind=R.KIND_STATE_SNAPSHOT, partition_states={"Online": ["a-0"], "Offline": None})
    assert nulled["extra"]["snapshot_entities"] is None


def test_fields_of_the_wrong_type_are_null_and_torn_lines_are_dropped(tmp_path: Path) -> None:
    record = E.coerce({"ts": "soon", "partition": 1.5, "controller_epoch": True, "unclean": "yes"})
    assert record["ts"] is None and record["partition"] is None and record["controller_epoch"] is None
    assert record["unclean"] is None
    log = tmp_path / "log.jsonl"
    log.write_text('{"ts": 5, "kind": "election", "leader_after": 1}\n{"ts": 6, "ki')
    events = [E.prepare(r, "c") for r in E.read_lines([log])]
    assert [e is not None for e in events] == [True, False]
    assert events[0] is not None and events[0]["epoch"] == -1 and events[0]["ts"] == 5.0
