"""scripts/bench (``bench_controller.py``): its small modes complete and their output parses; the
failover-only one's warm failover took the warm path (the standby's kept context and start-up requests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from scripts import bench_controller

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]


def bench_report(*args: str) -> dict[str, Any]:
    """``scripts/bench_controller.py ARGS --json`` at 300 partitions on 3 brokers, 1 run: its report."""
    small = ["--partitions", "300", "--brokers", "3", "--runs", "1"]
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "bench_controller.py"), *small, *args, "--json"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    report: dict[str, Any] = json.loads(out.stdout)
    return report


def test_failover_only_small_mode_prints_both_failovers_and_the_floor() -> None:
    report = bench_report("--unbatched-runs", "0", "--scenarios", "failover")
    assert report["scenarios"] == "failover" and report["partitions"] == 300
    assert report["failover_s"] > 0 and report["cold_failover_s"] > 0 and report["zk_floor_read_s"] > 0
    assert "broker_failure_s" not in report and "preferred_election_s" not in report
    warm, cold = report["failover_phases_ms"]
    assert "warm_context" in warm and "replica_state_machine" in warm
    assert "assignments" in cold and "warm_context" not in cold


def test_an_unknown_scenario_set_is_refused() -> None:
    with pytest.raises(SystemExit):
        bench_controller.main(["--scenarios", "everything"])


def test_every_scenario_small_mode_reports_each_figure_with_the_machine_cpu() -> None:
    """Every scenario, batched and unbatched, at a small size: each figure, the controller's CPU and the
    machine's CPU over the figure's window by role (scripts/support/machine_cpu.py)."""
    report = bench_report("--unbatched-runs", "1")
    for scenario in ("broker_failure", "controlled_shutdown", "preferred_election"):
        for prefix in ("", "unbatched_"):
            assert report[f"{prefix}{scenario}_s"] > 0
            (machine,) = report[f"{prefix}{scenario}_machine_cpu_runs"]
            assert set(machine["by_role_cpu_s"]) == {"controller", "standby", "zookeeper", "agents", "benchmark"}
            # Each role found its processes (ZooKeeper's by the service's pid file; the agents still up).
            assert machine["processes"]["zookeeper"] == machine["processes"]["controller"] == 1
            assert machine["processes"]["standby"] == 1 and machine["processes"]["agents"] >= 1
            assert machine["wall_s"] > 0 and machine["busy_cpu_s"] >= 0 and machine["others_cpu_s"] >= 0
    (floor,) = report["zk_floor_write_machine_cpu_runs"]
    assert floor["processes"] == {"zookeeper": 1} and floor["by_role_cpu_s"]["zookeeper"] >= 0
