"""Reassignment pages and JSON API against real ZooKeeper: permissions, CSRF, every bad input
refused with nothing written, idempotency, and the execute task's write (once, even redelivered)."""

from __future__ import annotations

import html
import json
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
from tests.support.snapshots import redis_keys, zk_tree
from workers.reassign import execute, run_execute

pytestmark = pytest.mark.django_db

NAME = "moves"
PAGE = f"/actions/clusters/{NAME}/reassign/"
API = f"/api/v1/clusters/{NAME}/reassignments/"
GOOD = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 4]}]}


@pytest.fixture
def cluster(zk: KazooClient, zk_chroot: str, settings: Any, redis_url: str) -> Cluster:
    """Brokers 1-4 on racks a, a, b, b; orders: 0 on [1,2], 1 on [2,1]; moving-0 is being reassigned
    from [1,2] to [3,2]; doomed is queued for deletion."""
    settings.REDIS_URL = redis_url
    settings.ACTION_RATE_LIMIT = "0"
    settings.BROKER_AGENT_TIMEOUT_S = 0.2
    store = ZkStore(zk)
    store.ensure_persistent_paths()
    epoch = store.register_controller_and_increment_epoch(99)
    for b, rack in ((1, "a"), (2, "a"), (3, "b"), (4, "b")):
        store.register_broker(BrokerRegistration(id=b, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 1),), rack=rack))
    store.create_topic("orders", {0: [1, 2], 1: [2, 1]})
    store.create_topic("moving", {0: [1, 2]})
    store.create_topic("doomed", {0: [1, 2]})
    data, _ = zk.get(paths.topic_path("moving"))
    doc = json.loads(data)
    doc["partitions"] = {"0": [3, 2, 1]}
    doc["adding_replicas"] = {"0": [3]}
    doc["removing_replicas"] = {"0": [1]}
    zk.set(paths.topic_path("moving"), json.dumps(doc).encode())
    store.mark_topic_for_deletion("doomed")
    states = {
        TP(t, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2)), epoch.epoch)
        for t, p in (("orders", 0), ("orders", 1), ("moving", 0), ("doomed", 0))
    }
    store.create_partition_states(states, epoch.epoch_zk_version)
    return Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)


def client_for(role: str | None, name: str = "otto", **kwargs: Any) -> Client:
    client = Client(**kwargs)
    if role is not None:
        user = User.objects.create_user(name, password="pw-correct-horse", is_superuser=role == "superuser")
        if role in ("viewer", "operator", "admin"):
            user.groups.add(Group.objects.get(name=role))
        client.force_login(user)
    return client


def post_json(client: Client, url: str, body: Any, **headers: str) -> Any:
    return client.post(url, json.dumps(body), content_type="application/json", headers=headers)


def text(response: Any) -> str:
    return html.unescape(response.content.decode())


def test_permission_matrix(cluster: Cluster, zk: KazooClient, sent: list[Any]) -> None:
    before = zk_tree(zk)
    done = Action.objects.create(username="x", cluster=NAME, kind="reassignment", status="succeeded")
    for role in (None, "viewer", "operator", "admin", "superuser"):
        client = client_for(role, name=f"u-{role}")
        page = client.get(PAGE)
        progress_page = client.get(f"{PAGE}{done.pk}/")
        progress = client.get(f"{API}{done.pk}/progress")
        gen = post_json(client, API + "generate", {"topics": ["orders"], "brokers": [3, 4]})
        val = post_json(client, API + "validate", {"reassignment": GOOD})
        cancel_api = post_json(client, f"{API}{done.pk}/cancel", {"reason": "r"})
        if role is None:
            assert page.status_code == 302 and progress_page.status_code == 302
            assert progress.status_code == 401
            assert gen.status_code == 401 and val.status_code == 401 and cancel_api.status_code == 401
        elif role == "viewer":
            assert page.status_code == 403 and gen.status_code == 403 and val.status_code == 403
            assert cancel_api.status_code == 403
            assert progress_page.status_code == 200 and progress.status_code == 200
        else:
            assert page.status_code == 200, role
            assert progress_page.status_code == 200 and progress.status_code == 200
            assert gen.status_code == 200, gen.content
            assert val.status_code == 200, val.content
            # the reassignment has finished: nothing to cancel, recorded as rejected
            assert cancel_api.status_code == 400 and "nothing to cancel" in cancel_api.json()["error"]
    assert zk_tree(zk) == before
    assert sent == []
    viewer_rows = Action.objects.filter(username="u-viewer", kind__startswith="reassignment")
    assert viewer_rows.count() == 3 and all(a.status == "rejected" for a in viewer_rows)


