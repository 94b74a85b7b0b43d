"""scripts/bench_viewers.py stays runnable: a tiny run (a few viewers, one browser) completes and parses.

No timing is asserted (docs/dashboard.md has the full-size figures): this catches a change that
breaks the live protocol as the viewers speak it, the login, the shared-socket web processes, or
the benchmark itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.devservices import REPO_ROOT

pytestmark = pytest.mark.skipif(not Path("/usr/bin/chromium").exists(), reason="Debian's chromium is not installed")


def test_a_tiny_run_with_two_web_processes_completes_and_parses(tmp_path: Path, migrated_db_template: Path) -> None:
    out = tmp_path / "viewers.json"
    tiny = ["--partitions", "400", "--topics", "4", "--failover", "80", "--batch", "40"]
    done = subprocess.run(
        [
            sys.executable,
            "scripts/bench_viewers.py",
            *tiny,
            "--viewers",
            "12",
            "--users",
            "2",  # each user costs a password hash to create and one to log in
            "--browsers",
            "1",
            "--web-processes",
            "2",
            "--settle-s",
            "60",
            "--db-template",
            str(migrated_db_template),  # the session's: one migration fewer
            "--json",
            str(out),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode in (0, 1), done.stdout[-3000:] + done.stderr[-3000:]  # 1: a target missed
    summary = json.loads(out.read_text())
    (run,) = summary["runs"]
    assert (run["viewers"], run["web_processes"], run["partitions"], run["failover_partitions"]) == (12, 2, 400, 80)
    # One address, two processes: the kernel spread the viewers' sockets over both (SO_REUSEPORT hashes
    # each connection; all 12 on one of two processes has odds of 1 in 2,048).
    assert len(run["connections_per_web_process"]) == 2 and min(run["connections_per_web_process"]) > 0, run
    assert run["settled"] and run["stuck_viewers"] == 0 and run["push_missing"] == 0, run
    assert set(run["push_p99_s_by_page"]) == {"overview", "diagram", "broker", "topic"}
    assert 0 <= run["push_p50_s"] <= run["push_p99_s"] <= run["push_max_s"]
    assert summary["push_p99_s"] == run["push_p99_s"]
    assert all(page["n"] > 0 for page in run["pages"].values()), run["pages"]
    assert run["browser_push_p99_s"] is not None and run["web_peak_rss_mb"] > 0
    storm = run["resync_storm"]  # every page resynced at once after the mirror rebuilt its snapshot
    assert storm["viewers_resynced"] == 12 and storm["mirror_rebuilt_s"] is not None, storm
    assert summary["targets_met"] == run["targets_met"]
    assert json.loads(done.stdout[done.stdout.rindex("\n{\n") :])["push_p99_s"] == summary["push_p99_s"]
