"""Preferred election action against real ZooKeeper: permissions, CSRF, bad input, the task, audit."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from kazoo.client import KazooClient

from controller_core.model import BrokerRegistration, EndPoint, LeaderAndIsr, LeaderIsrAndControllerEpoch
from controller_core.model import TopicPartition as TP
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.support.snapshots import zk_tree
from workers.actions import preferred_election, run_preferred_election

pytestmark = pytest.mark.django_db

NAME = "acts"
URL = f"/actions/clusters/{NAME}/preferred-election/"
GOOD = {"scope": "imbalanced", "topic": "", "partition": "", "broker": "", "reason": "rebalance after restart"}


@pytest.fixture
def cluster(zk: KazooClient, zk_chroot: str) -> Cluster:
    """orders-0 can move to 1; orders-1 is preferred; orders-2's preferred broker 3 is down;
    orders-3's preferred replica 1 is out of the ISR; tiny-0 can move to 2. Controller epoch 1."""
    store = ZkStore(zk)
    store.ensure_persistent_paths()
    epoch = store.register_controller_and_increment_epoch(99)
    for b in (1, 2):
        store.register_broker(BrokerRegistration(id=b, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9000 + b),)))
    store.create_topic("orders", {0: [1, 2], 1: [2, 1], 2: [3, 1], 3: [1, 2]})
    store.create_topic("tiny", {0: [2, 1]})
    leaders = {("orders", 0): (2, (1, 2)), ("orders", 1): (2, (1, 2)), ("orders", 2): (1, (1,)),
               ("orders", 3): (2, (2,)), ("tiny", 0): (1, (1, 2))}  # fmt: skip
    states = {
        TP(t, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, 0, isr), epoch.epoch)
        for (t, p), (leader, isr) in leaders.items()
    }
    store.create_partition_states(states, epoch.epoch_zk_version)
    return Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)


def _user(name: str, role: str | None, superuser: bool = False) -> User:
    user = User.objects.create_user(name, password="pw-correct-horse", is_superuser=superuser)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


def as_user(user: User | None, **kwargs: Any) -> Client:
    client = Client(**kwargs)
    if user is not None:
        client.force_login(user)
    return client


def no_request(zk: KazooClient) -> bool:
    return zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None


def test_permission_matrix(cluster: Cluster, zk: KazooClient, sent: list[Any]) -> None:
    users = {
        "anonymous": None,
        "viewer": _user("vera", "viewer"),
        "nogroup": _user("nora", None),
        "operator": _user("otto", "operator"),
        "admin": _user("ada", "admin"),
        "superuser": _user("root", None, superuser=True),
    }
    done = Action.objects.create(username="x", cluster=NAME, kind="preferred_election", status="succeeded")
    pages = ["/actions/", f"/actions/{done.pk}/", "/actions/?format=csv"]
    for who, user in users.items():
        client = as_user(user)
        for page in pages:
            response = client.get(page)
            if who == "anonymous":
                assert response.status_code == 302 and "/accounts/login/" in response["Location"], (who, page)
            else:
                assert response.status_code == 200, (who, page)
        preview = client.get(URL, {"scope": "imbalanced"})
        post = client.post(URL, GOOD)
        if who == "anonymous":
            assert preview.status_code == 302 and post.status_code == 302
        elif who in ("viewer", "nogroup"):
            assert preview.status_code == 403 and post.status_code == 403, who
        else:
            assert preview.status_code == 200, who
            assert post.status_code == 302, who
    # viewers' attempts are recorded as rejected; nothing was written to ZooKeeper by the web process
    rejected = Action.objects.filter(kind="preferred_election", status="rejected").order_by("username")
    assert [(a.username, a.error) for a in rejected] == [
        ("nora", "not allowed: operators only"), ("vera", "not allowed: operators only"),
    ]  # fmt: skip
    assert Action.objects.filter(kind="preferred_election", status="queued").count() == 3 and len(sent) == 3
    assert no_request(zk)


def test_preview_shows_electable_and_blocked_partitions(cluster: Cluster) -> None:
    client = as_user(_user("otto", "operator"))
    html = client.get(URL, {"scope": "imbalanced"}).content.decode()
    assert "orders-0" in html and "tiny-0" in html
    assert "preferred replica 3 is down" in html
    assert "preferred replica 1 is not in the ISR [2]" in html
    assert 'name="csrfmiddlewaretoken"' in html
    broker = client.get(URL, {"scope": "broker", "broker": "1"}).content.decode()
    assert "orders-0" in broker and "tiny-0" not in broker


