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


def test_the_shutdown_step_moves_every_leader_off_each_broker_it_shuts_down() -> None:
    harness = bench_elections.build(700, 7)
    figures = bench_elections.shutdown_rounds(harness, brokers=7)
    assert bench_elections.shutdown_brokers(7) == [1, 4]
    assert len(figures["controlled_shutdown"]) == 2 and all(v > 0 for v in figures["controlled_shutdown"])
    for b in (1, 4):
        assert not harness.ctx.partition_leaders_on_broker(b)
        # Out of the ISR of every partition it follows, and its replicas Offline.
        for pid in harness.ctx.partition_ids_on_broker(b):
            info = harness.ctx.table.leadership[pid]
            assert info is not None and b not in info.leader_and_isr.isr
    kinds = {r["kind"] for r in harness.sink.records}
    assert {"election", "isr_change"} <= kinds


def test_the_json_summary_has_the_shutdown_step_from_seven_brokers(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_elections.main(["--partitions", "700", "--brokers", "7", "--rounds", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["controlled_shutdown_cpu_ms_min"] <= summary["controlled_shutdown_cpu_ms_median"]
