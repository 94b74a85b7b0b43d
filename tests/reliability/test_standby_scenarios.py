"""The warm-standby fault scenarios (F23-F27, issue 28) against real processes, once per variant.

Single-node ZooKeeper (the session's), three controller candidates behind their own fault proxies,
three broker agents, Ts = 4 s; each run ends with the heal phase and the full history checker
(S1-S6, L1-L5). Time bounds doubled (a loaded CI box); the soak (``scripts/soak``) applies them as
written, against a 3-node ensemble.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.devservices import ZooKeeperServer
from scripts.reliability.scenarios import Settings, run_scenario
from scripts.reliability.scenarios_standby import STANDBY_SCENARIOS

pytestmark = pytest.mark.slow

SETTINGS = Settings(slack=2.0)
RUNS = [(name, run) for name, sc in STANDBY_SCENARIOS.items() for run in range(sc.variants)]


@pytest.mark.parametrize(("name", "run"), RUNS)
def test_standby_scenario(name: str, run: int, zk_server: ZooKeeperServer, tmp_path: Path) -> None:
    if not zk_server.ready():
        zk_server.start()
    scenario = STANDBY_SCENARIOS[name]
    result = run_scenario(scenario, run, tmp_path, [(zk_server.host, zk_server.port)], seed=run, settings=SETTINGS)
    report = "\n".join(
        [f"{name} run {run}: {scenario.title} ({scenario.figure})"] + [str(v) for v in result.violations] + result.notes
    )
    print(report)  # shown with -rP: what the run did (conflicts met, failover path)
    assert not result.violations, report
    assert result.passed, report