def test_csrf_is_enforced(cluster: Cluster, zk: KazooClient, sent: list[Any]) -> None:
    client = as_user(_user("otto", "operator"), enforce_csrf_checks=True)
    before = zk_tree(zk)
    assert client.post(URL, GOOD).status_code == 403
    assert not Action.objects.filter(kind="preferred_election").exists() and not sent and no_request(zk)
    assert zk_tree(zk) == before


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"scope": "all"}, "scope must be one of"),
        ({"scope": "topic", "topic": "nope"}, "unknown topic"),
        ({"scope": "partition", "topic": "orders", "partition": "7"}, "has no partition 7"),
        ({"scope": "partition", "topic": "orders", "partition": "x"}, "partition must be"),
        ({"scope": "broker", "broker": "-2"}, "broker must be"),
        ({"scope": "broker", "broker": "3"}, "nothing to elect"),
        ({"scope": "imbalanced", "reason": "  "}, "a reason is required"),
        ({"scope": "imbalanced", "reason": "x" * 2001}, "longer than 2000"),
    ],
)
def test_bad_input_is_rejected_recorded_and_writes_nothing(
    cluster: Cluster, zk: KazooClient, sent: list[Any], data: dict[str, str], message: str
) -> None:
    client = as_user(_user("otto", "operator"))
    response = client.post(URL, {"reason": "because", **data})
    assert response.status_code == 400
    assert message in response.content.decode()
    (action,) = Action.objects.filter(kind="preferred_election")
    assert action.status == "rejected" and message in action.error and action.username == "otto"
    assert not sent and no_request(zk)


def test_unreachable_zookeeper_is_reported(db: None, sent: list[Any], settings: Any) -> None:
    settings.ZOOKEEPER_SESSION_TIMEOUT_S = 1
    Cluster.objects.create(name=NAME, zookeeper_connect="127.0.0.1:1/nothing")
    client = as_user(_user("otto", "operator"))
    response = client.post(URL, GOOD)
    assert response.status_code == 503 and "could not read ZooKeeper" in response.content.decode()
    assert Action.objects.get(kind="preferred_election").status == "rejected" and not sent


def test_submit_then_task_writes_kafkas_request(
    cluster: Cluster, zk: KazooClient, zk_chroot: str, sent: list[Any]
) -> None:
    client = as_user(_user("otto", "operator"))
    response = client.post(URL, GOOD)
    (action,) = Action.objects.filter(kind="preferred_election")
    assert response["Location"] == f"/actions/{action.pk}/"
    assert sent == [("workers.actions.preferred_election", [action.pk])]
    assert action.status == "queued" and action.task_id == "task-1" and action.reason == GOOD["reason"]
    assert [r["partition"] for r in action.preview["electable"]] == [0, 0]
    assert no_request(zk)  # the web process never writes; the task does

    assert preferred_election.run(action.pk, wait_s=0.3, connect=zk_chroot) == "pending"
    data, _ = zk.get(paths.PREFERRED_REPLICA_ELECTION_PATH)
    assert codecs.decode_preferred_replica_election(data) == {TP("orders", 0), TP("tiny", 0)}
    action.refresh_from_db()
    assert action.status == "pending" and action.controller_epoch == 1
    assert action.duration_ms is not None and action.started and action.finished
    assert [p["outcome"] for p in action.outcome["partitions"]] == ["not elected (leader 2)", "not elected (leader 1)"]
    # a redelivered task does not write again
    assert preferred_election.run(action.pk, wait_s=0.1, connect=zk_chroot) == "pending"

    page = client.get(f"/actions/{action.pk}/").content.decode()
    assert "rebalance after restart" in page and "orders-0" in page and "Controller epoch" in page
    # final when served: nothing polls, so the page carries its status itself (actions.js reads it)
    assert 'data-live="0" data-action-status="pending"' in page
    rows = list(csv.reader(io.StringIO(client.get("/actions/?format=csv").content.decode())))
    assert rows[0][:6] == ["id", "created", "username", "cluster", "kind", "status"]
    assert rows[1][2:6] == ["otto", NAME, "preferred_election", "pending"]


