"""Per-cluster cursor of the every-few-minutes run: how much of today's log earlier runs counted.

Why: beat sends ``workers.analytics.current`` every few minutes so that today's analytics stay
current. A run reads only the bytes of today's file after its cluster's cursor (whole lines), starts
from the state the previous run saved at its end, and its results are added to the stored ones, so
a run costs what its new records cost, not what the day so far does. The cursor itself is the
``AnalyticsCursor`` row (``runner`` moves it in the transaction that loads the run); this module is
the file side: where a log ends now, and the slice of it a run reads.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from workers.analytics import records as R

SLICES_DIR = "_slices"
_CHUNK = 1 << 16


@dataclass(frozen=True, slots=True)
class Position:
    """How far a cluster's log for ``day`` was read: ``bytes`` of whole lines; ``state_ms`` the instant
    the state saved by that run describes (``None``: no state saved, the next run starts at midnight)."""

    day: date
    bytes: int
    state_ms: int | None = None


def whole_lines_end(path: Path, size: int) -> int:
    """The end of the last complete line within the first ``size`` bytes of ``path`` (0 if none).

    The controller appends while we read: a line without its newline yet is left for the next run.
    """
    with path.open("rb") as fh:
        end = size
        while end > 0:
            start = max(0, end - _CHUNK)
            fh.seek(start)
            chunk = fh.read(end - start)
            newline = chunk.rfind(b"\n")
            if newline >= 0:
                return start + newline + 1
            end = start
    return 0


def current_position(input_dir: Path, cluster: str, day: date) -> Position | None:
    """Where ``cluster``'s file for ``day`` ends now (whole lines), or ``None`` when there is no such file."""
    path = input_dir / cluster / R.file_name_for(day)
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    return Position(day, whole_lines_end(path, size))


def grown(input_dir: Path, day: date, saved: Mapping[str, Position]) -> dict[str, Position]:
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
        last = saved.get(child.name)
        if last is None or last.day != day or now.bytes > last.bytes:
            found[child.name] = now
    return found


def write_slice(input_dir: Path, cluster: str, day: date, start: int, end: int, dest_dir: Path) -> Path:
    """Copy bytes ``[start, end)`` of ``cluster``'s log for ``day`` to ``dest_dir`` (same file name).

    The job reads the copy, so what it reads is exactly what the cursor will record, however much
    the controller appends meanwhile.
    """
    dest = dest_dir / cluster / R.file_name_for(day)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with (input_dir / cluster / R.file_name_for(day)).open("rb") as src, dest.open("wb") as out:
        src.seek(start)
        remaining = end - start
        while remaining > 0:
            chunk = src.read(min(remaining, 1 << 20))
            if not chunk:
                break
            out.write(chunk)
            remaining -= len(chunk)
    return dest


def remove_slices(output_dir: Path, name: str) -> None:
    shutil.rmtree(output_dir / SLICES_DIR / name, ignore_errors=True)