def test_a_viewer_cannot_execute_a_reassignment(
    cluster: Cluster, zk: KazooClient, redis_url: str, sent: list[Any]
) -> None:
    viewer = client_for("viewer", name="u-viewer")
    before = (zk_tree(zk), redis_keys(redis_url), set(Action.objects.values_list("id", flat=True)))
    api = post_json(viewer, API + "execute", {"reassignment": GOOD, "reason": "r"})
    page = viewer.post(PAGE, {"reassignment": json.dumps(GOOD), "reason": "r", "op": "execute"})
    assert api.status_code == 403 and page.status_code == 403
    assert (zk_tree(zk), redis_keys(redis_url)) == before[:2]
    assert zk.exists(paths.REASSIGN_PARTITIONS_PATH) is None
    assert sent == []  # no execute task queued
    new_rows = Action.objects.exclude(id__in=before[2])
    assert all(a.status == "rejected" for a in new_rows)  # at most the refusal's audit rows


def test_only_post_acts_and_csrf_is_enforced(cluster: Cluster, zk: KazooClient, sent: list[Any]) -> None:
    before = zk_tree(zk)
    client = client_for("operator")
    for endpoint in ("generate", "validate", "execute"):
        assert client.get(API + endpoint).status_code == 405
    assert post_json(client, f"{API}1/progress", {}).status_code == 405
    strict = client_for("operator", name="strict", enforce_csrf_checks=True)
    assert post_json(strict, API + "execute", {"reassignment": GOOD, "reason": "r"}).status_code == 403
    assert strict.post(PAGE, {"reassignment": json.dumps(GOOD), "reason": "r", "op": "execute"}).status_code == 403
    # with the token (as the page's JS and API clients send it) it goes through
    strict.get(PAGE)
    token = strict.cookies["csrftoken"].value
    ok = post_json(strict, API + "validate", {"reassignment": GOOD}, X_CSRFToken=token)
    assert ok.status_code == 200 and ok.json()["valid"] is True
    assert zk_tree(zk) == before and sent == []
    assert not Action.objects.filter(kind="reassignment").exists()


BAD = [
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 9]}]}, "unknown broker(s) 9"),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, -1]}]}, "non-negative"),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, "4"]}]}, "non-negative"),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 3]}]}, "duplicate replica"),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": []}]}, "replica list is empty"),
    ({"version": 1, "partitions": [{"topic": "nope", "partition": 0, "replicas": [3, 4]}]}, "unknown topic 'nope'"),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 5, "replicas": [3, 4]}]}, "unknown partition"),
    (
        {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 4]}] * 2},
        "listed more than once",
    ),
    ({"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 3, 4]}]}, "factor would change"),
    ({"version": 1, "partitions": [{"topic": "doomed", "partition": 0, "replicas": [3, 4]}]}, "queued for deletion"),
    (
        {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [4, 2]}]},
        "already being reassigned",
    ),
    ({"version": 2, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 4]}]}, "version must be 1"),
    ({**GOOD, "extra": True}, "unknown key(s) extra"),
    ({"version": 1, "partitions": []}, "partitions is empty"),
    ("{not json", "not valid JSON"),
    ("", "the reassignment is empty"),
]


