"""Where the active controller's event thread spends its time, per controller state.

The controller publishes ``per_state_ms`` in its status hash (docs/contracts.md): for each state its
event count, total and longest wall time, and the event thread's own CPU. The difference between
wall and CPU is time its events waited, mostly on ZooKeeper; a state whose time is nearly all CPU is
bound by the controller's own work. Both the overview page and the Prometheus exposition read it
through :func:`state_times`, which tolerates a missing or malformed field (an older controller, a
hand-written hash) by showing nothing rather than failing the page.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class StateTime:
    """One controller state's figures since the controller started (times in milliseconds)."""

    state: str
    events: int
    total_ms: float
    max_ms: float
    cpu_ms: float | None  # None: a controller that does not report it

    @property
    def cpu_percent(self) -> int | None:
        """The event thread's CPU as a share of the state's wall time (None when unknown)."""
        if self.cpu_ms is None or self.total_ms <= 0:
            return None
        return round(100 * min(self.cpu_ms, self.total_ms) / self.total_ms)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def state_times(status: Mapping[str, Any]) -> list[StateTime]:
    """The states of ``status["per_state_ms"]`` (a JSON text or a mapping) with events, busiest first.

    IDLE is left out (its time is not work); entries that are not ``{count, total_ms, ...}`` objects
    with numbers are skipped.
    """
    raw = status.get("per_state_ms")
    if isinstance(raw, str | bytes):
        try:
            raw = json.loads(raw) if raw else {}
        except ValueError:
            return []
    if not isinstance(raw, Mapping):
        return []
    rows: list[StateTime] = []
    for state, timer in raw.items():
        if state == "IDLE" or not isinstance(timer, Mapping):
            continue
        count, total, top = _number(timer.get("count")), _number(timer.get("total_ms")), _number(timer.get("max_ms"))
        if count is None or total is None or count <= 0:
            continue
        rows.append(StateTime(str(state), int(count), total, top or 0.0, _number(timer.get("cpu_ms"))))
    rows.sort(key=lambda r: (-r.total_ms, r.state))
    return rows
