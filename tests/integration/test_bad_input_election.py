"""§6d bad input for the preferred leader election and the transport rows, against real ZooKeeper and Redis.

Each refused request must answer 4xx with a clear message, write nothing to ZooKeeper or Redis
(the chroot and every Redis key are snapshotted before and after) and leave an audit row.
"""

from __future__ import annotations

import html
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from kazoo.client import KazooClient

from controller_core.model import BrokerRegistration, EndPoint, LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller_core.model import TopicPartition as TP
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.support.snapshots import redis_keys, zk_tree

pytestmark = [pytest.mark.django_db, pytest.mark.isolated_redis]  # snapshots compare Redis before and after

NAME = "badin"
URL = f"/actions/clusters/{NAME}/preferred-election/"


@pytest.fixture
def cluster(zk: KazooClient, zk_chroot: str, settings: Any, redis_url: str) -> Cluster:
    """orders-0 can move to 1; orders-2's preferred broker 3 is down; doomed is queued for deletion."""
    settings.REDIS_URL = redis_url
    settings.ACTION_RATE_LIMIT = "0"
    store = ZkStore(zk)
    store.ensure_persistent_paths()
    epoch = store.register_controller_and_increment_epoch(99)
    for b in (1, 2):
        store.register_broker(BrokerRegistration(id=b, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b),)))
    store.create_topic("orders", {0: [1, 2], 1: [2, 1], 2: [3, 1]})
    store.create_topic("doomed", {0: [1, 2]})
    leaders = {("orders", 0): (2, (1, 2)), ("orders", 1): (2, (1, 2)), ("orders", 2): (1, (1,)),
               ("doomed", 0): (2, (1, 2))}  # fmt: skip
    store.create_partition_states(
        {
            TP(t, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 0, isr), epoch.epoch)
            for (t, p), (leader, isr) in leaders.items()
        },
        epoch.epoch_zk_version,
    )
    store.mark_topic_for_deletion("doomed")
    return Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)


def _client(role: str | None, name: str = "otto") -> Client:
    client = Client()
    if role is not None:
        user = User.objects.create_user(name, password="pw-correct-horse")
        if role != "none":
            user.groups.add(Group.objects.get(name=role))
        client.force_login(user)
    return client


def text(response: Any) -> str:
    return html.unescape(response.content.decode())


class Unchanged:
    """Snapshots ZooKeeper and Redis and counts audit rows, to assert a request changed nothing else."""

    def __init__(self, zk: KazooClient, redis_url: str) -> None:
        self.zk, self.redis_url = zk, redis_url
        self.before = (zk_tree(zk), redis_keys(redis_url))
        self.audit = Action.objects.count()

    def check(self, audit_rows: int = 1) -> list[Action]:
        assert (zk_tree(self.zk), redis_keys(self.redis_url)) == self.before
        rows = [r for r in Action.objects.order_by("id")[self.audit :] if r.kind != Action.Kind.LOGIN]
        assert len(rows) == audit_rows, rows
        assert all(r.status == Action.Status.REJECTED for r in rows)
        return rows


@pytest.fixture
def unchanged(cluster: Cluster, zk: KazooClient, redis_url: str) -> Iterator[Unchanged]:
    yield Unchanged(zk, redis_url)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"scope": "partition", "topic": "orders", "partition": "9"}, "topic 'orders' has no partition 9"),
        ({"scope": "partition", "topic": "nope", "partition": "0"}, "unknown topic 'nope'"),
        ({"scope": "topic", "topic": "nope"}, "unknown topic 'nope'"),
        ({}, "scope must be one of"),  # the empty request
        ({"scope": "partition", "topic": "", "partition": ""}, "a topic is needed"),
        ({"scope": "partition", "topic": "orders", "partition": ""}, "partition must be a non-negative whole number"),
        ({"scope": "partition", "topic": "orders", "partition": "2"}, "nothing to elect"),  # preferred 3 is down
        ({"scope": "broker", "broker": "3"}, "nothing to elect"),
    ],
)
def test_preferred_election_bad_input(
    unchanged: Unchanged, sent: list[Any], data: dict[str, str], message: str
) -> None:
    response = _client("operator").post(URL, {"reason": "maintenance", **data})
    assert response.status_code == 400
    assert message in text(response)
    (row,) = unchanged.check()
    assert row.kind == Action.Kind.PREFERRED_ELECTION and message in row.error and row.username == "otto"
    assert not sent