@pytest.mark.parametrize(("document", "message"), BAD)
def test_bad_input_is_refused_recorded_and_writes_nothing(
    cluster: Cluster, zk: KazooClient, sent: list[Any], document: Any, message: str
) -> None:
    before = zk_tree(zk)
    client = client_for("operator")
    response = post_json(client, API + "execute", {"reassignment": document, "reason": "move it"})
    assert response.status_code == 400, response.content
    assert any(message in e for e in response.json()["errors"]), response.json()
    page = client.post(PAGE, {"reassignment": document if isinstance(document, str) else json.dumps(document),
                              "reason": "move it", "op": "execute"})  # fmt: skip
    assert page.status_code == 400 and message in text(page) and "Nothing was written" in text(page)
    assert zk_tree(zk) == before and sent == []
    rows = Action.objects.filter(kind="reassignment")
    assert rows.count() == 2 and all(r.status == "rejected" and message in r.error for r in rows)


def test_a_missing_reason_and_a_pending_request_are_refused(cluster: Cluster, zk: KazooClient, sent: list[Any]) -> None:
    client = client_for("operator")
    response = post_json(client, API + "execute", {"reassignment": GOOD, "reason": " "})
    assert response.status_code == 400 and "a reason is required" in response.json()["errors"]
    ZkStore(zk).create_partition_reassignment_request({TP("orders", 1): (1, 2)})
    before = zk_tree(zk)
    response = post_json(client, API + "execute", {"reassignment": GOOD, "reason": "move"})
    assert response.status_code == 400
    assert "already pending in /admin/reassign_partitions (1 partitions: orders-1)" in response.json()["error"]
    assert zk_tree(zk) == before and sent == []


def test_replace_is_needed_for_a_partition_being_reassigned(cluster: Cluster, sent: list[Any]) -> None:
    client = client_for("operator")
    doc = {"version": 1, "partitions": [{"topic": "moving", "partition": 0, "replicas": [4, 2]}]}
    assert post_json(client, API + "validate", {"reassignment": doc}).status_code == 400
    ok = post_json(client, API + "validate", {"reassignment": doc, "replace": True})
    assert ok.status_code == 200 and ok.json()["replacing"] == ["moving-0"]


def test_generate_proposes_a_balanced_rack_aware_plan_and_writes_nothing(cluster: Cluster, zk: KazooClient) -> None:
    before = zk_tree(zk)
    client = client_for("operator")
    body = post_json(client, API + "generate", {"topics": ["orders"], "brokers": [1, 3]}).json()
    assert body["moved_replicas"] == 2
    assert body["replica_counts"] == {"1": 2, "3": 2} and body["leader_counts"] == {"1": 1, "3": 1}
    assert all(set(p["proposed"]) == {1, 3} for p in body["partitions"])
    assert body["data_to_copy"]["known"] is False  # no agent answers in this test
    bad = post_json(client, API + "generate", {"topics": ["orders"], "brokers": [1, 7]})
    assert bad.status_code == 400 and "unknown broker(s) 7" in bad.json()["error"]
    page = client.get(PAGE, {"generate": "1", "topics": "orders", "brokers": ["1", "3"]})
    assert page.status_code == 200 and 'id="proposal-table"' in text(page) and "unknown" in text(page)
    by_hand = client.get(PAGE, {"generate": "current", "topics": "orders"})
    assert by_hand.status_code == 200 and 'value="1, 2"' in text(by_hand) and 'value="2, 1"' in text(by_hand)
    assert client.get(PAGE, {"generate": "current", "topics": "nope"}).status_code == 400
    assert zk_tree(zk) == before


