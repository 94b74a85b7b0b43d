"""The failovers history shows each failover's path (warm from the standby's view, or cold with why)
and its phases, in HTML, JSON and CSV."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

from tests.integration.test_actions_ops import NAME, as_user, change, user


def test_failovers_page_shows_path_reason_and_phases(db: None) -> None:
    t0 = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)
    change(1, 1, "failover", t0, controller_id=1, duration_ms=900.0, live_brokers=[1], partitions=5,
           path="cold", standby="ZooKeeper connection lost: watches dropped, full reload on reconnect",
           phases_ms={"assignments": 300.0, "partition_states": 500.0})  # fmt: skip
    change(2, 1, "failover", t0 + timedelta(seconds=10), controller_id=2, duration_ms=40.0, live_brokers=[1],
           partitions=5, path="warm", standby="caught up to the election",
           phases_ms={"assignments": 1.0, "partition_states": 2.0})  # fmt: skip
    change(3, 1, "failover", t0 + timedelta(seconds=20), controller_id=1, duration_ms=50.0, live_brokers=[1])
    client = as_user(user("vera", "viewer"))
    rows = client.get(f"/api/v1/clusters/{NAME}/failovers/").json()["results"]
    assert [(r["controller_epoch"], r["path"]) for r in rows] == [(3, None), (2, "warm"), (1, "cold")]
    assert rows[2]["standby"].startswith("ZooKeeper connection lost")
    assert rows[1]["phases_ms"] == {"assignments": 1.0, "partition_states": 2.0}
    page = client.get(f"/actions/clusters/{NAME}/failovers/").content.decode()
    assert '<span class="badge warm">warm</span>' in page and '<span class="badge cold">cold</span>' in page
    assert "ZooKeeper connection lost" in page and "partition_states 500" in page
    exported = client.get(f"/actions/clusters/{NAME}/failovers/?format=csv").content.decode()
    table = list(csv.reader(io.StringIO(exported)))
    assert table[0][-2:] == ["path", "standby"] and table[2][-2] == "warm"
