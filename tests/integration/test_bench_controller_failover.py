"""scripts/bench (``bench_controller.py``): the failover-only small mode completes, its output parses,
and its warm failover took the warm path (the standby's kept context and start-up requests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts import bench_controller

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def test_failover_only_small_mode_prints_both_failovers_and_the_floor() -> None:
    args = ["--partitions", "300", "--brokers", "3", "--runs", "1", "--unbatched-runs", "0", "--scenarios", "failover"]
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_controller.py"), *args, "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    report = json.loads(out.stdout)
    assert report["scenarios"] == "failover" and report["partitions"] == 300
    assert report["failover_s"] > 0 and report["cold_failover_s"] > 0 and report["zk_floor_read_s"] > 0
    assert "broker_failure_s" not in report and "preferred_election_s" not in report
    warm, cold = report["failover_phases_ms"]
    assert "warm_context" in warm and "replica_state_machine" in warm
    assert "assignments" in cold and "warm_context" not in cold


def test_an_unknown_scenario_set_is_refused() -> None:
    with pytest.raises(SystemExit):
        bench_controller.main(["--scenarios", "everything"])
