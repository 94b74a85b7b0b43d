"""SQL's aggregates and arithmetic over nullable values, as Spark computes them, for the Python engine.

Spark's ``sum``/``min``/``max``/``first(ignorenulls)`` skip nulls and give null for a group with no
value; ``a - b`` is null when either side is. The Python tables must agree with Spark's row for row
(tests/integration/test_analytics_small.py), so every table uses these instead of the built-ins.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import Any

from workers.analytics.small.events import Record
from workers.analytics.transforms import ReportWindow


def in_window(ts: float | None, window: ReportWindow) -> bool:
    """Whether a timestamp falls in the counted part of the report window (null never does)."""
    return ts is not None and window.counted_from_ms <= ts < window.end_ms


def sql_sum(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def sql_min(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def sql_max(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def sql_first(values: Iterable[Any]) -> Any:
    """``first(x, ignorenulls=True)`` over values already in the group's order."""
    return next((v for v in values if v is not None), None)


def sql_minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


def group_by(rows: Iterable[Record], key: Callable[[Record], Any]) -> dict[Any, list[Record]]:
    """Rows by key, each group in input order (``groupBy`` before an ordered aggregate)."""
    groups: dict[Any, list[Record]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return groups
