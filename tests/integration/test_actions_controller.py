"""End to end: an operator's preferred election through the dashboard, the task and a real controller."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from kazoo.client import KazooClient

from controller_core.model import LeaderIsrAndControllerEpoch
from controller_core.model import TopicPartition as TP
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.support.controllers import Candidates, FakeBrokers
from tests.support.zk import wait_for
from workers.actions import preferred_election

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

NAME = "e2e"


def leader_and_isr(zk: KazooClient, tp: TP) -> tuple[int, list[int]]:
    data, stat = zk.get(paths.partition_state_path(tp))
    lai = codecs.decode_partition_state(data, stat.version).leader_and_isr
    return lai.leader, list(lai.isr)


def rejoin_isr(zk: KazooClient, tp: TP, broker: int) -> None:
    """What a ZooKeeper-era broker leader does when a follower catches up: widen the ISR, notify."""
    data, stat = zk.get(paths.partition_state_path(tp))
    state = codecs.decode_partition_state(data, stat.version)
    lai = state.leader_and_isr
    wider = type(lai)(lai.leader, lai.leader_epoch, (*lai.isr, broker), stat.version)
    zk.set(
        paths.partition_state_path(tp),
        codecs.encode_partition_state(LeaderIsrAndControllerEpoch(wider, state.controller_epoch)),
        version=stat.version,
    )
    ZkStore(zk).create_isr_change_notification([tp])


def test_operator_restores_preferred_leader_after_a_broker_restart(
    zk: KazooClient, zk_chroot: str, fake_brokers: FakeBrokers, candidates: Candidates, sent: list[Any]
) -> None:
    for b in (1, 2, 3):
        fake_brokers.start(b)
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1]})
    tp = TP("orders", 0)
    wait_for(lambda: zk.exists(paths.partition_state_path(tp)) is not None, what="partition states")
    fake_brokers.kill(1)
    wait_for(lambda: leader_and_isr(zk, tp)[0] == 2, timeout=20, what="leadership moved off broker 1")
    fake_brokers.start(1)
    rejoin_isr(zk, tp, 1)
    wait_for(lambda: 1 in leader_and_isr(zk, tp)[1], what="broker 1 back in the ISR")

    Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)
    operator = User.objects.create_user("otto")
    operator.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(operator)
    url = f"/actions/clusters/{NAME}/preferred-election/"
    # the controller takes the ISR change in asynchronously: wait until the preview agrees
    wait_for(lambda: "Would become" in client.get(url, {"scope": "broker", "broker": "1"}).content.decode(), timeout=10)
    response = client.post(url, {"scope": "broker", "broker": "1", "reason": "broker 1 restarted"})
    assert response.status_code == 302
    (action,) = Action.objects.filter(kind="preferred_election")
    assert sent == [("workers.actions.preferred_election", [action.pk])]
    assert [r["partition"] for r in action.preview["electable"]] == [0]

    assert preferred_election.run(action.pk, wait_s=20, connect=zk_chroot) == "succeeded"
    action.refresh_from_db()
    assert action.outcome["partitions"] == [
        {"topic": "orders", "partition": 0, "preferred": 1, "leader": 1, "outcome": "elected"}
    ]
    assert action.controller_epoch == 1
    assert leader_and_isr(zk, tp)[0] == 1
    assert zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None
    kinds = [r["kind"] for r in candidates.sinks[100].records]
    assert "preferred_election_request" in kinds
