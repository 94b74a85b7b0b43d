"""The per-PR reliability tier: scenarios F1-F6, F10, F11 and F18 against real processes, twice each.

Single-node ZooKeeper (the session's), three controller candidates behind their own fault proxies,
three lightweight broker agents, Ts = 4 s. Every run ends with the heal phase and the full history
checker (S1-S6, L1-L5); a run passes when nothing was violated and its pass figure is met (time
bounds doubled here: a loaded CI box; the soak applies them as written). The full
table, the 3-node ensemble and the randomized nemesis run from ``scripts/soak``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.devservices import ZooKeeperServer
from scripts.reliability.scenarios import FAST_TIER, SCENARIOS, Settings, run_scenario

pytestmark = pytest.mark.slow

REPETITIONS = 2
#: Twice each figure's time bound (a loaded CI box); safety and liveness are checked as they are.
SETTINGS = Settings(slack=2.0)


@pytest.mark.parametrize("run", range(REPETITIONS))
@pytest.mark.parametrize("name", FAST_TIER)
def test_scenario(name: str, run: int, zk_server: ZooKeeperServer, tmp_path: Path) -> None:
    if not zk_server.ready():
        zk_server.start()
    scenario = SCENARIOS[name]
    result = run_scenario(scenario, run, tmp_path, [(zk_server.host, zk_server.port)], seed=run, settings=SETTINGS)
    report = "\n".join(
        [f"{name} run {run}: {scenario.title} ({scenario.figure})"] + [str(v) for v in result.violations] + result.notes
    )
    assert not result.violations, report
    assert result.passed, report
