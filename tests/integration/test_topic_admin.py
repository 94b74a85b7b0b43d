"""The topic admin JSON API against real ZooKeeper and Redis: Kafka's layout written, bad input refused.

Every refusal: a 4xx JSON answer with a message, the chroot and Redis unchanged, an audit row.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.middleware.csrf import _get_new_csrf_string
from django.test import Client
from kazoo.client import KazooClient

from controller_core.model import BrokerRegistration, EndPoint, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.support.snapshots import redis_keys, zk_tree

pytestmark = [pytest.mark.django_db, pytest.mark.isolated_redis]  # snapshots compare Redis before and after

NAME = "topics"
BASE = f"/api/v1/clusters/{NAME}/topics/"


@pytest.fixture
def cluster(zk: KazooClient, zk_chroot: str, settings: Any, redis_url: str) -> Cluster:
    settings.REDIS_URL = redis_url
    settings.ACTION_RATE_LIMIT = "0"
    store = ZkStore(zk)
    store.ensure_persistent_paths()
    for b in (1, 2, 3):
        store.register_broker(BrokerRegistration(id=b, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b),)))
    store.create_topic("orders", {0: [1, 2], 1: [2, 3]}, {"retention.ms": "1000"})
    return Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)


def _client(role: str = "admin", **kwargs: Any) -> Client:
    user = User.objects.create_user(f"u-{role}", password="pw-correct-horse")
    user.groups.add(Group.objects.get(name=role))
    client = Client(**kwargs)
    client.force_login(user)
    return client


def post(client: Client, url: str, body: Any, **extra: Any) -> Any:
    data = body if isinstance(body, bytes) else json.dumps(body)
    return client.post(url, data, content_type="application/json", **extra)


def audit(kind: str) -> list[Action]:
    return list(Action.objects.filter(kind=kind).order_by("id"))


def test_create_writes_kafkas_layout_and_is_audited(cluster: Cluster, zk: KazooClient) -> None:
    body = {"name": "events", "partitions": 3, "replication_factor": 2, "config": {"cleanup.policy": "compact"}}
    response = post(_client(), BASE, {**body, "reason": "new service"})
    assert response.status_code == 201, response.content
    answer = response.json()
    data, _ = zk.get(paths.topic_path("events"))
    stored = codecs.decode_topic_assignment("events", data)
    assert {str(p): list(a.replicas) for p, a in stored.partitions.items()} == answer["assignment"]
    raw = json.loads(data)
    assert raw["version"] == 3 and set(raw["partitions"]) == {"0", "1", "2"}
    assert json.loads(zk.get(paths.topic_config_path("events"))[0]) == {
        "version": 1,
        "config": {"cleanup.policy": "compact"},
    }
    (row,) = audit(Action.Kind.TOPIC_CREATE)
    assert row.status == Action.Status.PENDING and row.reason == "new service" and row.parameters["name"] == "events"


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"name": "orders", "partitions": 1, "replication_factor": 1}, 409, "already exists"),
        ({"name": "a/../../controller", "partitions": 1, "replication_factor": 1}, 400, "characters other than"),
        ({"name": "x", "partitions": "3.0", "replication_factor": 1}, 400, "whole number"),
        ({"name": "x", "partitions": 3, "replication_factor": 4}, 400, "larger than the 3 available"),
        ({"name": "x", "assignment": {"0": [1, 1, 2]}}, 400, "Duplicate replica assignment"),
        ({"name": "x", "assignment": {"0": [1], "2": [2]}}, 400, "consecutive"),
        ({"name": "x", "assignment": {"0": [7]}}, 400, "unknown broker"),
        (
            {"name": "x", "partitions": 1, "replication_factor": 1, "config": {"min.insync.replicas": "2"}},
            400,
            "larger",
        ),
        ({"name": "x", "partitions": 1, "replication_factor": 1, "version": 2}, 400, "unknown field(s) version"),
    ],
)
def test_create_refusals_write_nothing(
    cluster: Cluster, zk: KazooClient, redis_url: str, body: dict[str, Any], status: int, message: str
) -> None:
    client = _client()
    before = (zk_tree(zk), redis_keys(redis_url))
    response = post(client, BASE, {**body, "reason": "r"})
    assert response.status_code == status and message in response.json()["error"]
    assert (zk_tree(zk), redis_keys(redis_url)) == before
    (row,) = audit(Action.Kind.TOPIC_CREATE)
    assert row.status == Action.Status.REJECTED and message in row.error


@pytest.mark.parametrize(
    ("payload", "message"),
    [(b"{not json", "not JSON"), (b"[1, 2]", "JSON object"), (json.dumps({"name": "x"}).encode(), "reason")],
)
def test_malformed_bodies(cluster: Cluster, zk: KazooClient, payload: bytes, message: str) -> None:
    before = zk_tree(zk)
    response = post(_client(), BASE, payload)
    assert response.status_code == 400 and message in response.json()["error"]
    assert zk_tree(zk) == before and audit(Action.Kind.TOPIC_CREATE)[0].status == Action.Status.REJECTED


def test_operators_and_viewers_are_refused(cluster: Cluster, zk: KazooClient, redis_url: str) -> None:
    before = (zk_tree(zk), redis_keys(redis_url))
    for role in ("operator", "viewer"):
        response = post(_client(role), BASE, {"name": "x", "partitions": 1, "replication_factor": 1, "reason": "r"})
        assert response.status_code == 403 and "admins only" in response.json()["error"]
    assert (zk_tree(zk), redis_keys(redis_url)) == before
    assert [a.status for a in audit(Action.Kind.TOPIC_CREATE)] == ["rejected", "rejected"]


def test_get_on_action_urls_is_405(cluster: Cluster, zk: KazooClient) -> None:
    client = _client()
    for url in (BASE, f"{BASE}orders/partitions/", f"{BASE}orders/delete/"):
        assert client.get(url).status_code == 405


def _written(zk: KazooClient, redis_url: str) -> tuple[Any, ...]:
    """Everything a request could write: the chroot, Redis, and the database's action rows."""
    return zk_tree(zk), redis_keys(redis_url), list(Action.objects.values_list("id", "status"))


