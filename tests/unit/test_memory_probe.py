"""The failover's memory probe: off unless asked for; on, one parseable line per phase (and top sites
when tracing)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "from controller_core import memory_probe as p; print(p.enabled()); p.phase_done('assignments')"


def _run(tmp_path: Path, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("CONTROLLER_MEMORY_PROBE")}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO_ROOT, env=clean | env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_off_by_default_writes_nothing(tmp_path: Path) -> None:
    assert _run(tmp_path) == "False"
    assert list(tmp_path.iterdir()) == []


def test_rss_only_writes_one_line_per_phase(tmp_path: Path) -> None:
    assert _run(tmp_path, CONTROLLER_MEMORY_PROBE=str(tmp_path)) == "True"
    (out,) = tmp_path.iterdir()
    (line,) = out.read_text().splitlines()
    assert re.fullmatch(r"\d+\.\d{3} == assignments: VmRSS \d+ MB, VmHWM in phase \d+ MB", line)


def test_tracing_adds_the_traced_figures_and_the_top_lines(tmp_path: Path) -> None:
    _run(tmp_path, CONTROLLER_MEMORY_PROBE=str(tmp_path), CONTROLLER_MEMORY_PROBE_FRAMES="1")
    (out,) = tmp_path.iterdir()
    head, *sites = out.read_text().splitlines()
    assert re.search(r"== assignments: VmRSS \d+ MB, .*traced [\d.]+ MB, traced peak in phase [\d.]+ MB$", head)
    assert sites[-1].startswith("  (probe took")
    assert all(re.fullmatch(r"\s+[\d.]+ MB\s+\d+ blocks  .+:\d+", site) for site in sites[:-1])
    assert len(sites) > 1
