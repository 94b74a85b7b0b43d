"""The controller with real broker agents: every controller job end to end (issue 5).

Real ZooKeeper, real broker agent processes (replicating, proposing ISR changes through AlterIsr,
asking for controlled shutdown on SIGTERM) and real controller candidates. Each test asserts the
resulting ZooKeeper state and, where it matters, the emitted state changes.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Mapping
from typing import Any

import pytest
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates
from tests.support.zk import wait_for

pytestmark = pytest.mark.slow


def state(zk: KazooClient, topic: str, partition: int) -> tuple[int, list[int]]:
    data, _ = zk.get(paths.partition_state_path(TopicPartition(topic, partition)))
    lai = codecs.decode_partition_state(data, 0).leader_and_isr
    return lai.leader, list(lai.isr)


def all_states(zk: KazooClient, topic: str, partitions: int) -> list[tuple[int, list[int]]]:
    return [state(zk, topic, p) for p in range(partitions)]


def created(zk: KazooClient, topic: str, partitions: int) -> bool:
    return all(zk.exists(paths.partition_state_path(TopicPartition(topic, p))) is not None for p in range(partitions))


def in_sync(zk: KazooClient, topic: str, assignment: dict[int, list[int]]) -> bool:
    return all(sorted(state(zk, topic, p)[1]) == sorted(r) for p, r in assignment.items())


def test_controlled_shutdown_moves_every_leadership_before_the_broker_exits(
    zk: KazooClient, agents: Agents, candidates: Candidates
) -> None:
    running = agents.start_all((1, 2, 3))
    assignment = {p: [1 + (p + i) % 3 for i in range(3)] for p in range(6)}
    ZkStore(zk).create_topic("orders", assignment)
    candidates.start(100)
    wait_for(lambda: created(zk, "orders", 6) and in_sync(zk, "orders", assignment), timeout=30, what="in sync")
    offline_seen: list[int] = []
    running[1].signal(signal.SIGTERM)
    while running[1].process is not None and running[1].process.poll() is None:
        offline_seen += [p for p, (leader, _) in enumerate(all_states(zk, "orders", 6)) if leader == -1]
    assert running[1].wait_exit(30) == 0
    assert offline_seen == []
    states = all_states(zk, "orders", 6)
    assert all(leader in (2, 3) for leader, _ in states)
    assert all(1 not in isr for _, isr in states)
    records = candidates.sinks[100].records
    assert any(r["kind"] == "election" and r["strategy"] == "controlled_shutdown" for r in records)


def test_preferred_election_through_the_admin_znode_and_unelectable_partitions_reported(
    zk: KazooClient, agents: Agents, candidates: Candidates
) -> None:
    agents.start_all((1, 2, 3))
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [3, 1, 2]})
    candidates.start(100)
    wait_for(lambda: created(zk, "orders", 2), what="created")
    first = agents.started[0]
    first.signal(signal.SIGKILL)
    wait_for(lambda: state(zk, "orders", 0)[0] == 2, timeout=20, what="leader moves off broker 1")
    agents.start(1)
    wait_for(lambda: 1 in state(zk, "orders", 0)[1], timeout=30, what="broker 1 catches up into the ISR")
    agents.started[2].signal(signal.SIGKILL)  # broker 3, preferred for orders-1, is down
    wait_for(lambda: state(zk, "orders", 1)[0] != 3, timeout=20, what="orders-1 leader moves off 3")
    ZkStore(zk).create_preferred_replica_election_request([TopicPartition("orders", 0), TopicPartition("orders", 1)])
    wait_for(lambda: zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None, timeout=20, what="znode cleared")
    assert state(zk, "orders", 0)[0] == 1
    assert state(zk, "orders", 1)[0] != 3
    # The results record follows the znode's delete (the request is done once its znode is gone).

    def reports() -> list[Mapping[str, Any]]:
        return [r for r in candidates.sinks[100].records if r["kind"] == "preferred_election_request"]

    wait_for(lambda: bool(reports()), timeout=10, what="the request's results record")
    report = reports()[-1]
    assert report["results"] == {"orders-0": 1, "orders-1": "PREFERRED_LEADER_NOT_AVAILABLE"}


def test_auto_rebalance_restores_preferred_leaders_after_a_broker_returns(
    zk: KazooClient, agents: Agents, candidates: Candidates
) -> None:
    agents.start_all((1, 2))
    ZkStore(zk).create_topic("orders", {0: [1, 2], 1: [1, 2]})
    candidates.start(100, first_rebalance_delay_seconds=1.0, leader_imbalance_check_interval_seconds=1.0)
    wait_for(lambda: created(zk, "orders", 2), what="created")
    agents.started[0].signal(signal.SIGKILL)
    wait_for(lambda: [s[0] for s in all_states(zk, "orders", 2)] == [2, 2], timeout=20, what="leaders on 2")
    agents.start(1)
    wait_for(lambda: [s[0] for s in all_states(zk, "orders", 2)] == [1, 1], timeout=40, what="rebalanced to 1")


def test_reassignment_to_disjoint_brokers_survives_a_controller_failover(
    zk: KazooClient, agents: Agents, candidates: Candidates
) -> None:
    agents.start_all((1, 2, 3, 4))
    store = ZkStore(zk)
    store.create_topic("orders", {0: [1, 2], 1: [2, 1]})
    candidates.start(100)
    wait_for(lambda: created(zk, "orders", 2) and in_sync(zk, "orders", {0: [1, 2], 1: [1, 2]}), timeout=30)
    candidates.start(101)
    store.create_partition_reassignment_request(
        {TopicPartition("orders", 0): [3, 4], TopicPartition("orders", 1): [4, 3]}
    )
    wait_for(
        lambda: json.loads(zk.get(paths.topic_path("orders"))[0]).get("adding_replicas"),
        timeout=20,
        what="reassignment recorded in the topic znode",
    )
    candidates.stop(100)  # fail over in the middle
    wait_for(lambda: zk.exists(paths.REASSIGN_PARTITIONS_PATH) is None, timeout=60, what="reassignment done")
    topic = codecs.decode_topic_assignment("orders", zk.get(paths.topic_path("orders"))[0])
    assert {p: a.replicas for p, a in topic.partitions.items()} == {0: (3, 4), 1: (4, 3)}
    assert all(not a.is_being_reassigned for a in topic.partitions.values())
    assert state(zk, "orders", 0)[0] in (3, 4)
    assert sorted(state(zk, "orders", 0)[1]) == [3, 4]
    records = candidates.sinks[101].records
    assert any(r["kind"] == "reassignment" and r["phase"] == "completed" for r in records)


def test_topic_deletion_waits_for_a_down_broker_and_then_completes(
    zk: KazooClient, agents: Agents, candidates: Candidates
) -> None:
    agents.start_all((1, 2, 3))
    store = ZkStore(zk)
    store.create_topic("doomed", {0: [1, 2, 3], 1: [2, 3, 1]}, config={"retention.ms": "1000"})
    candidates.start(100)
    wait_for(lambda: created(zk, "doomed", 2), what="created")
    agents.started[2].signal(signal.SIGKILL)
    wait_for(lambda: sorted(zk.get_children(paths.BROKER_IDS_PATH)) == ["1", "2"], timeout=20)
    store.mark_topic_for_deletion("doomed")
    wait_for(
        lambda: any(
            r["kind"] == "topic_deletion" and r.get("phase") == "started" for r in candidates.sinks[100].records
        ),
        timeout=20,
    )
    assert zk.exists(paths.topic_path("doomed")) is not None  # halted: a replica's broker is down
    agents.start(3)
    wait_for(
        lambda: all(
            zk.exists(p) is None
            for p in (paths.topic_path("doomed"), paths.topic_config_path("doomed"), paths.delete_topic_path("doomed"))
        ),
        timeout=40,
        what="topic, its config and its deletion request all gone",
    )
    # The controller records the completion just after its last delete: wait for it, do not race it.
    wait_for(
        lambda: any(
            r["kind"] == "topic_deletion" and r.get("phase") == "completed" for r in candidates.sinks[100].records
        ),
        timeout=10,
        what="the deletion's completed record",
    )
