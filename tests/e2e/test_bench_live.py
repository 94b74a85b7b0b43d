"""scripts/bench_live.py stays runnable: a small run of both modes completes and its output parses.

No timing is asserted (benchmarks print figures; docs/dashboard.md has the full-size ones): this
catches a change that breaks the live path end to end (ZooKeeper -> mirror -> Redis -> Channels ->
chromium), or the benchmark itself, e.g. records the mirror's duplicate guard would drop.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.devservices import REPO_ROOT

pytestmark = pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed")


def test_a_small_run_of_both_modes_completes_and_parses(tmp_path: Path, migrated_db_template: Path) -> None:
    out = tmp_path / "bench.json"
    small = ["--partitions", "2000", "--topics", "20", "--failover", "400", "--batch", "100"]
    # The session's migrated database and a short quiet time: what this run proves does not
    # depend on either (the full-size runs keep the 2 s pause).
    quick = ["--db-template", str(migrated_db_template), "--pause-s", "0.5"]
    done = subprocess.run(
        [sys.executable, "scripts/bench_live.py", *small, *quick, "--json", str(out)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]  # 1: a target missed
    summary = json.loads(out.read_text())
    assert set(summary["modes"]) == {"managed", "observed"}
    for mode, figures in summary["modes"].items():
        assert figures["mode"] == mode
        assert (figures["partitions"], figures["failover_partitions"]) == (2000, 400)
        latency = figures["latency_ms"]
        assert all(math.isfinite(v) and v >= 0 for v in latency.values()), (mode, latency)
        assert latency["median"] <= latency["p99"] <= latency["max"]
        assert figures["browser_renders"] > 0
        assert len(summary["timelines"][mode]["commits_down"]) == 4
    assert summary["targets_met"] == all(f["targets_met"] for f in summary["modes"].values())
    assert json.loads(done.stdout[done.stdout.index("{\n") :])["modes"].keys() == summary["modes"].keys()
