"""Impact preview, histories, JSON API, idempotency and admin pages against real ZooKeeper and Redis."""

from __future__ import annotations

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from kazoo.client import KazooClient

from controller_core.model import BrokerRegistration, EndPoint, LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller_core.model import TopicPartition as TP
from controller_core.zk import paths
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action, StateChange
from dashboard.clusters.models import Cluster
from tests.support.snapshots import redis_keys, zk_tree

pytestmark = pytest.mark.django_db

NAME = "ops"
ELECT = f"/actions/clusters/{NAME}/preferred-election/"
API_ELECT = f"/api/v1/clusters/{NAME}/preferred-election/"
GOOD = {"scope": "imbalanced", "topic": "", "partition": "", "broker": "", "reason": "rebalance after restart"}


@pytest.fixture
def cluster(zk: KazooClient, zk_chroot: str, settings: Any, redis_url: str) -> Cluster:
    """Brokers 1 (rack a), 2 and 3 (rack b). orders (min ISR 2): 0=[1,2] led by 2, 1=[2,1] led by 2,
    2=[3,1] led by 3, 3=[1,2] led by 2 with ISR [2]; tiny-0=[2,1] led by 1."""
    settings.REDIS_URL = redis_url
    settings.ACTION_RATE_LIMIT = "0"
    store = ZkStore(zk)
    store.ensure_persistent_paths()
    epoch = store.register_controller_and_increment_epoch(99)
    for b, rack in ((1, "a"), (2, "b"), (3, "b")):
        endpoint = (EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b),)
        store.register_broker(BrokerRegistration(id=b, endpoints=endpoint, rack=rack))
    store.create_topic("orders", {0: [1, 2], 1: [2, 1], 2: [3, 1], 3: [1, 2]})
    store.create_topic("tiny", {0: [2, 1]})
    store.set_topic_config("orders", {"min.insync.replicas": "2"})
    leaders = {("orders", 0): (2, (1, 2)), ("orders", 1): (2, (1, 2)), ("orders", 2): (3, (3, 1)),
               ("orders", 3): (2, (2,)), ("tiny", 0): (1, (1, 2))}  # fmt: skip
    store.create_partition_states(
        {
            TP(t, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 0, isr), epoch.epoch)
            for (t, p), (leader, isr) in leaders.items()
        },
        epoch.epoch_zk_version,
    )
    return Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)


def user(name: str, role: str | None, superuser: bool = False) -> User:
    u = User.objects.create_user(name, password="pw-correct-horse", is_superuser=superuser)
    if role:
        u.groups.add(Group.objects.get(name=role))
    return u


