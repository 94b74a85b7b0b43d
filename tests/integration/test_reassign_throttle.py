"""A throttled reassignment end to end: the dashboard's API and worker tasks against real ZooKeeper,
the project's controller and real broker agents under a produce load. The copy runs at the set rate,
a live change takes effect within seconds, and the throttle znodes are gone after completion and
after cancel; bad input is refused with nothing written."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from django.test import Client
from kazoo.client import KazooClient

from controller_core.broker.throttle import FOLLOWER_RATE, FOLLOWER_REPLICAS, LEADER_RATE, LEADER_REPLICAS
from controller_core.model import TopicPartition as TP
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates
from tests.support.zk import wait_for
from workers.reassign import cancel, execute, remove_orphan_throttles

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

NAME = "live"
API = f"/api/v1/clusters/{NAME}/reassignments/"
SIZE = 1000
RATE = 100_000
TOLERANCE = 0.2
MOVE = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [1, 3]}]}


def config(zk: KazooClient, entity_type: str, name: str) -> dict[str, str] | None:
    stat = zk.exists(f"/config/{entity_type}/{name}")
    if stat is None:
        return None
    return codecs.decode_entity_config(zk.get(f"/config/{entity_type}/{name}")[0])


def start(zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates, produce: int) -> None:
    agents.start_all((1, 2, 3), "--produce-rate", str(produce), "--message-size", str(SIZE))
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    ZkStore(zk).create_topic("orders", {0: [1, 2]})
    leader = agents.started[0]
    wait_for(
        lambda: (leader.hosted_replica(TP("orders", 0)) or {}).get("log_end_offset", 0) > 2 * produce,
        timeout=30,
        what="a log to copy",
    )
    Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)


def copy_rate(agents: Agents, seconds: float) -> float:
    newcomer = agents.started[2]
    first: int = newcomer.replica(TP("orders", 0))["log_end_offset"]
    t0 = time.monotonic()
    time.sleep(seconds)
    last: int = newcomer.replica(TP("orders", 0))["log_end_offset"]
    return (last - first) * SIZE / (time.monotonic() - t0)


def submit(operator: Client, zk_chroot: str, rate: Any) -> int:
    response = operator.post(
        API + "execute",
        json.dumps({"reassignment": MOVE, "reason": "move off broker 2", "throttle_bytes_per_s": rate}),
        content_type="application/json",
    )
    assert response.status_code == 202, response.content
    action_id: int = response.json()["action"]
    assert execute.run(action_id, connect=zk_chroot, monitor=False) == "running"
    return action_id


def test_a_throttled_move_copies_at_the_rate_changes_live_and_leaves_no_throttle(
    zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates, operator: Client, sent: list[Any]
) -> None:
    start(zk, zk_chroot, agents, candidates, produce=200)  # 200 kB/s produced, more than the throttle
    action_id = submit(operator, zk_chroot, RATE)
    # Kafka's format, exactly what kafka-reassign-partitions --throttle writes
    assert config(zk, "topics", "orders") == {LEADER_REPLICAS: "0:1,0:2", FOLLOWER_REPLICAS: "0:3"}
    for broker in ("1", "2", "3"):
        assert config(zk, "brokers", broker) == {LEADER_RATE: str(RATE), FOLLOWER_RATE: str(RATE)}
    raw = zk.get("/config/brokers/3")[0]
    assert raw == (  # Kafka's own bytes (JSON key order is Kafka's map order; both parse the same)
        b'{"version":1,"config":{"leader.replication.throttled.rate":"100000",'
        b'"follower.replication.throttled.rate":"100000"}}'
    )
    notes = sorted(zk.get_children(paths.CONFIG_CHANGES_PATH))
    bodies = [zk.get(f"{paths.CONFIG_CHANGES_PATH}/{n}")[0] for n in notes]
    assert b'{"version":2,"entity_path":"topics/orders"}' in bodies
    assert b'{"version":2,"entity_path":"brokers/3"}' in bodies

    wait_for(lambda: agents.started[2].hosted_replica(TP("orders", 0)) is not None, timeout=30, what="copy start")
    time.sleep(1.5)
    measured = copy_rate(agents, 5.0)
    assert abs(measured - RATE) <= TOLERANCE * RATE, f"copied at {measured:.0f} B/s, throttle {RATE}"
    doc = operator.get(f"{API}{action_id}/progress").json()
    (row,) = doc["progress"]["partitions"]
    (new,) = row["new_replicas"]
    assert new["broker"] == 3 and new["copied_bytes"] > 0
    assert doc["throttle"]["bytes_per_s"] == RATE and doc["throttle"]["state"] == "applied"
    time.sleep(1.0)
    doc = operator.get(f"{API}{action_id}/progress").json()
    rate_seen = doc["progress"]["copy_rate_by_broker"]["3"]
    assert abs(rate_seen - RATE) <= 0.5 * RATE, rate_seen  # two samples a second apart, smoothed

    # bad changes: nothing written
    for bad in (0, -5, 1.5, "100", True, None):
        response = operator.post(
            f"{API}{action_id}/throttle",
            json.dumps({"throttle_bytes_per_s": bad, "reason": "x"}),
            content_type="application/json",
        )
        assert response.status_code == 400 and "positive whole number" in response.json()["error"], bad
    response = operator.post(
        f"{API}{action_id}/throttle", json.dumps({"throttle_bytes_per_s": 5 * RATE}), content_type="application/json"
    )
    assert response.status_code == 400 and "reason" in response.json()["error"]
    assert config(zk, "brokers", "3") == {LEADER_RATE: str(RATE), FOLLOWER_RATE: str(RATE)}

    # raised live: the copy speeds up within a few seconds and completes
    changed = time.monotonic()
    response = operator.post(
        f"{API}{action_id}/throttle",
        json.dumps({"throttle_bytes_per_s": 40 * RATE, "reason": "quiet hours"}),
        content_type="application/json",
    )
    assert response.status_code == 200, response.content
    wait_for(
        lambda: agents.started[2].state(partitions="0")["throttles"]["follower_rate"] == 40 * RATE,
        timeout=5,
        what="the change on broker 3",
    )
    assert time.monotonic() - changed < 5.0

    def finished() -> bool:
        return bool(operator.get(f"{API}{action_id}/progress").json()["status"] != "running")

    wait_for(finished, timeout=60, interval=0.3, what="the reassignment to complete")
    action = Action.objects.get(pk=action_id)
    assert action.status == "succeeded", action.error
    for broker in ("1", "2", "3"):
        assert config(zk, "brokers", broker) == {}
    assert config(zk, "topics", "orders") == {}
    events = action.parameters["throttle"]["events"]
    assert [(e["op"], e["bytes_per_s"], e["user"]) for e in events] == [
        ("set", RATE, "otto"),
        ("changed", 40 * RATE, "otto"),
        ("removed", None, "(system)"),
    ]
    assert events[1]["reason"] == "quiet hours"
    wait_for(
        lambda: agents.started[2].state(partitions="0")["throttles"]["follower_rate"] is None,
        timeout=5,
        what="broker 3 to drop the throttle",
    )
    # a change for a finished reassignment is refused, nothing written
    late = operator.post(
        f"{API}{action_id}/throttle",
        json.dumps({"throttle_bytes_per_s": RATE, "reason": "late"}),
        content_type="application/json",
    )
    assert late.status_code == 400 and "no throttle to change" in late.json()["error"]
    assert config(zk, "brokers", "3") == {}
    page = operator.get(f"/actions/clusters/{NAME}/reassign/{action_id}/").content.decode()
    assert "quiet hours" in page and "removed" in page
    # the audit page: per partition before/after, and every throttle event with who and why
    audit = operator.get(f"/actions/{action_id}/").content.decode()
    assert "Partitions before and after" in audit and "quiet hours" in audit and "(system)" in audit
    assert action.outcome["before"]["orders-0"]["replicas"] == [1, 2]
    assert action.outcome["before"]["orders-0"]["leader"] == 1
    assert action.outcome["after"]["orders-0"] == {"replicas": [1, 3], "leader": 1, "isr": [1, 3]}


def test_cancel_removes_the_throttle_and_the_beat_removes_orphans(
    zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates, operator: Client, sent: list[Any]
) -> None:
    start(zk, zk_chroot, agents, candidates, produce=100)
    for bad in (0, "fast", 2.5, -1):
        response = operator.post(
            API + "execute",
            json.dumps({"reassignment": MOVE, "reason": "x", "throttle_bytes_per_s": bad}),
            content_type="application/json",
        )
        assert response.status_code == 400 and "positive whole number" in response.json()["error"]
    assert zk.exists(paths.REASSIGN_PARTITIONS_PATH) is None and config(zk, "topics", "orders") == {}
    assert config(zk, "brokers", "3") is None
    action_id = submit(operator, zk_chroot, 20_000)  # 20 kB/s: never catches up with 100 kB/s produced
    wait_for(
        lambda: operator.get(f"{API}{action_id}/progress").json()["progress"].get("counts") == {"copying": 1},
        timeout=30,
        what="the move to start",
    )
    response = operator.post(
        f"{API}{action_id}/cancel", json.dumps({"reason": "too slow"}), content_type="application/json"
    )
    cancel_id = response.json()["action"]
    assert cancel.run(cancel_id, connect=zk_chroot) == "succeeded"
    wait_for(
        lambda: operator.get(f"{API}{action_id}/progress").json()["status"] != "running",
        timeout=30,
        what="the reassignment to end",
    )
    assert config(zk, "topics", "orders") == {} and config(zk, "brokers", "3") == {}
    assert Action.objects.get(pk=action_id).parameters["throttle"]["state"] == "removed"

    # An orphan: a finished reassignment whose throttle is still written (its end was recorded while
    # ZooKeeper was unreachable). The beat task removes it and says so on the action.
    orphan_id = submit(operator, zk_chroot, 30_000)
    Action.objects.filter(pk=orphan_id).update(status=Action.Status.FAILED)
    assert config(zk, "brokers", "3") == {LEADER_RATE: "30000", FOLLOWER_RATE: "30000"}
    assert remove_orphan_throttles.run() == 1
    assert config(zk, "brokers", "3") == {} and config(zk, "topics", "orders") == {}
    last = Action.objects.get(pk=orphan_id).parameters["throttle"]["events"][-1]
    assert last["op"] == "removed" and "orphaned" in last["reason"] and last["user"] == "(system)"
    assert remove_orphan_throttles.run() == 0
