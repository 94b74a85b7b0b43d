"""scripts/bench_context.py: the context-memory benchmark's small mode completes and its output parses."""

from __future__ import annotations

import json

import pytest

from controller_core.states import PartitionState
from scripts import bench_context

pytestmark = pytest.mark.unit


def test_small_mode_prints_the_figures(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_context.main(["--partitions", "2000", "--brokers", "4", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["partitions"] == 2000
    assert summary["context_rss_mb"] >= 0 and summary["load_cpu_s"] >= 0
    assert summary["snapshot_json_mb"] > 0 and summary["snapshot_cpu_s"] >= 0 and "snapshot_peak_mb" in summary


def test_the_context_is_loaded_as_a_failover_loads_it() -> None:
    ctx = bench_context.load(120, 4)
    assert ctx.partition_count == 120 and ctx.partition_with_leaders_count == 120
    assert ctx.partitions_in_state(PartitionState.ONLINE) == set(ctx.all_partitions())
    assert sum(1 for _ in ctx.iter_replica_states()) == 360


def test_bad_input_is_refused() -> None:
    with pytest.raises(SystemExit):
        bench_context.main(["--brokers", "2"])
