"""Reassignment end to end: the dashboard's API and worker tasks against real ZooKeeper, the
project's controller and real broker agents (new replicas really copy the leader's log)."""

from __future__ import annotations

import json
import signal
from typing import Any

import pytest
from django.test import Client
from kazoo.client import KazooClient

from controller_core.model import TopicPartition as TP
from controller_core.protocol.client import JsonConnection, split_url
from controller_core.protocol.messages import (
    ALTER_PARTITION_REASSIGNMENTS_PATH,
    AlterPartitionReassignmentsResponse,
    ErrorCode,
    decode,
)
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from dashboard.actions.reassign_cluster import read_controller_endpoint
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates
from tests.support.zk import wait_for
from workers.reassign import cancel, execute, send_cancel

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

NAME = "live"
API = f"/api/v1/clusters/{NAME}/reassignments/"


def assignment(zk: KazooClient, topic: str) -> dict[int, Any]:
    return codecs.decode_topic_assignment(topic, zk.get(paths.topic_path(topic))[0]).partitions


def start_cluster(zk: KazooClient, agents: Agents, candidates: Candidates, *slow: int) -> None:
    agents.start_all(
        (1, 2, 3), "--produce-rate", "50", per_broker={b: ("--zookeeper-session-timeout-ms", "60000") for b in slow}
    )
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    ZkStore(zk).create_topic("orders", {0: [1, 2], 1: [2, 1]})
    wait_for(lambda: zk.exists(paths.partition_state_path(TP("orders", 1))) is not None, what="partition states")
    leader = agents.started[0]
    # The states are in ZooKeeper before the LeaderAndIsr reaches the broker: until then it hosts nothing.
    wait_for(
        lambda: (leader.hosted_replica(TP("orders", 0)) or {}).get("log_end_offset", 0) > 20,
        timeout=30,
        what="messages produced",
    )


def test_move_a_topic_to_other_brokers_and_watch_it_complete(
    zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates, operator: Client, sent: list[Any]
) -> None:
    start_cluster(zk, agents, candidates)
    Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)
    proposal = operator.post(
        API + "generate", json.dumps({"topics": ["orders"], "brokers": [2, 3]}), content_type="application/json"
    ).json()
    assert proposal["moved_replicas"] == 2
    assert proposal["data_to_copy"]["known"] is True and proposal["data_to_copy"]["messages"] > 0
    assert proposal["data_to_copy"]["bytes"] == proposal["data_to_copy"]["messages"] * 512
    response = operator.post(
        API + "execute",
        json.dumps({"reassignment": proposal["request"], "reason": "decommission broker 1"}),
        content_type="application/json",
        headers={"Idempotency-Key": "move-1"},
    )
    assert response.status_code == 202, response.content
    action_id = response.json()["action"]
    assert sent == [("workers.reassign.execute", [action_id])]
    assert execute.run(action_id, connect=zk_chroot, monitor=False) == "running"

    seen: list[dict[str, Any]] = []

    def finished() -> bool:
        doc = operator.get(f"{API}{action_id}/progress").json()
        seen.append(doc)
        return bool(doc["status"] != "running")

    wait_for(finished, timeout=60, interval=0.2, what="reassignment to complete")
    action = Action.objects.get(pk=action_id)
    assert action.status == "succeeded", (action.error, seen[-1])
    assert action.controller_epoch == 1 and action.attempts == 1
    rows = action.outcome["progress"]["partitions"]
    assert [(r["topic"], r["partition"], r["state"]) for r in rows] == [
        ("orders", 0, "complete"),
        ("orders", 1, "complete"),
    ]
    for tp in (0, 1):
        final = assignment(zk, "orders")[tp]
        assert set(final.replicas) == {2, 3} and not final.is_being_reassigned
    assert zk.exists(paths.REASSIGN_PARTITIONS_PATH) is None
    # broker 3 really holds a copy of the log now
    copy = agents.started[2].replica(TP("orders", 0))
    assert copy["log_end_offset"] > 0
    # replaying the request does nothing new
    again = operator.post(
        API + "execute",
        json.dumps({"reassignment": proposal["request"], "reason": "decommission broker 1"}),
        content_type="application/json",
        headers={"Idempotency-Key": "move-1"},
    )
    assert again.json()["action"] == action_id and len(sent) == 1
    kinds = [(r["kind"], r.get("phase")) for r in candidates.sinks[100].records if r["kind"] == "reassignment"]
    assert ("reassignment", "completed") in kinds


