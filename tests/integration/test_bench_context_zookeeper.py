"""scripts/bench_context.py --zookeeper: the cold failover's read completes and its output parses."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator

import pytest

from scripts import bench_context

pytestmark = pytest.mark.integration


def test_the_cold_read_reports_every_partition_with_its_phases_and_memory(
    zk_chroot: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    @contextlib.contextmanager
    def given(partitions: int) -> Iterator[str]:  # the test's ZooKeeper instead of a private one
        yield zk_chroot

    monkeypatch.setattr(bench_context, "private_zookeeper", given)
    assert bench_context.main(["--zookeeper", "--partitions", "600", "--brokers", "4", "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["partitions"] == figures["with_leaders"] == 600
    assert figures["requests"] > 0  # the start-ups' LeaderAndIsr and UpdateMetadata
    for phase in ("assignments", "partition_states", "start_ups"):
        assert figures[f"{phase}_wall_s"] >= 0 and figures[f"{phase}_cpu_s"] >= 0
    assert figures["peak_rss_mb"] >= figures["start_rss_mb"] > 0
