"""How ``scripts/soak`` turns the pytest-hosted scenarios' lines (F16, F17, F19) into its runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.devservices import REPO_ROOT
from scripts.reliability.soak import TABLE
from scripts.reliability.soak_pytest import PYTEST_SCENARIOS, _read_lines, _results_of
from scripts.reliability.soak_pytest_plugin import RESULTS_ENV

pytestmark = pytest.mark.unit

F16 = PYTEST_SCENARIOS["F16"]


def _line(run: int, outcome: str, recovery: float | None = None, failure: str = "") -> dict[str, object]:
    return {
        "nodeid": f"{F16.test}[{run}]",
        "outcome": outcome,
        "duration_s": 10.0,
        "properties": {} if recovery is None else {"recovery_s": recovery},
        "failure": failure,
    }


def test_the_table_holds_every_scenario_of_the_plan_in_number_order() -> None:
    assert list(TABLE) == [f"F{n}" for n in range(1, 28)]  # F23-F27: the warm standby's scenarios


def test_each_run_gets_its_outcome_recovery_and_classified_failure() -> None:
    lines = [
        _line(0, "passed", 1.25),
        _line(1, "failed", failure="    def test():\nE   AssertionError: timed out after 90s waiting for x"),
        _line(2, "failed", failure="E   assert Counter({'orders-0': 2}) == Counter({'orders-0': 1})"),
        _line(3, "passed", 2.0),
        _line(3, "failed", failure="E   RuntimeError: worker did not stop"),  # its teardown failed
    ]
    runs = _results_of(F16, lines)
    assert [(r.run, r.passed, r.recovery_s) for r in runs.values()] == [
        (0, True, 1.25),
        (1, False, None),
        (2, False, None),
        (3, False, 2.0),
    ]
    assert [str(v) for v in runs[1].violations] == ["L3: F16 test: AssertionError: timed out after 90s waiting for x"]
    assert runs[2].violations[0].safety and runs[2].violations[0].invariant == "S5"
    assert runs[3].duration_s == 20.0


def test_a_line_still_being_written_is_not_read(tmp_path: Path) -> None:
    path = tmp_path / "results.jsonl"
    path.write_text(json.dumps(_line(0, "passed")) + "\n" + '{"nodeid": "tests/x.py::t[1]", "outc')
    assert [line["nodeid"] for line in _read_lines(path)] == [f"{F16.test}[0]"]


def test_the_plugin_writes_a_line_per_test_with_its_recorded_recovery(tmp_path: Path) -> None:
    test_file = tmp_path / "test_sample.py"
    test_file.write_text(
        "import pytest\n"
        "@pytest.mark.parametrize('run', range(2))\n"
        "def test_sample(run, record_property):\n"
        "    record_property('recovery_s', 0.5 + run)\n"
        "    assert run == 0, 'the second run fails'\n"
    )
    results = tmp_path / "results.jsonl"
    subprocess.run(
        [sys.executable, "-m", "pytest", str(test_file), "-p", "scripts.reliability.soak_pytest_plugin", "-q"],
        cwd=REPO_ROOT,
        env={**os.environ, RESULTS_ENV: str(results)},
        capture_output=True,
        check=False,
        timeout=120,
    )
    lines = _read_lines(results)
    assert [(line["outcome"], line["properties"]) for line in lines] == [
        ("passed", {"recovery_s": 0.5}),
        ("failed", {"recovery_s": 1.5}),
    ]
    assert "the second run fails" in str(lines[1]["failure"])