def test_task_refuses_while_a_request_is_pending(cluster: Cluster, zk: KazooClient, zk_chroot: str) -> None:
    ZkStore(zk).create_preferred_replica_election_request([TP("orders", 3)])
    before = zk.get(paths.PREFERRED_REPLICA_ELECTION_PATH)[0]
    action = Action.objects.create(
        username="otto", cluster=NAME, kind="preferred_election", status="queued",
        preview={"electable": [{"topic": "orders", "partition": 0, "preferred": 1, "leader": 2}]},
    )  # fmt: skip
    assert preferred_election.run(action.pk, wait_s=0.1, connect=zk_chroot) == "rejected"
    action.refresh_from_db()
    assert "already in progress" in action.error and "nothing written" in action.error
    assert zk.get(paths.PREFERRED_REPLICA_ELECTION_PATH)[0] == before


def test_bounded_batches_one_request_at_a_time(
    cluster: Cluster, zk: KazooClient, election_consumer: list[set[TP]]
) -> None:
    rows = [
        {"topic": "orders", "partition": 0, "preferred": 1, "leader": 2},
        {"topic": "tiny", "partition": 0, "preferred": 2, "leader": 1},
    ]
    action = Action(
        username="otto", cluster=NAME, kind="preferred_election", status="running", preview={"electable": rows}
    )
    run_preferred_election(action, ZkStore(zk), batch_size=1, wait_s=5)
    assert election_consumer == [{TP("orders", 0)}, {TP("tiny", 0)}]
    assert action.status == "succeeded", action.error
    assert action.outcome["batches"] == [{"size": 1, "result": "consumed by the controller"}] * 2
    assert [p["outcome"] for p in action.outcome["partitions"]] == ["elected", "elected"]


def test_audit_rows_cannot_be_deleted(db: None) -> None:
    action = Action.objects.create(username="x", cluster=NAME, kind="preferred_election", status="rejected")
    with pytest.raises(PermissionError):
        action.delete()


def test_only_operators_are_offered_the_election_form(cluster: Cluster) -> None:
    assert URL not in as_user(_user("vera", "viewer")).get("/actions/").content.decode()
    assert URL in as_user(_user("otto", "operator")).get("/actions/").content.decode()
    empty = as_user(_user("ada", "admin")).get(URL).content.decode()
    assert 'id="preview-form"' in empty and 'id="execute-form"' not in empty


def test_json_preview_and_detail_and_csv_formula_quoting(cluster: Cluster, sent: list[Any]) -> None:
    viewer = as_user(_user("vera", "viewer"))
    assert viewer.get(URL, {"scope": "imbalanced", "format": "json"}).status_code == 403
    operator = as_user(_user("otto", "operator"))
    data = operator.get(URL, {"scope": "topic", "topic": "orders", "format": "json"}).json()
    assert [(r["partition"], r["new_leader"]) for r in data["electable"]] == [(0, 1)]
    assert [(r["partition"], r["blocked"]) for r in data["blocked"]] == [
        (2, "preferred replica 3 is down"), (3, "preferred replica 1 is not in the ISR [2]"),
    ]  # fmt: skip
    operator.post(URL, {**GOOD, "reason": "=HYPERLINK(1)"})
    action = Action.objects.get(kind="preferred_election")
    detail = viewer.get(f"/actions/{action.pk}/?format=json").json()
    assert detail["status"] == "queued" and detail["reason"] == "=HYPERLINK(1)" and detail["username"] == "otto"
    rows = list(csv.reader(io.StringIO(viewer.get("/actions/?format=csv").content.decode())))
    assert rows[1][6] == "'=HYPERLINK(1)"


def test_logins_and_failed_logins_are_audited(db: None) -> None:
    _user("vera", "viewer")
    client = Client()
    assert client.post("/accounts/login/", {"username": "vera", "password": "s3cret-guess"}).status_code == 200
    assert client.post("/accounts/login/", {"username": "vera", "password": "pw-correct-horse"}).status_code == 302
    rows = list(Action.objects.order_by("id").values_list("kind", "status", "username"))
    assert rows == [("login_failed", "rejected", "vera"), ("login", "succeeded", "vera")]
    assert "s3cret-guess" not in str(list(Action.objects.values_list("parameters", "error", "reason")))
