"""Registering clusters (issue #32): bad input refused with a clear message and nothing registered, on
the admin form and the JSON API, against real ZooKeeper; who hosts what on the hosting page, /healthz
and the metrics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from kazoo.client import KazooClient

from dashboard.accounts import roles
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.integration.mirror_helpers import small_cluster

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin(settings: Any, redis_url: str) -> Client:
    settings.REDIS_URL = redis_url
    settings.ACTION_RATE_LIMIT = "0"
    settings.CLUSTER_PROBE_TIMEOUT_S = 2.0
    # /healthz runs every check and its Celery ping waits out the whole budget when no worker runs
    # (none here); these tests read its hosting part, which does not depend on the checks.
    settings.HEALTH_CHECK_TIMEOUT_S = 0.3
    user = User.objects.create_user("ada", password="pw-correct-horse")
    user.groups.add(Group.objects.get_or_create(name=roles.ADMIN)[0])
    client = Client()
    client.force_login(user)
    return client


def _api(client: Client, path: str, body: dict[str, Any]) -> Any:
    return client.post(path, json.dumps(body), content_type="application/json")


def test_bad_registrations_are_refused_with_a_clear_message_on_the_form_and_the_api(
    admin: Client, zk: KazooClient, zk_chroot: str
) -> None:
    small_cluster(zk)
    zk.ensure_path("/not-kafka/something")
    Cluster.objects.create(name="taken", zookeeper_connect=zk_chroot, mode="observed")
    cases = [
        ({"name": "a", "zookeeper_connect": "zk1:21x/k", "mode": "observed"}, "is not a number"),
        ({"name": "b", "zookeeper_connect": "127.0.0.1:1/kafka", "mode": "observed"}, "cannot be reached"),
        ({"name": "c", "zookeeper_connect": zk_chroot + "/not-kafka", "mode": "observed"}, "has no /brokers"),
        ({"name": "d", "zookeeper_connect": zk_chroot + "/missing", "mode": "observed"}, "does not exist"),
        ({"name": "e", "zookeeper_connect": zk_chroot + "/not-kafka", "mode": "managed"}, "has no /brokers"),
        ({"name": "taken", "zookeeper_connect": zk_chroot, "mode": "observed"}, "registered already"),
    ]
    for body, message in cases:
        page = admin.post("/actions/admin/clusters/new/", body)
        assert page.status_code == 400, body
        assert message in page.content.decode(), (body, page.content.decode()[:2000])
        answer = _api(admin, "/api/v1/clusters/", body)
        assert answer.status_code == 400, body
        assert message in json.dumps(answer.json()["errors"]), answer.json()
    assert list(Cluster.objects.values_list("name", flat=True)) == ["taken"]
    assert Action.objects.filter(kind="cluster_change", status="rejected").count() == 2 * len(cases)


def test_the_api_registers_edits_and_removes_a_cluster(admin: Client, zk: KazooClient, zk_chroot: str) -> None:
    small_cluster(zk)
    made = _api(admin, "/api/v1/clusters/", {"name": "k28", "zookeeper_connect": zk_chroot, "mode": "observed"})
    assert made.status_code == 201, made.content
    assert made.json()["zookeeper"] == "3 broker(s), 1 topic(s), controller elected"
    fresh = zk_chroot + "/fresh"  # a managed cluster may start from an empty chroot
    edited = _api(admin, "/api/v1/clusters/k28/", {"zookeeper_connect": fresh, "mode": "managed"})
    assert edited.status_code == 200, edited.content
    assert Cluster.objects.get(name="k28").zookeeper_connect == fresh
    listed = admin.get("/api/v1/clusters/").json()["clusters"]
    assert [c["name"] for c in listed] == ["k28"] and listed[0]["hosting"]["controller"]["candidates"] == []
    assert _api(admin, "/api/v1/clusters/k28/remove/", {"confirm": "nope"}).status_code == 400
    removed = _api(admin, "/api/v1/clusters/k28/remove/", {"confirm": "k28"})
    assert removed.json() == {"removed": "k28", "controller_candidates_resign": True}
    assert not Cluster.objects.exists()
    changes = Action.objects.filter(kind="cluster_change", status="succeeded").order_by("id")
    ops = list(changes.values_list("parameters", flat=True))
    assert [p["operation"] for p in ops] == ["registered", "changed", "removed"]


def test_a_cluster_nobody_hosts_is_flagged_on_its_pages_the_hosting_page_healthz_and_metrics(
    admin: Client, zk: KazooClient, zk_chroot: str
) -> None:
    small_cluster(zk)
    cluster = Cluster.objects.create(name="alone", zookeeper_connect=zk_chroot, mode="managed")
    fresh = admin.get("/clusters/alone/").content.decode()
    assert "hosting-warning" not in fresh  # just registered: within a lease period
    Cluster.objects.filter(pk=cluster.pk).update(created=cluster.created.replace(year=2020))
    page = admin.get("/clusters/alone/").content.decode()
    assert "no mirror for" in page and "no active controller for" in page
    assert "not mirrored yet" in page and "The mirror of this cluster is" not in page
    hosting = admin.get("/actions/admin/hosting/?format=json").json()
    (row,) = hosting["clusters"]
    assert row["mirror"]["holder"] is None and row["controller"]["candidates"] == []
    assert len(row["warnings"]) == 2
    detail = admin.get("/healthz?detail=1").json()["hosting"]
    assert [(c["cluster"], c["mirror"]["holder"], len(c["warnings"])) for c in detail["clusters"]] == [
        ("alone", None, 2)
    ]
    assert "workers" in detail  # admins see which worker runs where (hosts, pids)
    viewer_user = User.objects.create_user("vic", password="pw-correct-horse")
    viewer_user.groups.add(Group.objects.get_or_create(name=roles.VIEWER)[0])
    viewer = Client()
    viewer.force_login(viewer_user)
    seen = viewer.get("/healthz?detail=1").json()["hosting"]
    assert [c["cluster"] for c in seen["clusters"]] == ["alone"] and len(seen["warnings"]) == 2
    assert "workers" not in seen  # the admins' hosting page's, not a viewer's
    assert "hosting" in Client().get("/healthz?detail=1").json()
    assert "error" in Client().get("/healthz?detail=1").json()["hosting"]
    metrics = admin.get("/clusters/alone/metrics").content.decode()
    assert 'kcp_mirror_missing{cluster="alone"} 1.0' in metrics
    assert 'kcp_controller_missing{cluster="alone"} 1.0' in metrics
    assert 'kcp_controller_candidates{cluster="alone"} 0.0' in metrics
