"""The soak's scenarios that live as pytest tests: F16, F17 (a real Celery worker) and F19 (a browser).

Their processes are not part of the harness's cluster (a Celery worker with its own SQLite database
and queue, daphne and the mirror behind a real chromium), so they stay the tests that the per-PR
tier runs once or twice. ``scripts/soak`` runs them here the plan's number of times
(``RELIABILITY_RUNS``), in a pytest of their own with its own ZooKeeper and Redis, and folds each run
into the same summary table: pass or fail, the recovery time the test recorded, and a failed run
counted as one violation (liveness when the failure is a missed deadline, safety otherwise).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.devservices import REPO_ROOT, ServiceSet
from scripts.reliability.checker import Violation
from scripts.reliability.scenarios import RunResult, by_name
from scripts.reliability.soak_pytest_plugin import RESULTS_ENV


@dataclass(frozen=True)
class PytestScenario:
    name: str
    title: str
    figure: str
    test: str  # the pytest node id of the parametrized test (``path::function``)
    safety: str  # the safety invariant a failed assertion about effects stands for
    liveness: str  # the liveness check a missed deadline stands for
    plan_runs: int = 20


PYTEST_SCENARIOS: dict[str, PytestScenario] = by_name(
    PytestScenario(
        "F16",
        "Celery worker child SIGKILLed mid-task (acks_late), task redelivered",
        "the action succeeds with one effect: every partition requested exactly once",
        "tests/reliability/test_f16_worker_killed_mid_task.py::test_f16_worker_killed_mid_task_has_one_effect",
        safety="S5",
        liveness="L3",
    ),
    PytestScenario(
        "F17",
        "task outlives the Redis visibility timeout: a second copy runs concurrently",
        "one lease holder; every partition requested exactly once; lease released",
        "tests/reliability/test_f17_task_outlives_visibility_timeout.py"
        "::test_f17_task_outliving_the_visibility_timeout_has_one_effect",
        safety="S5",
        liveness="L3",
    ),
    PytestScenario(
        "F19",
        "pushes lost: channel-layer connections killed, channel overflow, mirror killed, resync unanswered",
        "the page equals ZooKeeper <= 3 s after each fault; its seq never goes back",
        "tests/e2e/test_f19_push_loss.py::test_the_page_recovers_from_lost_pushes_without_going_back",
        safety="S6",
        liveness="L4",
    ),
)

#: Failure texts that mean a deadline was missed (``wait_for``, the page's convergence bound, Playwright).
_DEADLINE_MARKERS = ("timed out", "TimeoutError", "later than", "still shows", "never ")


def _violation(scenario: PytestScenario, failure: str) -> Violation:
    # pytest marks the assertion's lines with "E"; the first one names what failed.
    marked = [ln.strip()[1:].strip() for ln in failure.splitlines() if ln.strip().startswith("E ")]
    rest = failure.strip().splitlines()
    detail = (marked[0] if marked else rest[-1] if rest else "failed")[:300]
    missed_deadline = any(marker in failure for marker in _DEADLINE_MARKERS)
    return Violation(scenario.liveness if missed_deadline else scenario.safety, f"{scenario.name} test: {detail}")


def _run_index(nodeid: str) -> int:
    """``...::test_x[7]`` -> 7 (the tests are parametrized by run number)."""
    return int(nodeid.rsplit("[", 1)[1].rstrip("]")) if nodeid.endswith("]") else 0


def _results_of(scenario: PytestScenario, lines: list[dict[str, Any]]) -> dict[int, RunResult]:
    """Merge the plugin's lines (call, and any failed setup or teardown) into one result per run."""
    runs: dict[int, RunResult] = {}
    for line in lines:
        run = _run_index(str(line["nodeid"]))
        result = runs.setdefault(run, RunResult(scenario.name, run, True, None, [], [], 0.0))
        result.duration_s += float(line.get("duration_s") or 0.0)
        recovery = (line.get("properties") or {}).get("recovery_s")
        if recovery is not None:
            result.recovery_s = float(recovery)
        if line["outcome"] == "failed":
            result.passed = False
            result.violations.append(_violation(scenario, str(line.get("failure") or "")))
            result.notes.append(str(line.get("failure") or "")[-2000:])
        elif line["outcome"] == "skipped":
            result.passed = False
            result.notes.append("skipped: " + str(line.get("failure") or "the test was skipped"))
    return runs