def test_the_api_works_with_csrf_enforced_through_the_header(cluster: Cluster, zk: KazooClient, redis_url: str) -> None:
    client = _client(enforce_csrf_checks=True)
    token = _get_new_csrf_string()  # what the csrftoken cookie of any page holds
    client.cookies["csrftoken"] = token
    body = {"name": "with-csrf", "partitions": 1, "replication_factor": 1, "reason": "r"}
    zk_before, redis_before, rows_before = _written(zk, redis_url)
    for url, payload in ((BASE, body), (f"{BASE}orders/partitions/", {"partitions": 3, "reason": "r"}),
                         (f"{BASE}orders/delete/", {"confirm": "orders", "reason": "r"})):  # fmt: skip
        assert post(client, url, payload).status_code == 403
        assert post(client, url, payload, HTTP_X_CSRFTOKEN="wrong" + token[5:]).status_code == 403
    zk_after, redis_after, rows_after = _written(zk, redis_url)
    assert (zk_after, redis_after) == (zk_before, redis_before)  # refused before the view: no topic
    # The one database write a refusal makes is its audit row, marked rejected.
    new_rows = [row for row in rows_after if row not in rows_before]
    assert [status for _, status in new_rows] == [Action.Status.REJECTED] * 6
    assert all(row in rows_after for row in rows_before)
    assert post(client, BASE, body, HTTP_X_CSRFTOKEN=token).status_code == 201
    assert zk.exists(paths.topic_path("with-csrf")) is not None


def test_viewers_can_neither_add_partitions_nor_delete_topics(
    cluster: Cluster, zk: KazooClient, redis_url: str
) -> None:
    viewer = _client("viewer")
    zk_before, redis_before, rows_before = _written(zk, redis_url)
    grow = post(viewer, f"{BASE}orders/partitions/", {"partitions": 4, "reason": "r"})
    delete = post(viewer, f"{BASE}orders/delete/", {"confirm": "orders", "reason": "r"})
    assert grow.status_code == 403 and delete.status_code == 403, (grow.content, delete.content)
    assert grow.json()["error"] and delete.json()["error"]
    zk_after, redis_after, rows_after = _written(zk, redis_url)
    assert (zk_after, redis_after) == (zk_before, redis_before)
    assert zk.exists(paths.delete_topic_path("orders")) is None
    # The one database write a refusal makes is its audit row, marked rejected.
    new_rows = [row for row in rows_after if row not in rows_before]
    assert [status for _, status in new_rows] == [Action.Status.REJECTED] * 2


def test_a_replayed_idempotency_key_has_no_second_effect(cluster: Cluster, zk: KazooClient, redis_url: str) -> None:
    client = _client()
    body = {"name": "once", "partitions": 2, "replication_factor": 1, "reason": "r", "idempotency_key": "k-1"}
    first = post(client, BASE, body)
    assert first.status_code == 201
    before = (zk_tree(zk), redis_keys(redis_url))
    again = post(client, BASE, body)
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["assignment"] == first.json()["assignment"] and again.json()["action"] == first.json()["action"]
    assert (zk_tree(zk), redis_keys(redis_url)) == before
    assert len(audit(Action.Kind.TOPIC_CREATE)) == 1
    (replay,) = audit(Action.Kind.REQUEST_REJECTED)
    assert "replayed idempotency key 'k-1'" in replay.error
    # The same key in a header works too; a malformed key is refused.
    assert post(client, BASE, {**body, "idempotency_key": None}, HTTP_IDEMPOTENCY_KEY="k-1").json()["replayed"]
    assert post(client, BASE, {**body, "idempotency_key": "bad key!"}).status_code == 400


def test_a_body_over_the_size_limit_is_413(cluster: Cluster, zk: KazooClient, settings: Any) -> None:
    settings.ACTION_MAX_BODY_BYTES = 2048
    before = zk_tree(zk)
    big = {"name": "x", "assignment": {str(p): [1] for p in range(1000)}, "reason": "r"}
    response = post(_client(), BASE, big)
    assert response.status_code == 413 and "limit" in response.json()["error"]
    assert zk_tree(zk) == before and audit(Action.Kind.REQUEST_REJECTED)


