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


#: Every scenario twice, and a scenario with more fault variants (F3's four) once per variant: a
#: variant the tier never runs is a fault CI never injects.
RUNS = [(name, run) for name in FAST_TIER for run in range(max(REPETITIONS, SCENARIOS[name].variants))]


def test_every_variant_of_every_scenario_runs() -> None:
    for name in FAST_TIER:
        variants = SCENARIOS[name].variants
        assert {run % variants for n, run in RUNS if n == name} == set(range(variants)), name


@pytest.mark.parametrize(("name", "run"), RUNS)
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