def test_idempotency_key_returns_the_first_action(cluster: Cluster, sent: list[Any]) -> None:
    client = client_for("operator")
    first = post_json(client, API + "execute", {"reassignment": GOOD, "reason": "move"}, Idempotency_Key="k-1")
    again = post_json(client, API + "execute", {"reassignment": GOOD, "reason": "move"}, Idempotency_Key="k-1")
    assert first.status_code == 202 and again.status_code == 200
    assert first.json()["action"] == again.json()["action"] and again.json()["replayed"] is True
    assert len(sent) == 1 and sent[0][0] == "workers.reassign.execute"
    # the form's hidden key works the same way
    form = {"reassignment": json.dumps(GOOD), "reason": "move", "op": "execute", "idempotency_key": "form-1"}
    r1, r2 = client.post(PAGE, form), client.post(PAGE, form)
    assert r1.status_code == 302 and r2["Location"] == r1["Location"]
    assert len(sent) == 2
    # another user with the same key gets their own action
    other = client_for("operator", name="olga")
    third = post_json(other, API + "execute", {"reassignment": GOOD, "reason": "move"}, Idempotency_Key="k-1")
    assert third.json()["action"] != first.json()["action"]


def test_execute_writes_kafkas_format_once_even_when_redelivered(
    cluster: Cluster, zk: KazooClient, zk_chroot: str, sent: list[Any]
) -> None:
    client = client_for("operator")
    doc = {"version": 1, "partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 4]},
                                       {"topic": "orders", "partition": 1, "replicas": [4, 1]}]}  # fmt: skip
    action_id = post_json(client, API + "execute", {"reassignment": doc, "reason": "move"}).json()["action"]
    assert execute.run(action_id, connect=zk_chroot, monitor=False) == "running"
    data, stat = zk.get(paths.REASSIGN_PARTITIONS_PATH)
    assert json.loads(data) == doc
    assert codecs.decode_reassignment(data) == {TP("orders", 0): (3, 4), TP("orders", 1): (4, 1)}
    action = Action.objects.get(pk=action_id)
    assert action.attempts == 1 and action.outcome["written"] is True and action.controller_epoch == 1
    assert [p["state"] for p in action.outcome["progress"]["partitions"]] == ["waiting", "waiting"]
    # redelivered (acks_late): counted, not written again
    assert execute.run(action_id, connect=zk_chroot, monitor=False) == "running"
    assert zk.get(paths.REASSIGN_PARTITIONS_PATH)[1].mzxid == stat.mzxid
    assert Action.objects.get(pk=action_id).attempts == 2
    # a crash between the write and recording it: the next delivery finds its own request
    action = Action.objects.get(pk=action_id)
    action.outcome = {"writing": True}
    action.save(update_fields=["outcome"])
    with store_for(zk_chroot) as store:
        run_execute(action, store)
    assert action.outcome["write"] == "found in /admin/reassign_partitions after a redelivery"
    assert zk.get(paths.REASSIGN_PARTITIONS_PATH)[1].mzxid == stat.mzxid
    # another action for the same partitions is refused while this one is pending
    second = post_json(client, API + "execute", {"reassignment": GOOD, "reason": "again"})
    assert second.status_code == 400 and "already pending" in second.json()["error"]


def test_execute_refuses_when_a_request_appeared_after_submission(
    cluster: Cluster, zk: KazooClient, zk_chroot: str, sent: list[Any]
) -> None:
    client = client_for("operator")
    action_id = post_json(client, API + "execute", {"reassignment": GOOD, "reason": "move"}).json()["action"]
    ZkStore(zk).create_partition_reassignment_request({TP("orders", 1): (1, 2)})
    before = zk_tree(zk)
    assert execute.run(action_id, connect=zk_chroot, monitor=False) == "rejected"
    action = Action.objects.get(pk=action_id)
    assert "already pending" in action.error and "nothing written" in action.error
    assert zk_tree(zk) == before
    assert execute.run(action_id, connect=zk_chroot, monitor=False) == "rejected"
    assert zk_tree(zk) == before


def store_for(connect: str) -> Any:
    from dashboard.actions.zk import cluster_store

    return cluster_store(connect)


