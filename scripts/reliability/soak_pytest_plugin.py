"""A pytest plugin that reports each test's outcome as one JSON line, for ``scripts/soak``.

The soak runs the scenarios that need a Celery worker or a browser (F16, F17, F19) as the pytest
tests they are (``scripts/reliability/soak_pytest.py``). Loaded with ``-p`` and given a file in
``KCP_SOAK_RESULTS``, this appends a line per test as soon as it ends (outcome, duration, the
``recovery_s`` the test recorded with ``record_property``, the failure text), so that the soak can
print each run while the next one runs and never has to parse pytest's terminal output.
"""

from __future__ import annotations

import json
import os
import signal
from types import FrameType

import pytest

RESULTS_ENV = "KCP_SOAK_RESULTS"


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    # SIGTERM (the soak's own stop, a kill by name) ends the run like Ctrl-C: pytest then tears its
    # fixtures down, stopping the ZooKeeper, Redis, workers and browsers they started.
    signal.signal(signal.SIGTERM, _interrupt)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = os.environ.get(RESULTS_ENV)
    # The call phase of every test, and a setup or teardown that failed (the soak merges by nodeid).
    if not path or not (report.when == "call" or report.failed):
        return
    line = {
        "nodeid": report.nodeid,
        "outcome": report.outcome,
        "duration_s": round(report.duration, 3),
        "properties": {str(k): v for k, v in report.user_properties},
        "failure": report.longreprtext[-4000:] if report.failed else "",
    }
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(line, default=str) + "\n")