def test_a_blocked_partition_says_why(unchanged: Unchanged, sent: list[Any]) -> None:
    data = {"scope": "partition", "topic": "orders", "partition": "2", "reason": "r"}
    response = _client("operator").post(URL, data)
    assert response.status_code == 400 and "preferred replica 3 is down" in text(response)
    unchanged.check()


def test_a_topic_queued_for_deletion_is_refused(unchanged: Unchanged, sent: list[Any]) -> None:
    response = _client("operator").post(URL, {"scope": "topic", "topic": "doomed", "reason": "r"})
    assert response.status_code == 400 and "queued for deletion" in text(response)
    unchanged.check()
    assert not sent


@given(partition=st.text(max_size=12).filter(lambda s: not s.strip().isdigit()))
@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_non_numeric_partition_is_refused(unchanged: Unchanged, sent: list[Any], partition: str) -> None:
    client = Client()
    user, _ = User.objects.get_or_create(username="hypo")
    user.groups.add(Group.objects.get(name="operator"))
    client.force_login(user)
    start = Action.objects.filter(kind=Action.Kind.PREFERRED_ELECTION, status=Action.Status.REJECTED).count()
    response = client.post(URL, {"scope": "partition", "topic": "orders", "partition": partition, "reason": "r"})
    assert response.status_code == 400
    assert "partition must be a non-negative whole number" in text(response)
    assert (
        Action.objects.filter(kind=Action.Kind.PREFERRED_ELECTION, status=Action.Status.REJECTED).count() == start + 1
    )
    assert (zk_tree(unchanged.zk), redis_keys(unchanged.redis_url)) == unchanged.before
    assert not sent


@given(topic=st.text(min_size=1, max_size=300).filter(lambda s: s.strip() not in ("", "orders", "doomed")))
@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_unknown_topic_is_refused(unchanged: Unchanged, sent: list[Any], topic: str) -> None:
    client = Client()
    user, _ = User.objects.get_or_create(username="hypo")
    user.groups.add(Group.objects.get(name="operator"))
    client.force_login(user)
    response = client.post(URL, {"scope": "topic", "topic": topic, "reason": "r"})
    assert response.status_code == 400
    body = text(response)
    assert "unknown topic" in body or "not a usable topic name" in body  # "/", "." and ".." are refused as such
    assert (zk_tree(unchanged.zk), redis_keys(unchanged.redis_url)) == unchanged.before
    assert not sent


# -- transport, auth, concurrency rows ------------------------------------------------------------


def test_anonymous_action_requests_are_refused_and_audited(unchanged: Unchanged, sent: list[Any]) -> None:
    response = _client(None).post(URL, {"scope": "imbalanced", "reason": "r"})
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    api = _client(None).post("/api/v1/topics/", b"{}", content_type="application/json")
    assert api.status_code == 401 and api.json()["error"].startswith("log in first")
    rows = unchanged.check(audit_rows=2)
    assert all(r.kind == Action.Kind.REQUEST_REJECTED and r.username == "" for r in rows)


def test_a_viewer_is_403_and_audited(unchanged: Unchanged, sent: list[Any]) -> None:
    response = _client("viewer").post(URL, {"scope": "imbalanced", "reason": "r"})
    assert response.status_code == 403 and "may not run preferred leader elections" in text(response)
    (row,) = unchanged.check()
    assert row.kind == Action.Kind.PREFERRED_ELECTION and "operators only" in row.error
    assert not sent


def test_a_get_is_a_preview_that_writes_nothing(unchanged: Unchanged, sent: list[Any]) -> None:
    response = _client("operator").get(URL, {"scope": "imbalanced"})
    assert response.status_code == 200
    unchanged.check(audit_rows=0)
    assert not sent


def test_other_methods_on_an_action_url_are_405(unchanged: Unchanged, sent: list[Any]) -> None:
    response = _client("operator").put(URL, "scope=imbalanced", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 405