def as_user(u: User | None, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    if u is not None:
        client.force_login(u)
    return client


def change(epoch: int, seq: int, kind: str, at: datetime, **fields: Any) -> StateChange:
    record = {"controller_epoch": epoch, "seq": seq, "kind": kind, **fields}
    keep = {k: v for k, v in fields.items() if k in {f.name for f in StateChange._meta.fields}}
    return StateChange.objects.create(
        cluster=NAME, controller_epoch=epoch, seq=seq, ts=at, kind=kind, record=record, **keep
    )


@pytest.fixture
def history_rows(db: None) -> datetime:
    """Epoch 1 (controller 1): broker 2 registers, gains orders-0, dies; epoch 2 (controller 2) takes over."""
    t0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
    change(1, 1, "failover", t0, controller_id=1, duration_ms=12.5, live_brokers=[1], partitions=5)
    change(1, 2, "broker_change", t0 + timedelta(seconds=1), controller_id=1, new_brokers=[2], dead_brokers=[])
    elected = {"strategy": "preferred", "cause": "ReplicaLeaderElection"}
    change(1, 3, "election", t0 + timedelta(seconds=2), controller_id=1, topic="orders", partition=0,
           entity="orders-0", leader_before=1, leader_after=2, **elected)  # fmt: skip
    change(1, 4, "isr_change", t0 + timedelta(seconds=3), controller_id=1, topic="orders", partition=0,
           entity="orders-0", leader_before=2, leader_after=2)  # fmt: skip
    change(1, 5, "broker_change", t0 + timedelta(seconds=4), controller_id=1, new_brokers=[], dead_brokers=[2])
    change(1, 6, "election", t0 + timedelta(seconds=4), controller_id=1, topic="orders", partition=0,
           entity="orders-0", leader_before=2, leader_after=1, strategy="offline", cause="BrokerChange")  # fmt: skip
    change(2, 1, "failover", t0 + timedelta(seconds=10), controller_id=2, duration_ms=30.0, live_brokers=[1])
    change(2, 2, "state_snapshot", t0 + timedelta(seconds=10, milliseconds=5), controller_id=2)
    return t0


# -- permissions ----------------------------------------------------------------------------------------

VIEWER_PAGES = [
    "/actions/", "/actions/?format=csv", "/actions/?format=json",
    f"/actions/clusters/{NAME}/topics/orders/0/history/",
    f"/actions/clusters/{NAME}/topics/orders/0/history/?format=csv",
    f"/actions/clusters/{NAME}/topics/orders/0/history/?format=json",
    f"/actions/clusters/{NAME}/brokers/2/history/", f"/actions/clusters/{NAME}/brokers/2/history/?format=csv",
    f"/actions/clusters/{NAME}/brokers/2/history/?format=json",
    f"/actions/clusters/{NAME}/failovers/", f"/actions/clusters/{NAME}/failovers/?format=csv",
    f"/actions/clusters/{NAME}/failovers/?format=json",
    f"/actions/clusters/{NAME}/impact/", f"/actions/clusters/{NAME}/impact/?broker=2&mode=failure",
]  # fmt: skip
VIEWER_API = [
    "/api/v1/actions/", f"/api/v1/clusters/{NAME}/impact/?broker=2", f"/api/v1/clusters/{NAME}/brokers/2/history/",
    f"/api/v1/clusters/{NAME}/failovers/", f"/api/v1/clusters/{NAME}/topics/orders/0/history/",
]  # fmt: skip
OPERATOR_PAGES = [f"{ELECT}?scope=imbalanced"]
OPERATOR_API = [f"/api/v1/clusters/{NAME}/preferred-election/preview/?scope=imbalanced"]
ADMIN_PAGES = ["/actions/admin/clusters/", f"/actions/admin/clusters/{NAME}/", "/actions/admin/users/"]
RANK = {"anonymous": -1, "nogroup": 0, "viewer": 0, "operator": 1, "admin": 2, "superuser": 2}


def test_permission_matrix_over_pages_and_api(cluster: Cluster, history_rows: datetime, sent: list[Any]) -> None:
    people = {
        "anonymous": None, "viewer": user("vera", "viewer"), "nogroup": user("nora", None),
        "operator": user("otto", "operator"), "admin": user("ada", "admin"), "superuser": user("root", None, True),
    }  # fmt: skip
    done = Action.objects.create(username="x", cluster=NAME, kind="preferred_election", status="succeeded")
    pages = [*VIEWER_PAGES, f"/actions/{done.pk}/", f"/actions/{done.pk}/?format=json"]
    api = [*VIEWER_API, f"/api/v1/actions/{done.pk}/"]
    viewer = people["viewer"]
    assert viewer is not None
    admin_user_page = f"/actions/admin/users/{viewer.pk}/"
    for who, person in people.items():
        client = as_user(person)
        rank = RANK[who]
        for needed, urls, is_api in (
            (0, pages, False), (0, api, True), (1, OPERATOR_PAGES, False), (1, OPERATOR_API, True),
            (2, [*ADMIN_PAGES, admin_user_page], False),
        ):  # fmt: skip
            for url in urls:
                response = client.get(url)
                if who == "anonymous":
                    if is_api:
                        assert response.status_code == 401 and "log in first" in response.json()["error"], url
                    else:
                        assert response.status_code == 302 and "/accounts/login/" in response["Location"], url
                elif rank >= needed:
                    assert response.status_code == 200, (who, url, response.content[:300])
                else:
                    assert response.status_code == 403, (who, url)
                    if is_api:
                        assert "may not" in response.json()["error"]
        post = client.post(API_ELECT, json.dumps(GOOD), content_type="application/json")
        expected = {-1: 401, 0: 403, 1: 201, 2: 201}[rank]
        assert post.status_code == expected, (who, post.content)
        admin_post = client.post(
            "/actions/admin/clusters/new/",
            {"name": f"c-{who}", "zookeeper_connect": cluster.zookeeper_connect, "mode": "managed"},
        )
        assert admin_post.status_code == {-1: 302, 0: 403, 1: 403, 2: 302}[rank], who
    assert set(Cluster.objects.values_list("name", flat=True)) == {NAME, "c-admin", "c-superuser"}
    refused = Action.objects.filter(kind="preferred_election", status="rejected").values_list("username", flat=True)
    assert sorted(refused) == ["nora", "vera"] and len(sent) == 3


def test_api_election_needs_csrf_and_post(cluster: Cluster, zk: KazooClient, redis_url: str, sent: list[Any]) -> None:
    operator = user("otto", "operator")
    strict = as_user(operator, enforce_csrf_checks=True)
    before = (zk_tree(zk), redis_keys(redis_url))
    assert strict.post(API_ELECT, json.dumps(GOOD), content_type="application/json").status_code == 403
    assert strict.post(ELECT, GOOD).status_code == 403
    assert strict.post("/actions/admin/users/", {"username": "x"}).status_code == 403
    assert not Action.objects.filter(kind="preferred_election").exists() and not sent
    client = as_user(operator)
    assert client.get(API_ELECT).status_code == 405 and client.get(API_ELECT)["Allow"] == "POST"
    assert client.put(ELECT, "scope=imbalanced", content_type="application/x-www-form-urlencoded").status_code == 405
    assert zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None
    assert (zk_tree(zk), redis_keys(redis_url)) == before
    assert not User.objects.filter(username="x").exists()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("not json", "not valid JSON"),
        ("[1]", "must be a JSON object"),
        (json.dumps({"scope": "all", "reason": "r"}), "scope must be one of"),
        (json.dumps({"scope": "topic", "topic": "nope", "reason": "r"}), "unknown topic"),
        (json.dumps({"scope": "imbalanced", "reason": ""}), "a reason is required"),
        (json.dumps({"scope": "broker", "broker": "3", "reason": "r"}), "nothing to elect"),
    ],
)
def test_api_bad_input_is_rejected_and_writes_nothing(
    cluster: Cluster, zk: KazooClient, sent: list[Any], body: str, message: str
) -> None:
    response = as_user(user("otto", "operator")).post(API_ELECT, body, content_type="application/json")
    assert response.status_code == 400 and message in response.json()["error"]
    (action,) = Action.objects.filter(kind="preferred_election")
    assert action.status == "rejected" and message in action.error
    assert not sent and zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (f"/api/v1/clusters/{NAME}/impact/?broker=9", "broker 9 is not registered"),
        (f"/api/v1/clusters/{NAME}/impact/?rack=z", "no registered broker is in rack 'z'"),
        (f"/api/v1/clusters/{NAME}/impact/?broker=x", "non-negative whole numbers"),
        (f"/api/v1/clusters/{NAME}/impact/?broker=2&rack=b", "not both"),
        (f"/api/v1/clusters/{NAME}/impact/?broker=2&mode=crash", "mode must be"),
        (f"/api/v1/clusters/{NAME}/failovers/?since=yesterday", "since must be a date"),
        ("/api/v1/actions/?since=2026-02-01&until=2026-01-01", "since is after until"),
        (f"/api/v1/clusters/{NAME}/brokers/2/history/?event=nap", "event must be one of"),
    ],
)
def test_bad_query_parameters_are_400(cluster: Cluster, url: str, message: str) -> None:
    response = as_user(user("vera", "viewer")).get(url)
    assert response.status_code == 400 and message in response.json()["error"], response.content