def test_cancel_reverts_a_partition_whose_new_replica_cannot_catch_up(
    zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates, operator: Client, sent: list[Any]
) -> None:
    start_cluster(zk, agents, candidates, 3)
    Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)
    request = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 3]}]}
    response = operator.post(
        API + "execute", json.dumps({"reassignment": request, "reason": "try"}), content_type="application/json"
    )
    action_id = response.json()["action"]
    agents.started[2].signal(signal.SIGSTOP)  # broker 3 stays registered (long session) but cannot fetch
    assert execute.run(action_id, connect=zk_chroot, monitor=False) == "running"

    def copying() -> bool:
        doc = operator.get(f"{API}{action_id}/progress").json()
        return bool(doc["progress"].get("counts") == {"copying": 1})

    wait_for(copying, timeout=30, what="the move to start")
    moving = assignment(zk, "orders")[0]
    assert moving.adding_replicas == (3,) and moving.removing_replicas == (2,)

    response = operator.post(
        f"{API}{action_id}/cancel", json.dumps({"reason": "broker 3 is stuck"}), content_type="application/json"
    )
    assert response.status_code == 202, response.content
    cancel_id = response.json()["action"]
    assert cancel.run(cancel_id, connect=zk_chroot) == "succeeded"
    cancelled = Action.objects.get(pk=cancel_id)
    assert cancelled.outcome["partitions"] == [{"topic": "orders", "partition": 0, "outcome": "cancelled"}]
    reverted = assignment(zk, "orders")[0]
    assert reverted.replicas == (1, 2) and not reverted.is_being_reassigned
    action = Action.objects.get(pk=action_id)
    assert action.status == "failed" and "orders-0 reverted" in action.error
    for pk in (action_id, cancel_id):  # the audit pages show both actions
        assert operator.get(f"/actions/{pk}/").status_code == 200
    assert "orders-0" in operator.get(f"/actions/clusters/{NAME}/reassign/{action_id}/").content.decode()
    # a redelivered cancel never sends again
    assert cancel.run(cancel_id, connect=zk_chroot) == "succeeded"
    kinds = [r.get("phase") for r in candidates.sinks[100].records if r["kind"] == "reassignment"]
    assert "cancelled" in kinds
    # and a cancel of a finished reassignment is refused, recorded
    late = operator.post(f"{API}{action_id}/cancel", json.dumps({"reason": "again"}), content_type="application/json")
    assert late.status_code == 400 and "nothing to cancel" in late.json()["error"]
    # the controller's endpoint itself, as kafka-reassign-partitions --cancel would use it
    endpoint = read_controller_endpoint(ZkStore(zk))
    assert endpoint is not None
    answer = send_cancel(endpoint, [TP("orders", 1)])
    assert [(r.partition, r.error_code) for r in answer.partitions] == [(1, ErrorCode.NO_REASSIGNMENT_IN_PROGRESS)]
    host, port = split_url(endpoint)
    conn = JsonConnection(host, port)
    try:
        bad = (
            b'{"partitions":[{"topic":"orders","partition":1,"replicas":[2,2]},'
            b'{"topic":"orders","partition":0,"replicas":[1,7]}]}'
        )
        raw = conn.post(ALTER_PARTITION_REASSIGNMENTS_PATH, bad)
    finally:
        conn.close()
    results = decode(raw, AlterPartitionReassignmentsResponse, "answer").partitions
    assert [(r.partition, r.error_code) for r in results] == [
        (0, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
        (1, ErrorCode.INVALID_REPLICA_ASSIGNMENT),
    ]
    assert "not alive: [7]" in results[0].error_message and "duplicate" in results[1].error_message
    assert assignment(zk, "orders")[0].replicas == (1, 2) and zk.exists(paths.REASSIGN_PARTITIONS_PATH) is None
