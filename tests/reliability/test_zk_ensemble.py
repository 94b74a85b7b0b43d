"""The soak's ZooKeeper ensemble starts in both sizes it offers (``scripts/soak --zk-nodes 1|3``)."""

from __future__ import annotations

from pathlib import Path

from kazoo.client import KazooClient

from scripts.reliability.zkensemble import ZkEnsemble


def test_a_one_node_ensemble_is_ready_and_serves(tmp_path: Path) -> None:
    # A lone server reports "Mode: standalone", not leader or follower: it must still count as ready.
    ensemble = ZkEnsemble(tmp_path / "zk", size=1)
    try:
        ensemble.start(timeout=60)
        assert ensemble.leader() is ensemble.servers[0]
        client = KazooClient(hosts=ensemble.connect_string, timeout=10)
        client.start(timeout=10)
        try:
            client.create("/probe", b"x")
            assert client.get("/probe")[0] == b"x"
        finally:
            client.stop()
            client.close()
    finally:
        ensemble.stop()