def run_pytest_scenario(
    scenario: PytestScenario, runs: int, work: Path, report: Callable[[RunResult], None]
) -> list[RunResult]:
    """Run ``scenario``'s test ``runs`` times in one pytest; ``report`` each run as it ends."""
    work.mkdir(parents=True, exist_ok=True)
    results_path = work / f"{scenario.name.lower()}-results.jsonl"
    results_path.unlink(missing_ok=True)
    log_path = work / f"{scenario.name.lower()}-pytest.log"
    # The figures as written (the per-PR tier doubles time bounds: RELIABILITY_SLACK, default 2).
    env = {**os.environ, "RELIABILITY_RUNS": str(runs), "RELIABILITY_SLACK": "1", RESULTS_ENV: str(results_path)}
    command = [
        sys.executable,
        *("-m", "pytest", scenario.test),
        *("-p", "scripts.reliability.soak_pytest_plugin", "-p", "no:cacheprovider", "-q"),
        f"--basetemp={work / (scenario.name.lower() + '-tmp')}",
    ]
    reported: set[int] = set()

    def report_finished() -> None:
        """Report each run not reported yet that is final: a later run has a line (the last run is
        reported once pytest has exited, below; an interrupted one never)."""
        merged = _results_of(scenario, _read_lines(results_path))
        last = max(merged, default=-1)
        for run, result in sorted(merged.items()):
            if run not in reported and run < last:
                reported.add(run)
                report(result)

    with open(log_path, "w", encoding="utf-8") as log:
        # Its own session: a Ctrl-C at the terminal reaches the soak only, which then stops pytest with
        # SIGINT (pytest runs its fixtures' teardown: the services and processes they started).
        proc = subprocess.Popen(
            command, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            while proc.poll() is None:
                report_finished()
                time.sleep(1.0)
        finally:
            _stop(proc)
            _stop_leftover_services(work / f"{scenario.name.lower()}-tmp")
            # Interrupted or not, the runs that ended count (an interrupted last one does not).
            report_finished()
    results = _results_of(scenario, _read_lines(results_path))
    for run, result in sorted(results.items()):
        if run not in reported:
            report(result)
    missing = [run for run in range(runs) if run not in results]
    for run in missing:  # pytest died, or never collected the test: a run that did not pass
        tail = log_path.read_text(errors="replace")[-2000:] if log_path.exists() else ""
        result = RunResult(scenario.name, run, False, None, [], [f"no result from pytest ({log_path}):\n{tail}"], 0.0)
        results[run] = result
        report(result)
    return [results[run] for run in sorted(results)]


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Interrupt pytest so that its teardown stops what the fixtures started; kill its group if it hangs."""
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)


def _stop_leftover_services(basetemp: Path) -> None:
    """Stop a ZooKeeper or Redis the test session started and an interrupted pytest left running.

    They run in sessions of their own (``scripts/devservices``), so stopping pytest's process group
    does not reach them; the session's ``services*`` directory holds their pid files, which is all
    ``ServiceSet.down`` needs (the ports are not used to stop them).
    """
    for base_dir in basetemp.glob("services*"):
        ServiceSet(base_dir=base_dir, zk_port=0, redis_port=0).down()


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    # Only complete lines: the plugin may be writing the last one right now.
    complete = path.read_text(encoding="utf-8").split("\n")[:-1]
    return [json.loads(text) for text in complete if text.strip()]
