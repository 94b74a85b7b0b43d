"""The live WebSocket through the real ASGI stack (origin check, session auth), real Redis snapshot.

The channel layer is in-memory here (Redis is not the point of these tests; the mirror tests use
the real layer path); the snapshot is read from a real Redis written with the mirror's own layout.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from dashboard.clusters import layout
from dashboard.clusters.models import Cluster
from dashboard.live import groups, protocol

pytestmark = pytest.mark.django_db(transaction=True)

CLUSTER = "live-test"


@pytest.fixture
def live_settings(settings: Any, redis_url: str) -> Iterator[None]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.REDIS_URL = redis_url
    settings.ALLOWED_HOSTS = ["127.0.0.1", "testserver"]
    client = redis.Redis.from_url(redis_url)
    client.hset(layout.meta_key(CLUSTER), mapping={"gen": "g1", "seq": 41, "zk_state": "CONNECTED", "mode": "managed"})
    client.hset(
        layout.counts_key(CLUSTER), mapping={"partitions": 10, "offline": 1, "p:OnlinePartition": 9, "b:1:leaders": 4}
    )
    client.hset(
        layout.topics_key(CLUSTER), "orders", layout.topic_summary(3, 2, {"partitions": 3, "urp": 1}, None, False, 1)
    )
    client.close()
    yield


@pytest.fixture
def cluster(live_settings: None) -> Cluster:
    return Cluster.objects.create(name=CLUSTER, zookeeper_connect="127.0.0.1:2181/kafka", mode="managed")


def session_cookie(user: User) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


def communicator(path: str, cookie: bytes | None, origin: bytes = b"http://127.0.0.1") -> WebsocketCommunicator:
    from dashboard.asgi import application

    headers = [(b"origin", origin), (b"host", b"127.0.0.1")]
    if cookie is not None:
        headers.append((b"cookie", cookie))
    return WebsocketCommunicator(application, path, headers=headers)


@pytest.fixture
def alice(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("alice", password="correct horse battery")


async def test_it_refuses_anonymous_sockets(cluster: Cluster) -> None:
    comm = communicator(f"/ws/clusters/{CLUSTER}/live/", None)
    connected, code = await comm.connect()
    assert not connected and code == 4401
    await comm.disconnect()


async def test_it_refuses_foreign_origins(cluster: Cluster, alice: User) -> None:
    cookie = await _cookie(alice)
    comm = communicator(f"/ws/clusters/{CLUSTER}/live/", cookie, origin=b"http://evil.example")
    connected, _code = await comm.connect()
    assert not connected
    await comm.disconnect()


async def test_it_refuses_unknown_clusters(cluster: Cluster, alice: User) -> None:
    comm = communicator("/ws/clusters/nope/live/", await _cookie(alice))
    connected, code = await comm.connect()
    assert not connected and code == 4403
    await comm.disconnect()


async def test_snapshot_then_deltas_then_resync(cluster: Cluster, alice: User) -> None:
    comm = communicator(f"/ws/clusters/{CLUSTER}/live/", await _cookie(alice))
    connected, _ = await comm.connect()
    assert connected
    await comm.send_json_to({"action": "subscribe", "scope": "cluster"})
    snapshot = await comm.receive_json_from(timeout=5)
    assert (snapshot["kind"], snapshot["gen"], snapshot["seq"]) == ("snapshot", "g1", 41)
    assert snapshot["data"]["counts"]["offline"] == 1 and snapshot["status"]["zk_state"] == "CONNECTED"

    layer = get_channel_layer()
    delta = {
        "type": protocol.DELTA,
        "scope": "cluster",
        "gen": "g1",
        "seq": 42,
        "prev": 41,
        "data": {"counts": {"offline": 0}},
    }
    await layer.group_send(groups.cluster(CLUSTER), delta)
    got = await comm.receive_json_from(timeout=5)
    assert (got["kind"], got["seq"], got["prev"], got["data"]["counts"]["offline"]) == ("delta", 42, 41, 0)

    # A lost message shows as prev > held seq in the browser, which then asks for a snapshot.
    await comm.send_json_to({"action": "resync"})
    again = await comm.receive_json_from(timeout=5)
    assert again["kind"] == "snapshot" and again["seq"] == 41

    await layer.group_send(groups.status(CLUSTER), {"type": protocol.RESYNC, "gen": "g2"})
    assert (await comm.receive_json_from(timeout=5)) == {"kind": "resync", "gen": "g2"}
    await comm.disconnect()


async def test_topic_scope_gets_only_its_topic_and_registers_interest(
    cluster: Cluster, alice: User, redis_url: str
) -> None:
    comm = communicator(f"/ws/clusters/{CLUSTER}/live/", await _cookie(alice))
    assert (await comm.connect())[0]
    await comm.send_json_to({"action": "subscribe", "scope": "topic:orders"})
    snapshot = await comm.receive_json_from(timeout=5)
    assert snapshot["scope"] == "topic:orders" and snapshot["data"]["counts"] == {"partitions": 3, "urp": 1}
    client = redis.Redis.from_url(redis_url)
    raw: Any = client.zrange(layout.interest_key(CLUSTER), 0, -1)
    entries = [e.decode() for e in raw]
    assert len(entries) == 1 and entries[0].startswith("topic:orders|")
    layer = get_channel_layer()
    other = {"type": protocol.DELTA, "scope": "cluster", "gen": "g1", "seq": 42, "prev": 41, "data": {}}
    await layer.group_send(groups.cluster(CLUSTER), other)  # not subscribed: nothing arrives
    mine = {"type": protocol.DELTA, "scope": "topic:orders", "gen": "g1", "seq": 43, "prev": 30, "data": {"rows": []}}
    await layer.group_send(groups.topic(CLUSTER, "orders"), mine)
    got = await comm.receive_json_from(timeout=5)
    assert (got["scope"], got["seq"]) == ("topic:orders", 43)
    await comm.disconnect()
    assert client.zcard(layout.interest_key(CLUSTER)) == 0
    client.close()


async def test_the_first_message_after_a_silent_feed_brings_fresh_snapshots(
    cluster: Cluster, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    """F19 (b): a channel nobody read for a while may have dropped deltas; resend before forwarding."""
    import asyncio

    from dashboard.live import consumers

    monkeypatch.setattr(consumers, "FEED_STALL_S", 0.3)
    comm = communicator(f"/ws/clusters/{CLUSTER}/live/", await _cookie(alice))
    assert (await comm.connect())[0]
    await comm.send_json_to({"action": "subscribe", "scope": "cluster"})
    assert (await comm.receive_json_from(timeout=5))["kind"] == "snapshot"
    layer = get_channel_layer()
    status = {"type": protocol.STATUS, "status": {"gen": "g1"}}
    await layer.group_send(groups.status(CLUSTER), status)  # right after the snapshot: no gap
    assert (await comm.receive_json_from(timeout=5))["kind"] == "status"
    assert await comm.receive_nothing(timeout=0.1)

    await asyncio.sleep(0.5)  # the feed is silent for longer than FEED_STALL_S
    await layer.group_send(groups.status(CLUSTER), status)
    await layer.group_send(groups.status(CLUSTER), status)
    kinds = [(await comm.receive_json_from(timeout=5))["kind"] for _ in range(3)]
    assert kinds == ["snapshot", "status", "status"]  # one snapshot, before the stale message
    assert await comm.receive_nothing(timeout=0.1)
    await comm.disconnect()


async def test_bad_requests_get_clear_errors(cluster: Cluster, alice: User) -> None:
    comm = communicator(f"/ws/clusters/{CLUSTER}/live/", await _cookie(alice))
    assert (await comm.connect())[0]
    await comm.send_json_to({"action": "subscribe", "scope": "partition:x"})
    error = await comm.receive_json_from(timeout=5)
    assert error["kind"] == "error" and "expected 'cluster'" in error["error"]
    await comm.send_json_to({"action": "dance"})
    assert "unknown action" in (await comm.receive_json_from(timeout=5))["error"]
    await comm.disconnect()


async def test_a_deactivated_user_is_cut_off_at_the_next_recheck(
    cluster: Cluster, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asgiref.sync import sync_to_async

    from dashboard.live import permissions

    comm = communicator(f"/ws/clusters/{CLUSTER}/live/", await _cookie(alice))
    assert (await comm.connect())[0]
    await comm.send_json_to({"action": "subscribe", "scope": "cluster"})
    await comm.receive_json_from(timeout=5)
    await sync_to_async(User.objects.filter(pk=alice.pk).update)(is_active=False)
    monkeypatch.setattr(permissions, "RECHECK_S", 0.0)
    layer = get_channel_layer()
    await layer.group_send(groups.status(CLUSTER), {"type": protocol.STATUS, "status": {}})
    output = await comm.receive_output(timeout=5)
    assert output["type"] == "websocket.close" and output["code"] == 4403


async def _cookie(user: User) -> bytes:
    from asgiref.sync import sync_to_async

    return await sync_to_async(session_cookie)(user)
