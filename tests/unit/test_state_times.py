"""Parsing the controller's ``per_state_ms`` for the overview page and the metrics."""

from __future__ import annotations

import json

import pytest

from dashboard.clusters.state_times import StateTime, state_times

pytestmark = pytest.mark.unit


def test_states_come_busiest_first_without_idle_and_with_their_cpu_share() -> None:
    status = {
        "per_state_ms": json.dumps(
            {
                "IDLE": {"count": 5, "total_ms": 9e9, "max_ms": 1.0, "cpu_ms": 0.0},
                "TOPIC_CHANGE": {"count": 1, "total_ms": 10.0, "max_ms": 10.0, "cpu_ms": 9.6},
                "BROKER_CHANGE": {"count": 2, "total_ms": 400.0, "max_ms": 300.0, "cpu_ms": 100.0},
            }
        )
    }
    rows = state_times(status)
    assert rows == [
        StateTime("BROKER_CHANGE", 2, 400.0, 300.0, 100.0),
        StateTime("TOPIC_CHANGE", 1, 10.0, 10.0, 9.6),
    ]
    assert [r.cpu_percent for r in rows] == [25, 96]


def test_an_older_controller_without_cpu_shows_the_time_and_no_share() -> None:
    (row,) = state_times({"per_state_ms": {"ISR_CHANGE": {"count": 3, "total_ms": 30, "max_ms": 20}}})
    assert (row.events, row.total_ms, row.cpu_ms, row.cpu_percent) == (3, 30.0, None, None)


@pytest.mark.parametrize(
    "raw",
    [None, "", "not json", "[1, 2]", json.dumps({"BROKER_CHANGE": "x"}),
     json.dumps({"A": {"count": "2", "total_ms": 1}}), json.dumps({"A": {"count": True, "total_ms": 1}}),
     json.dumps({"A": {"count": 0, "total_ms": 0}})],
)  # fmt: skip
def test_malformed_or_empty_figures_show_nothing(raw: object) -> None:
    assert state_times({} if raw is None else {"per_state_ms": raw}) == []