def test_an_observed_cluster_says_cancel_is_not_available(cluster: Cluster, zk: KazooClient, sent: list[Any]) -> None:
    cluster.mode = Cluster.Mode.OBSERVED
    cluster.save()
    running = Action.objects.create(
        username="x",
        cluster=NAME,
        kind="reassignment",
        status="running",
        parameters={"partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 4], "origin": [1, 2]}]},
    )
    client = client_for("operator")
    page = text(client.get(f"{PAGE}{running.pk}/"))
    assert "Cancel is not available for an observed cluster" in page and 'id="cancel-form"' not in page
    before = zk_tree(zk)
    response = post_json(client, f"{API}{running.pk}/cancel", {"reason": "stop"})
    assert response.status_code == 400 and "not available for an observed cluster" in response.json()["error"]
    assert zk_tree(zk) == before and sent == []
    progress = client.get(f"{API}{running.pk}/progress").json()
    assert progress["cancel"].startswith("Cancel is not available")
    # not written yet (no outcome["written"]): progress is shown but nothing is recorded
    assert progress["progress"]["partitions"][0]["state"] == "reverted"
    assert Action.objects.get(pk=running.pk).status == "running"


def test_the_progress_page_offers_cancel_to_operators_while_it_runs(cluster: Cluster) -> None:
    running = Action.objects.create(username="x", cluster=NAME, kind="reassignment", status="running")
    finished = Action.objects.create(username="x", cluster=NAME, kind="reassignment", status="succeeded")
    operator, viewer = client_for("operator"), client_for("viewer", name="vera")
    assert 'id="cancel-form"' in text(operator.get(f"{PAGE}{running.pk}/"))
    assert 'id="cancel-form"' not in text(viewer.get(f"{PAGE}{running.pk}/"))
    page = text(operator.get(f"{PAGE}{finished.pk}/"))
    assert 'id="cancel-form"' not in page and "Nothing to cancel: this reassignment has finished (succeeded)" in page
    assert operator.get(f"{PAGE}{running.pk}/cancel/").status_code == 405


def test_a_cancel_redelivered_after_sending_never_sends_again(
    cluster: Cluster, zk: KazooClient, zk_chroot: str
) -> None:
    from workers.reassign import cancel

    target = Action.objects.create(
        username="x",
        cluster=NAME,
        kind="reassignment",
        status="running",
        parameters={"partitions": [{"topic": "moving", "partition": 0, "replicas": [3, 2], "origin": [1, 2]}]},
    )
    sent_once = Action.objects.create(
        username="x",
        cluster=NAME,
        kind="reassignment_cancel",
        status="running",
        parameters={"reassignment": target.pk},
        outcome={"sent": True},
    )
    before = zk_tree(zk)
    # no controller endpoint exists here: a second send would fail loudly instead of finishing
    assert cancel.run(sent_once.pk, connect=zk_chroot) == "partial"
    again = Action.objects.get(pk=sent_once.pk)
    assert again.attempts == 1 and "sent by an earlier attempt" in again.error
    assert zk_tree(zk) == before
    # nothing moving any more for a cancel of a finished move: refused, nothing written
    fresh = Action.objects.create(
        username="x", cluster=NAME, kind="reassignment_cancel", status="queued", parameters={"reassignment": target.pk}
    )
    target.parameters = {"partitions": [{"topic": "orders", "partition": 0, "replicas": [3, 4], "origin": [1, 2]}]}
    target.save()
    assert cancel.run(fresh.pk, connect=zk_chroot) == "rejected"
    assert zk_tree(zk) == before


def test_the_validate_button_is_a_dry_run(cluster: Cluster, zk: KazooClient, sent: list[Any]) -> None:
    before = zk_tree(zk)
    client = client_for("operator")
    ok = client.post(PAGE, {"reassignment": json.dumps(GOOD), "op": "validate"})
    assert ok.status_code == 200 and "Valid: 1 partition(s), 2 replica(s) to move." in text(ok)
    bad = client.post(PAGE, {"reassignment": '{"version": 1, "partitions": [', "op": "validate"})
    assert bad.status_code == 400 and "not valid JSON" in text(bad)
    assert zk_tree(zk) == before and sent == []
    assert not Action.objects.filter(kind="reassignment").exists()
