"""Per-cluster cursor of the every-few-minutes run: how much of today's log the last run covered.

Why: beat sends ``workers.analytics.current`` every few minutes so that today's analytics stay
current, but most of those minutes nothing was logged. The cursor (today's file size when the last
successful run started) lets the task skip Spark entirely when no cluster's log grew, and run only
the clusters whose log did.

Stored as ``<output>/_cursor/<cluster>.json`` (``{"day": "YYYY-MM-DD", "bytes": N}``), written
atomically after the run's results are loaded, so a failed run is retried on the next tick.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from workers.analytics import records as R

CURSOR_DIR = "_cursor"


@dataclass(frozen=True, slots=True)
class Position:
    """How far a cluster's log for ``day`` reached: its size in bytes."""

    day: date
    bytes: int


def current_position(input_dir: Path, cluster: str, day: date) -> Position | None:
    """The size of ``cluster``'s file for ``day`` now, or ``None`` when there is no such file."""
    path = input_dir / cluster / R.file_name_for(day)
    try:
        return Position(day, path.stat().st_size)
    except FileNotFoundError:
        return None


def saved_position(output_dir: Path, cluster: str) -> Position | None:
    try:
        data = json.loads((output_dir / CURSOR_DIR / f"{cluster}.json").read_text())
        return Position(date.fromisoformat(data["day"]), int(data["bytes"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None  # none yet, or unreadable: the next run recomputes today and writes a good one


def save_position(output_dir: Path, cluster: str, position: Position) -> None:
    root = output_dir / CURSOR_DIR
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{cluster}.json.tmp"
    tmp.write_text(json.dumps({"day": position.day.isoformat(), "bytes": position.bytes}) + "\n")
    tmp.replace(root / f"{cluster}.json")


def grown(input_dir: Path, output_dir: Path, day: date) -> dict[str, Position]:
    """Clusters whose log for ``day`` has grown past their cursor, with their position now."""
    found: dict[str, Position] = {}
    if not input_dir.is_dir():
        return found
    for child in sorted(input_dir.iterdir()):
        if not child.is_dir() or child.name.startswith((".", "_")):
            continue
        now = current_position(input_dir, child.name, day)
        if now is None:
            continue
        last = saved_position(output_dir, child.name)
        if last is None or last.day != day or now.bytes > last.bytes:
            found[child.name] = now
    return found
