"""A failover's state-snapshot record comes once the brokers have answered its requests, or a request
timeout after the failover when they do not (docs/contracts.md).

Why: at a million partitions the record (~50 MB of JSON and each sink's copy) built while the senders
still held the failover's requests, their encodings and answers put its memory on top of theirs
(docs/performance.md). Real ZooKeeper; real broker agents where answers are needed.
"""

from __future__ import annotations

import time
from typing import Any

import orjson
import pytest
from kazoo.client import KazooClient

from controller_core.zk.store import ZkStore
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates, FakeBrokers
from tests.support.zk import wait_for

pytestmark = pytest.mark.integration


def _records(candidates: Candidates, cid: int, kind: str) -> list[Any]:
    return [r for r in list(candidates.sinks[cid].records) if r["kind"] == kind]


def _snapshot_states(record: Any) -> dict[str, Any]:
    return dict(orjson.loads(record.json))


def test_unanswered_requests_hold_the_snapshot_back_until_a_request_timeout(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    # Registered brokers whose endpoints refuse connections: the senders resend and nothing is answered.
    for b in (1, 2, 3):
        fake_brokers.start(b)
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1]})
    candidates.start(100, request_timeout_s=2.0)
    wait_for(lambda: bool(_records(candidates, 100, "failover")), what="failover record")
    failover = _records(candidates, 100, "failover")[0]
    time.sleep(0.5)
    assert _records(candidates, 100, "state_snapshot") == [], "the snapshot did not wait for the answers"
    wait_for(lambda: bool(_records(candidates, 100, "state_snapshot")), timeout=15, what="snapshot record")
    snapshot = _records(candidates, 100, "state_snapshot")[0]
    assert snapshot["controller_epoch"] == failover["controller_epoch"] and snapshot["seq"] > failover["seq"]
    assert snapshot["ts"] - failover["ts"] >= 1_900  # the timer starts just before the failover record
    states = _snapshot_states(snapshot)
    assert sorted(e for es in states["partition_states"].values() for e in es) == ["orders-0", "orders-1"]
    assert len(_records(candidates, 100, "state_snapshot")) == 1


def test_answered_requests_let_the_snapshot_out_without_waiting_for_the_timeout(
    zk: KazooClient, agents: Agents, candidates: Candidates
) -> None:
    agents.start_all((1, 2, 3))
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1]})
    candidates.start(100, request_timeout_s=120.0)
    wait_for(lambda: bool(_records(candidates, 100, "failover")), what="failover record")
    wait_for(lambda: bool(_records(candidates, 100, "state_snapshot")), timeout=30, what="snapshot record")
    failover = _records(candidates, 100, "failover")[0]
    snapshot = _records(candidates, 100, "state_snapshot")[0]
    assert snapshot["seq"] > failover["seq"]
    states = _snapshot_states(snapshot)
    assert sorted(e for es in states["replica_states"].values() for e in es) == sorted(
        f"orders-{p}@{b}" for p in (0, 1) for b in (1, 2, 3)
    )
    time.sleep(0.5)
    assert len(_records(candidates, 100, "state_snapshot")) == 1
