"""Test-only pause points: block the controller at a named step while a latch file exists.

Why: the fault-injection suite (``scripts/reliability``) must freeze a controller at an exact point
(before a ZooKeeper write, after it, before an event is handled) to build the zombie-controller and
watch-gap scenarios Kafka tests with its ``MockEvent`` latch. The controller runs in its own process,
so the latch is a file: the test creates ``$CONTROLLER_PAUSE_DIR/<step>`` (or ``<step>.<detail>``,
e.g. ``event.BrokerChange``), the process blocks when it reaches the step and shows it by creating
``<step>.paused-<pid>``, and the test removes the latch to release it.

Off unless ``CONTROLLER_PAUSE_DIR`` is set when this module is imported: ``pause_point`` is then one
test of a module global. Never set it in production.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

PAUSE_DIR_ENV = "CONTROLLER_PAUSE_DIR"

#: Steps the controller offers.
STEPS = ("event", "before_write", "after_write")

_PAUSE_DIR: Path | None = Path(os.environ[PAUSE_DIR_ENV]) if os.environ.get(PAUSE_DIR_ENV) else None


def pause_points_enabled() -> bool:
    """Whether this process honours pause points (callers that hold work back for them ask first)."""
    return _PAUSE_DIR is not None


def pause_point(step: str, detail: str = "") -> None:
    """Block while ``<step>`` or ``<step>.<detail>`` exists in the pause directory (when enabled)."""
    if _PAUSE_DIR is not None:
        _wait(_PAUSE_DIR, step, detail)


def _wait(directory: Path, step: str, detail: str) -> None:
    latches = [directory / step] + ([directory / f"{step}.{detail}"] if detail else [])
    held = [latch for latch in latches if latch.exists()]
    if not held:
        return
    marker = directory / f"{step}.paused-{os.getpid()}"
    marker.write_text(detail)
    try:
        while any(latch.exists() for latch in held):
            time.sleep(0.01)
    finally:
        with contextlib.suppress(FileNotFoundError):
            marker.unlink()
