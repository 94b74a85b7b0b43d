"""scripts/bench_elections.py: the CPU harness for per-partition election work stays runnable and honest."""

from __future__ import annotations

import json

import pytest

from scripts import bench_elections

pytestmark = pytest.mark.unit


def test_every_round_fails_a_broker_and_gives_its_leadership_back() -> None:
    harness = bench_elections.build(600, 6)
    figures = bench_elections.run_rounds(harness, rounds=3, brokers=6)
    assert {name: len(values) for name, values in figures.items()} == {
        "broker_failure": 3,
        "records": 3,
        "preferred_election": 3,
        "replica_startup": 3,
    }
    assert all(v > 0 for values in figures.values() for v in values)
    # Each broker led 100 partitions and leads them again after its round.
    leaders = harness.ctx.partitions_leadership_info
    assert sum(1 for info in leaders.values() if info.leader_and_isr.leader == 1) == 100
    kinds = {r["kind"] for r in harness.sink.records}
    assert "election" in kinds  # the last round's preferred elections, built on flush


def test_the_json_summary_names_each_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_elections.main(["--partitions", "300", "--brokers", "3", "--rounds", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["leaders_per_round"] == 100
    for step in ("broker_failure", "records", "preferred_election", "replica_startup"):
        assert summary[f"{step}_cpu_ms_min"] <= summary[f"{step}_cpu_ms_median"]


def test_bad_input_is_refused() -> None:
    with pytest.raises(SystemExit):
        bench_elections.main(["--rounds", "1"])
    with pytest.raises(SystemExit, match="at least 3"):
        bench_elections.main(["--brokers", "2"])
