"""Durations on the analytics pages read as people read them (issue #30: not "0.00709 s")."""

from __future__ import annotations

import pytest

from dashboard.analytics.templatetags.analytics_format import duration


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (None, ""),
        (0.0, "0 ms"),
        (0.00709, "7.1 ms"),
        (0.0004, "0.4 ms"),
        (0.25, "250 ms"),
        (0.9996, "1.0 s"),
        (1.0, "1.0 s"),
        (6.2, "6.2 s"),
        (9.96, "10 s"),
        (42.4, "42 s"),
        (184.0, "3 min 4 s"),
        (607.1667, "10 min 7 s"),
        (7440.0, "2 h 4 min"),
        (266_400.0, "3 d 2 h"),
        (-0.5, "-500 ms"),
    ],
)
def test_durations_read_as_people_read_them(seconds: float | None, shown: str) -> None:
    assert duration(seconds) == shown
