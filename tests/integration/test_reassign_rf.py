"""Replication-factor changes through the reassignment API and worker, against real ZooKeeper, the
project's controller and real broker agents on two racks: up (new replicas copy the log, preferred
leaders stay) and down (replicas removed, racks kept spread); bad factors refused, nothing written.

The racks (brokers 1 and 2 on one, 3 and 4 on the other) are chosen so that a rack-blind plan differs
from the rack-aware one in both directions: the expected assignments below are worked out by hand
from ``reassign_rf``'s rules, and the racks the plan used are the ones the agents registered."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from kazoo.client import KazooClient

from controller_core.model import TopicPartition as TP
from controller_core.zk import paths
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.integration.test_reassign_controller import assignment
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates
from tests.support.zk import wait_for
from workers.reassign import execute

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

NAME = "live"
API = f"/api/v1/clusters/{NAME}/reassignments/"
RACK = {1: "rack-a", 2: "rack-a", 3: "rack-b", 4: "rack-b"}

# RF 1 -> 2 of orders {0: [1], 1: [2], 2: [3], 3: [4]}, every broker at load 1 (the rule: a rack the
# partition lacks, then the lowest load counting what is planned, then the lowest id):
# p0 [1] (a): 3 or 4 on b, both at 1 -> 3.   p1 [2] (a): 3 (now 2) or 4 (1) -> 4.
# p2 [3] (b): 1 or 2 on a, both at 1 -> 1.   p3 [4] (b): 1 (now 2) or 2 (1) -> 2.
# (Rack-blind, p0 would take 2, on the leader's own rack.)
RAISED = {0: (1, 3), 1: (2, 4), 2: (3, 1), 3: (4, 2)}
# RF 3 -> 2 of events {0: [1, 2, 3], 1: [3, 4, 1]} (loads 2, 1, 2, 1): keep the leader, then a replica
# on a rack it lacks. p0 keeps 1 then 3 (rack b), though 2 is less loaded; p1 keeps 3 then 1 (rack a).
# (Rack-blind, p0 would keep 2, on the leader's own rack, and p1 4.)
LOWERED = {0: (1, 3), 1: (3, 1)}


def isr_size(zk: KazooClient, partition: int) -> int:
    read = ZkStore(zk).get_partition_states([TP("orders", partition)])[TP("orders", partition)]
    return 0 if read.state is None else len(read.state.leader_and_isr.isr)


def run(operator: Client, zk_chroot: str, body: dict[str, Any]) -> Action:
    response = operator.post(API + "execute", json.dumps(body), content_type="application/json")
    assert response.status_code == 202, response.content
    action_id = response.json()["action"]
    assert execute.run(action_id, connect=zk_chroot, monitor=False) == "running"
    wait_for(
        lambda: operator.get(f"{API}{action_id}/progress").json()["status"] != "running",
        timeout=60,
        interval=0.3,
        what="the change to complete",
    )
    return Action.objects.get(pk=action_id)


def test_raise_and_lower_the_replication_factor_rack_aware(
    zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates, operator: Client, sent: list[Any]
) -> None:
    agents.start_all((1, 2, 3, 4), "--produce-rate", "50", per_broker={b: ("--rack", RACK[b]) for b in (1, 2, 3, 4)})
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    ZkStore(zk).create_topic("orders", {0: [1], 1: [2], 2: [3], 3: [4]})
    ZkStore(zk).create_topic("events", {0: [1, 2, 3], 1: [3, 4, 1]})
    wait_for(
        lambda: (agents.started[0].hosted_replica(TP("orders", 0)) or {}).get("log_end_offset", 0) > 20,
        timeout=30,
        what="messages produced",
    )
    Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)

    def generate(factor: Any, topics: list[str] | None = None) -> Any:
        return operator.post(
            API + "generate",
            json.dumps({"topics": topics or ["orders"], "brokers": [], "replication_factor": factor}),
            content_type="application/json",
        )

    for bad, message in ((0, "at least 1"), (5, "more than the 4 live"), ("2", "whole number"), (-1, "at least 1")):
        response = generate(bad)
        assert response.status_code == 400 and message in response.json()["error"], (bad, response.content)
    assert generate(2, ["nope"]).status_code == 400
    # without the explicit flag a replica-count change is refused, as before
    up = generate(2).json()
    refused = operator.post(
        API + "execute", json.dumps({"reassignment": up["request"], "reason": "rf"}), content_type="application/json"
    )
    assert refused.status_code == 400 and "replication factor would change" in refused.json()["error"]
    assert zk.exists(paths.REASSIGN_PARTITIONS_PATH) is None

    assert up["moved_replicas"] == 4 and up["replication_factor"] == 2
    assert up["racks"] == {str(b): rack for b, rack in RACK.items()}  # the racks the agents registered
    assert {p["partition"]: tuple(p["replicas"]) for p in up["request"]["partitions"]} == RAISED
    action = run(
        operator,
        zk_chroot,
        {"reassignment": up["request"], "reason": "RF 1 -> 2", "change_replication_factor": True},
    )
    assert action.status == "succeeded", action.error
    assert {p: a.replicas for p, a in assignment(zk, "orders").items()} == RAISED
    for p in range(4):  # the new replicas really copied the log and joined the ISR
        wait_for(lambda p=p: isr_size(zk, p) == 2, timeout=30, what=f"orders-{p} fully in sync")  # type: ignore[misc]

    down = generate(2, ["events"]).json()
    assert down["moved_replicas"] == 0
    assert {p["partition"]: tuple(p["replicas"]) for p in down["request"]["partitions"]} == LOWERED
    action = run(
        operator,
        zk_chroot,
        {"reassignment": down["request"], "reason": "RF 3 -> 2", "change_replication_factor": True},
    )
    assert action.status == "succeeded", action.error
    assert {p: a.replicas for p, a in assignment(zk, "events").items()} == LOWERED
