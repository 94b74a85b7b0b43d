"""Action request limits through the real middleware stack: 411/413/429, CSRF 403, each audited.

Real Redis for the rate-limit counters (and a closed port for the fallback); real ZooKeeper for the
cluster so "nothing written" is checked against the chroot itself.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.contrib.auth.models import Group, User
from django.test import Client
from kazoo.client import KazooClient

from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from scripts.devservices import free_port
from tests.support.snapshots import redis_keys, zk_tree

pytestmark = [pytest.mark.django_db, pytest.mark.isolated_redis]  # snapshots compare Redis before and after

NAME = "sec"
URL = f"/actions/clusters/{NAME}/preferred-election/"


@pytest.fixture
def cluster(zk: KazooClient, zk_chroot: str, settings: Any, redis_url: str) -> Cluster:
    settings.REDIS_URL = redis_url
    zk.ensure_path("/brokers/ids")
    return Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)


def _client(role: str | None, name: str = "vera", **kwargs: Any) -> tuple[Client, User]:
    user = User.objects.create_user(name, password="pw-correct-horse")
    if role:
        user.groups.add(Group.objects.get(name=role))
    client = Client(**kwargs)
    client.force_login(user)
    return client, user


def rejected(status: int) -> list[Action]:
    return [
        a
        for a in Action.objects.filter(kind=Action.Kind.REQUEST_REJECTED, status=Action.Status.REJECTED)
        if a.parameters.get("http_status") == status
    ]


def test_a_body_over_the_limit_is_413_audited_and_writes_nothing(
    cluster: Cluster, zk: KazooClient, redis_url: str, settings: Any
) -> None:
    settings.ACTION_MAX_BODY_BYTES = 1024
    client, _ = _client("operator")
    before = (zk_tree(zk), redis_keys(redis_url))
    response = client.post(URL, {"scope": "imbalanced", "reason": "x" * 4000})
    assert response.status_code == 413
    assert "over the 1024-byte limit" in response.content.decode()
    (row,) = rejected(413)
    assert row.username == "vera" and row.cluster == NAME and row.parameters["path"] == URL
    assert row.parameters["content_length"] > 1024 and "x" * 100 not in str(row.parameters)
    assert not Action.objects.filter(kind=Action.Kind.PREFERRED_ELECTION).exists()
    assert (zk_tree(zk), redis_keys(redis_url)) == before


def test_api_paths_get_json_and_a_missing_length_is_411(cluster: Cluster) -> None:
    client, _ = _client("operator")
    response = client.generic("POST", "/api/v1/topics/", b"{}", content_type="application/json", CONTENT_LENGTH="")
    assert response.status_code == 411
    assert response.json() == {"error": "action requests must send a Content-Length header", "status": 411}
    assert len(rejected(411)) == 1


def test_get_requests_are_not_limited(cluster: Cluster, settings: Any) -> None:
    settings.ACTION_RATE_LIMIT = "1/60"
    client, _ = _client("operator")
    assert [client.get(URL).status_code for _ in range(3)] == [200, 200, 200]
    assert not rejected(429)


def test_a_burst_over_the_rate_limit_is_429_with_retry_after(
    cluster: Cluster, zk: KazooClient, redis_url: str, settings: Any
) -> None:
    settings.ACTION_RATE_LIMIT = "3/60"
    client, user = _client("viewer")
    codes = [client.post(URL, {"scope": "imbalanced", "reason": "burst"}).status_code for _ in range(3)]
    assert codes == [403, 403, 403]  # the view answers: viewers may not act
    before = (zk_tree(zk), redis_keys(redis_url))
    response = client.post(URL, {"scope": "imbalanced", "reason": "burst"})
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "limit is 3 action requests per 60 s" in response.content.decode()
    (row,) = rejected(429)
    assert row.user_id == user.pk and row.parameters["counter"] == "redis"
    # Nothing but the limiter's own counter changed (redis_keys leaves kcp:ratelimit:* out).
    assert (zk_tree(zk), redis_keys(redis_url)) == before
    # Another user has their own allowance.
    other, _ = _client("viewer", name="wim")
    assert other.post(URL, {"scope": "imbalanced", "reason": "x"}).status_code == 403


def test_anonymous_action_requests_are_limited_by_address(cluster: Cluster, zk: KazooClient, settings: Any) -> None:
    """An anonymous POST is redirected to the login form, but only up to the limit: then 429, audited."""
    settings.ACTION_RATE_LIMIT = "3/60"
    anonymous = Client()
    codes = [anonymous.post(URL, {"scope": "imbalanced"}, REMOTE_ADDR="203.0.113.9").status_code for _ in range(5)]
    assert codes == [302, 302, 302, 429, 429]
    api = anonymous.post("/api/v1/clusters/sec/elections/", {}, REMOTE_ADDR="203.0.113.9")
    assert api.status_code == 429  # the same address's allowance, API or page
    (row,) = rejected(429)  # one row for the window, not one per refusal
    assert row.user_id is None and row.parameters["ip"] == "203.0.113.9"
    # Another address, and a logged-in user, have their own allowance.
    assert Client().post(URL, {"scope": "imbalanced"}, REMOTE_ADDR="203.0.113.10").status_code == 302
    client, _ = _client("viewer")
    assert client.post(URL, {"scope": "imbalanced", "reason": "x"}, REMOTE_ADDR="203.0.113.9").status_code == 403


def test_a_flood_from_one_address_adds_a_bounded_number_of_audit_rows(cluster: Cluster, settings: Any) -> None:
    """Anonymous, oversized and length-less POSTs all count; the audit grows by at most count + 1 rows."""
    settings.ACTION_RATE_LIMIT = "3/60"
    settings.ACTION_MAX_BODY_BYTES = 400
    flood = Client()
    codes = []
    for i in range(60):
        if i % 3 == 0:
            codes.append(flood.post(URL, {"reason": "x" * 800}, REMOTE_ADDR="198.51.100.7").status_code)
        elif i % 3 == 1:
            codes.append(flood.generic("POST", URL, b"", CONTENT_LENGTH="", REMOTE_ADDR="198.51.100.7").status_code)
        else:
            codes.append(flood.post(URL, {"scope": "imbalanced"}, REMOTE_ADDR="198.51.100.7").status_code)
    assert codes[:3] == [413, 411, 302] and set(codes[3:]) == {429}
    rows = Action.objects.filter(kind=Action.Kind.REQUEST_REJECTED)
    assert rows.count() == 4  # 413, 411, the redirect, and one 429
    assert len(rejected(429)) == 1


def test_without_redis_the_limit_still_holds_per_process(cluster: Cluster, settings: Any) -> None:
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    settings.ACTION_RATE_LIMIT = "2/60"
    client, _ = _client("viewer")
    codes = [client.post(URL, {"scope": "imbalanced", "reason": "r"}).status_code for _ in range(3)]
    assert codes == [403, 403, 429]
    (row,) = rejected(429)
    assert row.parameters["counter"] == "local"


def test_a_missing_csrf_token_is_a_clear_audited_403(cluster: Cluster, zk: KazooClient, redis_url: str) -> None:
    client, _ = _client("operator", enforce_csrf_checks=True)
    before = (zk_tree(zk), redis_keys(redis_url))
    response = client.post(URL, {"scope": "imbalanced", "reason": "no token"})
    assert response.status_code == 403
    assert "CSRF check failed" in response.content.decode()
    (row,) = rejected(403)
    assert row.username == "vera" and row.parameters["path"] == URL and "CSRF" in row.error
    assert not Action.objects.filter(kind=Action.Kind.PREFERRED_ELECTION).exists()
    assert (zk_tree(zk), redis_keys(redis_url)) == before


def test_redis_counters_expire_with_their_window(cluster: Cluster, redis_url: str, settings: Any) -> None:
    settings.ACTION_RATE_LIMIT = "5/30"
    client, _ = _client("viewer")
    client.post(URL, {"scope": "imbalanced", "reason": "r"})
    conn = redis.Redis.from_url(redis_url)
    (key,) = conn.keys("kcp:ratelimit:*")
    assert 0 < conn.ttl(key) <= 31
    conn.close()