# -- idempotency ----------------------------------------------------------------------------------------


def test_a_replayed_idempotency_key_returns_the_first_action(cluster: Cluster, sent: list[Any]) -> None:
    otto, ada = user("otto", "operator"), user("ada", "admin")
    form = as_user(otto).get(ELECT, {"scope": "imbalanced"}).content.decode()
    assert 'name="idempotency_key"' in form
    first = as_user(otto).post(ELECT, {**GOOD, "idempotency_key": "k-1"})
    again = as_user(otto).post(ELECT, {**GOOD, "idempotency_key": "k-1"})
    assert first["Location"] == again["Location"] and len(sent) == 1
    api = as_user(otto).post(API_ELECT, json.dumps(GOOD), content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert api.status_code == 200 and api.json()["replayed"] and first["Location"] == f"/actions/{api.json()['id']}/"
    other = as_user(ada).post(API_ELECT, json.dumps(GOOD), content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-1")
    assert other.status_code == 201 and other.json()["id"] != api.json()["id"]  # keys are per user
    assert len(sent) == 2 and Action.objects.filter(kind="preferred_election", status="queued").count() == 2
    bad = json.dumps({"scope": "nope", "reason": "r"})
    refused = as_user(otto).post(API_ELECT, bad, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-2")
    retried = as_user(otto).post(API_ELECT, bad, content_type="application/json", HTTP_IDEMPOTENCY_KEY="k-2")
    assert refused.status_code == 400 and retried.status_code == 200 and retried.json()["status"] == "rejected"
    assert Action.objects.filter(idempotency_key="k-2").count() == 1 and len(sent) == 2


# -- impact ---------------------------------------------------------------------------------------------


def test_impact_of_a_broker_failure_and_shutdown(cluster: Cluster) -> None:
    client = as_user(user("vera", "viewer"))
    data = client.get(f"/api/v1/clusters/{NAME}/impact/", {"broker": "2", "mode": "failure"}).json()
    assert data["summary"]["offline"] == 1 and data["summary"]["leader_moves"] == 2
    assert [(p["topic"], p["partition"]) for p in data["offline"]] == [("orders", 3)]
    assert [(p["partition"], p["new_leader"], p["new_isr"]) for p in data["leader_moves"]] == [(0, 1, [1]), (1, 1, [1])]
    assert [p["partition"] for p in data["under_min_isr"]] == [0, 1] and data["summary"]["leaders_gained"] == {"1": 2}
    shutdown = client.get(f"/api/v1/clusters/{NAME}/impact/", {"broker": "2", "mode": "shutdown"}).json()
    assert [p["effect"] for p in shutdown["offline"]] == ["stays_until_stop"]
    rack = client.get(f"/api/v1/clusters/{NAME}/impact/", {"rack": "b"}).json()
    assert rack["brokers"] == [2, 3] and [(p["topic"], p["partition"]) for p in rack["offline"]] == [("orders", 3)]
    assert [(p["partition"], p["new_leader"]) for p in rack["leader_moves"]] == [(0, 1), (1, 1), (2, 1)]
    page = client.get(f"/actions/clusters/{NAME}/impact/", {"broker": "2", "mode": "shutdown"}).content.decode()
    assert 'id="impact-summary"' in page and "controlled shutdown" in page and "orders-3" in page


# -- histories ------------------------------------------------------------------------------------------


def test_broker_history_and_failovers(cluster: Cluster, history_rows: datetime) -> None:
    client = as_user(user("vera", "viewer"))
    data = client.get(f"/api/v1/clusters/{NAME}/brokers/2/history/").json()
    assert [r["event"] for r in data["results"]] == ["registered", "leader_gained", "deregistered", "leader_lost"]
    lost = client.get(f"/actions/clusters/{NAME}/brokers/2/history/", {"event": "leader_lost", "format": "json"})
    assert [r["seq"] for r in lost.json()["results"]] == [6]
    rows = list(
        csv.reader(io.StringIO(client.get(f"/actions/clusters/{NAME}/brokers/2/history/?format=csv").content.decode()))
    )
    assert rows[0][:4] == ["controller_epoch", "seq", "ts", "event"] and len(rows) == 5
    failovers = client.get(f"/api/v1/clusters/{NAME}/failovers/").json()["results"]
    assert [(f["controller_epoch"], f["controller_id"], f["previous_controller_id"]) for f in failovers] == [
        (2, 2, 1), (1, 1, None),
    ]  # fmt: skip
    assert failovers[0]["gap_ms"] == 6000 and failovers[0]["failover_duration_ms"] == 30.0
    page = client.get(f"/actions/clusters/{NAME}/failovers/").content.decode()
    assert "6000 ms" in page
    since = history_rows + timedelta(seconds=5)
    filtered = client.get(f"/api/v1/clusters/{NAME}/failovers/", {"since": since.isoformat()}).json()
    assert filtered["count"] == 1


def test_partition_history_filters_and_exports(cluster: Cluster, history_rows: datetime) -> None:
    client = as_user(user("vera", "viewer"))
    base = f"/actions/clusters/{NAME}/topics/orders/0/history/"
    assert client.get(base, {"format": "json"}).json()["count"] == 3
    assert [r["seq"] for r in client.get(base, {"format": "json", "kind": "election"}).json()["results"]] == [3, 6]
    assert client.get(base, {"format": "json", "q": "brokerchange"}).json()["count"] == 1
    rows = list(csv.reader(io.StringIO(client.get(base + "?format=csv").content.decode())))
    assert rows[0][:3] == ["controller_epoch", "seq", "ts"] and rows[0][-2:] == ["strategy", "action_id"]
    assert len(rows) == 4
    actions = client.get("/actions/", {"format": "json", "q": "nothing-matches"}).json()
    assert actions["count"] == 0


# -- admin pages and Django admin -----------------------------------------------------------------------


def test_admin_pages_change_clusters_and_users_with_audit(cluster: Cluster) -> None:
    ada = user("ada", "admin")
    client = as_user(ada)
    bad = client.post("/actions/admin/clusters/new/", {"name": "two", "zookeeper_connect": "no port here:x"})
    assert bad.status_code == 400 and not Cluster.objects.filter(name="two").exists()
    # Registering connects to the ZooKeeper given (dashboard.clusters.probe): the fixture's layout, then
    # an empty chroot beside it, which only a managed cluster may start from.
    made = client.post(
        "/actions/admin/clusters/new/",
        {"name": "two", "zookeeper_connect": cluster.zookeeper_connect, "mode": "observed", "note": "new"},
    )
    assert made.status_code == 302
    empty = cluster.zookeeper_connect + "/empty"
    edited = client.post("/actions/admin/clusters/two/", {"name": "two", "zookeeper_connect": empty, "mode": "managed"})
    assert edited.status_code == 302
    assert client.post("/actions/admin/clusters/two/remove/", {"confirm": "nope"}).status_code == 302
    assert Cluster.objects.filter(name="two").exists()
    client.post("/actions/admin/clusters/two/remove/", {"confirm": "two"})
    assert not Cluster.objects.filter(name="two").exists()
    changes = list(Action.objects.filter(kind="cluster_change", status="succeeded").order_by("id"))
    assert [(c.parameters["operation"], c.username) for c in changes] == [
        ("registered", "ada"), ("changed", "ada"), ("removed", "ada"),
    ]  # fmt: skip
    assert changes[1].parameters["before"]["zookeeper_connect"] == cluster.zookeeper_connect
    assert changes[1].parameters["after"]["zookeeper_connect"] == empty

    created = client.post(
        "/actions/admin/users/", {"username": "olga", "password": "Tr1cky-Pass-phrase", "role": "operator"}
    )
    assert created.status_code == 302
    olga = User.objects.get(username="olga")
    assert olga.groups.filter(name="operator").exists()
    weak = client.post("/actions/admin/users/", {"username": "weak", "password": "123", "role": "viewer"})
    assert weak.status_code == 400 and not User.objects.filter(username="weak").exists()
    client.post(f"/actions/admin/users/{olga.pk}/", {"role": "viewer", "is_active": "on"})
    self_demote = client.post(f"/actions/admin/users/{ada.pk}/", {"role": "viewer", "is_active": "on"})
    assert self_demote.status_code == 400 and ada.groups.filter(name="admin").exists()
    rows = list(Action.objects.filter(kind="user_change").order_by("id"))
    assert [(r.status, r.parameters.get("operation")) for r in rows] == [
        ("succeeded", "created"), ("rejected", "create"), ("succeeded", "changed"), ("rejected", "change"),
    ]  # fmt: skip
    assert rows[2].parameters["before"]["groups"] == ["operator"] and rows[2].parameters["after"]["groups"] == [
        "viewer"
    ]
    assert "password" not in json.dumps(rows[0].parameters).replace('"password": "changed"', "")


def test_django_admin_changes_are_audited(cluster: Cluster) -> None:
    root = user("root", None, superuser=True)
    root.is_staff = True
    root.save()
    client = as_user(root)
    response = client.post(
        f"/admin/clusters/cluster/{cluster.pk}/change/",
        {"name": NAME, "zookeeper_connect": cluster.zookeeper_connect, "mode": "observed", "description": "via admin"},
    )
    assert response.status_code == 302, response.content[:500]
    (row,) = Action.objects.filter(kind="cluster_change")
    assert row.username == "root" and row.parameters["source"] == "django admin"
    assert row.parameters["before"]["mode"] == "managed" and row.parameters["after"]["mode"] == "observed"
    vera = user("vera", "viewer")
    operator = Group.objects.get(name="operator")
    joined = {"date_joined_0": "2026-01-01", "date_joined_1": "00:00:00"}
    data = {"username": "vera", "groups": [operator.pk], "is_active": "on", **joined,
            **{f"initial-{k}": v for k, v in joined.items()}}  # fmt: skip
    response = client.post(f"/admin/auth/user/{vera.pk}/change/", data)
    assert response.status_code == 302, response.content[:2000]
    (change_row,) = Action.objects.filter(kind="user_change")
    assert change_row.username == "root" and change_row.parameters["before"]["groups"] == ["viewer"]
    assert change_row.parameters["after"]["groups"] == ["operator"]
