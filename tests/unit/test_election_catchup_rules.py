"""The catch-up election's rule, pure: "lag under N" is strictly under, and N below 1 is refused."""

from __future__ import annotations

import pytest

from dashboard.actions.election_catchup import CatchUp, Condition, assess, parse


def test_the_lag_must_be_strictly_under_n() -> None:
    option = CatchUp(min_isr_s=5.0, max_lag=10)
    warm = (1, 2)
    assert assess(1, Condition(warm, 6.0, 9), option) == ""
    why = assess(1, Condition(warm, 6.0, 10), option)
    assert why == "replica 1 is 10 messages behind the leader (must be under 10)"
    assert "fewer than 10 messages behind" in option.describe()


def test_n_of_one_means_fully_caught_up() -> None:
    option = CatchUp(min_isr_s=0.0, max_lag=1)
    assert assess(1, Condition((1, 2), 0.0, 0), option) == ""
    assert assess(1, Condition((1, 2), 0.0, 1), option) != ""


@pytest.mark.parametrize("value", [0, "0", -1])
def test_n_below_one_is_refused(value: object) -> None:
    with pytest.raises(ValueError, match=r"must be at least 1|must not be negative"):
        parse({"catch_up": True, "min_isr_s": 1, "max_lag": value})
    assert parse({"catch_up": True, "min_isr_s": 1, "max_lag": 1}) == CatchUp(1.0, 1)