def test_add_partitions(cluster: Cluster, zk: KazooClient, redis_url: str) -> None:
    client = _client()
    url = f"{BASE}orders/partitions/"
    before = (zk_tree(zk), redis_keys(redis_url))
    for body, status, message in (
        ({"partitions": 2}, 400, "must be larger"),
        ({"partitions": 1}, 400, "must be larger"),
        ({"partitions": 3, "assignment": [[1, 2, 3]]}, 400, "need 2 replicas"),
    ):
        response = post(client, url, {**body, "reason": "r"})
        assert response.status_code == status and message in response.json()["error"]
    assert post(client, f"{BASE}nope/partitions/", {"partitions": 3, "reason": "r"}).status_code == 404
    assert (zk_tree(zk), redis_keys(redis_url)) == before
    response = post(client, url, {"partitions": 4, "reason": "more consumers"})
    assert response.status_code == 200, response.content
    stored = codecs.decode_topic_assignment("orders", zk.get(paths.topic_path("orders"))[0])
    assert sorted(stored.partitions) == [0, 1, 2, 3]
    assert [list(stored.partitions[p].replicas) for p in (0, 1)] == [[1, 2], [2, 3]]  # existing ones untouched
    assert [a.status for a in audit(Action.Kind.PARTITIONS_ADD)] == ["rejected"] * 4 + ["pending"]


def test_delete_marks_once_and_a_repeat_is_already_pending(cluster: Cluster, zk: KazooClient) -> None:
    client = _client()
    url = f"{BASE}orders/delete/"
    before = zk_tree(zk)
    assert "type the topic name" in post(client, url, {"reason": "r"}).json()["error"]
    assert post(client, f"{BASE}.*/delete/", {"confirm": ".*", "reason": "r"}).status_code == 400
    assert zk_tree(zk) == before
    first = post(client, url, {"confirm": "orders", "reason": "retired"})
    assert first.status_code == 202 and first.json()["deletion"] == "queued"
    assert zk.exists(paths.delete_topic_path("orders")) is not None
    after = zk_tree(zk)
    again = post(client, url, {"confirm": "orders", "reason": "retired"})
    assert again.status_code == 200 and again.json()["deletion"] == "already pending"
    assert zk_tree(zk) == after
    # A topic queued for deletion cannot be recreated or grown.
    create = post(client, BASE, {"name": "orders", "partitions": 1, "replication_factor": 1, "reason": "r"})
    assert create.status_code == 409 and "marked for deletion" in create.json()["error"]
    grow = post(client, f"{BASE}orders/partitions/", {"partitions": 5, "reason": "r"})
    assert grow.status_code == 409 and "queued for deletion" in grow.json()["error"]


def test_deletion_disabled_by_config(cluster: Cluster, zk: KazooClient, settings: Any) -> None:
    settings.TOPIC_DELETION_ENABLED = False
    before = zk_tree(zk)
    response = post(_client(), f"{BASE}orders/delete/", {"confirm": "orders", "reason": "r"})
    assert response.status_code == 403 and "disabled" in response.json()["error"]
    assert zk_tree(zk) == before


@pytest.mark.slow
def test_a_real_controller_acts_on_what_the_api_writes(
    zk: KazooClient, zk_chroot: str, tmp_path: Path, settings: Any, redis_url: str
) -> None:
    """Create, grow and delete through the API with real broker agents and a controller candidate: the
    partitions come online and the deletion completes, so the znodes are in the layout Kafka reads."""
    from tests.support.broker_agents import Agents
    from tests.support.controllers import Candidates
    from tests.support.zk import wait_for

    settings.REDIS_URL = redis_url
    Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)
    agents = Agents(zk_chroot, tmp_path)
    candidates = Candidates(zk_chroot)
    try:
        agents.start_all((1, 2))
        candidates.start(100)
        client = _client()

        def online(topic: str, count: int) -> bool:
            return all(zk.exists(paths.partition_state_path(TopicPartition(topic, p))) for p in range(count))

        create = post(client, BASE, {"name": "live", "partitions": 2, "replication_factor": 2, "reason": "r"})
        assert create.status_code == 201
        wait_for(lambda: online("live", 2), timeout=30, what="live-0 and live-1 online")
        assert post(client, f"{BASE}live/partitions/", {"partitions": 3, "reason": "r"}).status_code == 200
        wait_for(lambda: online("live", 3), timeout=30, what="live-2 online")
        assert post(client, f"{BASE}live/delete/", {"confirm": "live", "reason": "r"}).status_code == 202
        wait_for(
            lambda: zk.exists(paths.topic_path("live")) is None and zk.exists(paths.delete_topic_path("live")) is None,
            timeout=60,
            what="live deleted and its deletion marker removed",
        )
        assert zk.exists(paths.topic_config_path("live")) is None
    finally:
        candidates.stop_all()
        agents.close()
