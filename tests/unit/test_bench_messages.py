"""scripts/bench_messages.py: the message encode/decode benchmark stays runnable and its output parses."""

from __future__ import annotations

import json

import pytest

from scripts import bench_messages

pytestmark = pytest.mark.unit


def test_the_quick_mode_prints_every_step_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_messages.main(["--quick", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["partitions"], summary["rounds"]) == (2_000, 2)
    for step in bench_messages.STEPS:
        assert 0 <= summary[f"{step}_ms_min"] <= summary[f"{step}_ms_median"]
    # 2,000 partition states of ~190 bytes each: the request really is that big.
    assert summary["leader_and_isr_bytes"] > 2_000 * 150


def test_the_table_names_each_step(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_messages.main(["--partitions", "200", "--rounds", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("200 partitions, 1 rounds")
    assert all(step in out for step in bench_messages.STEPS)


def test_bad_input_is_refused() -> None:
    with pytest.raises(SystemExit, match="at least 1"):
        bench_messages.main(["--rounds", "0"])
