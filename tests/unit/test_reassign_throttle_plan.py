"""Which replicas a reassignment throttles: kafka-reassign-partitions' choice (the moving partitions'
current replicas on the leader side, their new replicas on the follower side), and the form's rate."""

from __future__ import annotations

import pytest

from controller_core.model import TopicPartition
from dashboard.actions.reassign_throttle import ThrottleError, parse_form_rate, parse_rate, plan


def test_only_moving_partitions_are_throttled_leader_side_current_follower_side_new() -> None:
    requested = {
        TopicPartition("orders", 0): (1, 3),  # 3 is new
        TopicPartition("orders", 1): (2, 1),  # a reorder: nothing copied
        TopicPartition("audit", 2): (4, 5, 6),  # 6 is new (replication factor 2 -> 3)
    }
    origin = {
        TopicPartition("orders", 0): (1, 2),
        TopicPartition("orders", 1): (1, 2),
        TopicPartition("audit", 2): (4, 5),
    }
    assert plan(requested, origin) == {
        "topics": {
            "audit": {"leader": "2:4,2:5", "follower": "2:6"},
            "orders": {"leader": "0:1,0:2", "follower": "0:3"},
        },
        "brokers": [1, 2, 3, 4, 5, 6],
    }
    assert plan({TopicPartition("t", 0): (1,)}, {TopicPartition("t", 0): (1, 2)}) == {"topics": {}, "brokers": []}


@pytest.mark.parametrize("bad", [0, -1, 1.5, "10", True, None, 10**15])
def test_api_rates_must_be_positive_whole_numbers(bad: object) -> None:
    with pytest.raises(ThrottleError):
        parse_rate(bad)
    assert parse_rate(10_000_000) == 10_000_000


def test_the_form_takes_mb_per_second() -> None:
    assert parse_form_rate("") is None and parse_form_rate("  ") is None
    assert parse_form_rate("2.5") == 2_500_000 and parse_form_rate("0.01") == 10_000
    for bad in ("0", "-1", "fast", "nan", "inf", "1e-9"):
        with pytest.raises(ThrottleError):
            parse_form_rate(bad)
