"""scripts/bench_elections.py --zookeeper: the elections write through ZkStore, rounds stay consistent."""

from __future__ import annotations

import json

import pytest
from kazoo.client import KazooClient

from controller_core.zk import codecs, paths
from scripts import bench_elections

pytestmark = pytest.mark.integration


def test_rounds_on_zookeeper_move_leaders_in_zookeeper_and_report_wall_and_floor(
    zk_chroot: str, zk: KazooClient
) -> None:
    on_zookeeper = bench_elections.ZooKeeperRounds(600, 6, zk_chroot)
    try:
        figures = bench_elections.run_rounds(on_zookeeper.harness, rounds=3, brokers=6, on_zookeeper=on_zookeeper)
    finally:
        on_zookeeper.close()

    steps = ("broker_failure", "records", "preferred_election")
    assert set(figures) == {*steps, *(f"{s}_wall" for s in steps), "write_floor_wall"}
    assert all(len(values) == 3 and all(v > 0 for v in values) for values in figures.values())
    # Each round's elections were written to ZooKeeper, not only cached: broker 1 failed in round 1
    # (its 100 partitions got a new leader, then it was elected back); versions moved by the failure,
    # the floor's write, the rejoin and the preferred election.
    data, stat = zk.get(paths.partition_state_path(bench_elections.partition_at(0)))
    state = codecs.decode_partition_state(data, stat.version)
    assert state.leader_and_isr.leader == 1 and set(state.leader_and_isr.isr) == {1, 2, 3}
    assert stat.version == 4
    cached = on_zookeeper.harness.ctx.partition_leadership_info(bench_elections.partition_at(0))
    assert cached is not None and cached.leader_and_isr.zk_version == stat.version


def test_the_json_summary_on_zookeeper_has_the_floor_ratios(
    zk_chroot: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # The script's own private ZooKeeper is replaced by the test's (same server kind, started by the fixtures).
    monkeypatch.setattr(bench_elections, "private_zookeeper", lambda: _given(zk_chroot))
    args = ["--partitions", "300", "--brokers", "3", "--rounds", "2", "--zookeeper", "--json"]
    assert bench_elections.main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["store"] == "zookeeper"
    # Each round's wall time includes its CPU time (0.1 ms of rounding either way).
    assert summary["broker_failure_wall_ms_median"] >= summary["broker_failure_cpu_ms_median"] - 0.2
    assert summary["write_floor_wall_ms_min"] > 0
    assert summary["broker_failure_wall_over_floor_min"] > 0


class _given:
    """A context manager yielding an existing connect string (stands in for ``private_zookeeper``)."""

    def __init__(self, hosts: str) -> None:
        self.hosts = hosts

    def __enter__(self) -> str:
        return self.hosts

    def __exit__(self, *exc: object) -> None:
        return None
