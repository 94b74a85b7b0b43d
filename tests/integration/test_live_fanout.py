"""Fan-out through the real Redis channel layer: what each pushed event costs per socket.

Several sockets of one process watch the same scope, as 100 viewers of one web process do. Each
event must reach every one of them with the same bytes, be JSON-encoded once (channels_redis hands
one dict to all consumers of the process), and skip Channels' per-message ``close_old_connections``
hop into the shared sync thread (``dashboard/live/fanout.py``); the browser's own messages still
take that hop.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import channels.consumer
import pytest
import redis
from channels.layers import channel_layers, get_channel_layer
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from dashboard.clusters import layout
from dashboard.clusters.models import Cluster
from dashboard.live import fanout, groups, protocol, verdicts

pytestmark = pytest.mark.django_db(transaction=True)

CLUSTER = "fanout-test"
SOCKETS = 3


@pytest.fixture
def redis_layer(settings: Any, redis_url: str) -> Iterator[None]:
    settings.CHANNEL_LAYERS = {
        "default": {"BACKEND": "channels_redis.core.RedisChannelLayer", "CONFIG": {"hosts": [redis_url]}}
    }
    settings.REDIS_URL = redis_url
    settings.ALLOWED_HOSTS = ["127.0.0.1", "testserver"]
    client = redis.Redis.from_url(redis_url)
    client.hset(layout.meta_key(CLUSTER), mapping={"gen": "g1", "seq": 7, "zk_state": "CONNECTED", "mode": "managed"})
    client.hset(layout.counts_key(CLUSTER), mapping={"partitions": 10, "offline": 0})
    client.close()
    channel_layers.backends.clear()  # a layer built for these settings, not a cached in-memory one
    yield
    channel_layers.backends.clear()


@pytest.fixture
def alice(redis_layer: None, django_user_model: type[User]) -> User:
    Cluster.objects.create(name=CLUSTER, zookeeper_connect="127.0.0.1:2181/kafka", mode="managed")
    return django_user_model.objects.create_user("alice", password="correct horse battery")


def _cookie(user: User) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _subscribed(cookie: bytes) -> WebsocketCommunicator:
    from dashboard.asgi import application

    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", cookie)]
    comm = WebsocketCommunicator(application, f"/ws/clusters/{CLUSTER}/live/", headers=headers)
    assert (await comm.connect())[0]
    await comm.send_json_to({"action": "subscribe", "scope": "cluster"})
    assert (await comm.receive_json_from(timeout=5))["kind"] == "snapshot"
    return comm


async def test_one_event_reaches_every_socket_encoded_once_without_the_db_hop(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    from asgiref.sync import sync_to_async

    cookie = await sync_to_async(_cookie)(alice)
    comms = [await _subscribed(cookie) for _ in range(SOCKETS)]
    hops: list[int] = []
    encodes: list[int] = []
    real_hop, real_encode = channels.consumer.aclose_old_connections, fanout._encode

    async def counting_hop() -> None:
        hops.append(1)
        await real_hop()

    def counting_encode(payload: dict[str, Any]) -> str:
        encodes.append(1)
        return real_encode(payload)

    monkeypatch.setattr(channels.consumer, "aclose_old_connections", counting_hop)
    monkeypatch.setattr(fanout, "_encode", counting_encode)
    delta = {
        "type": protocol.DELTA,
        "scope": "cluster",
        "gen": "g1",
        "seq": 8,
        "prev": 7,
        "data": {"counts": {"offline": 3}},
    }
    await get_channel_layer().group_send(groups.cluster(CLUSTER), delta)
    texts = [await comm.receive_from(timeout=5) for comm in comms]

    assert len(set(texts)) == 1, "every socket gets the same bytes"
    sent = json.loads(texts[0])
    assert sent == {
        "kind": "delta",
        "scope": "cluster",
        "gen": "g1",
        "seq": 8,
        "prev": 7,
        "data": {"counts": {"offline": 3}},
    }
    assert len(encodes) == 1, f"encoded {len(encodes)} times for {SOCKETS} sockets"
    assert hops == [], "group events must not hop into the shared sync thread"

    await get_channel_layer().group_send(groups.status(CLUSTER), {"type": protocol.STATUS, "status": {"gen": "g1"}})
    statuses = [await comm.receive_json_from(timeout=5) for comm in comms]
    assert all(s == {"kind": "status", "status": {"gen": "g1"}} for s in statuses)
    assert len(encodes) == 2 and hops == []

    # The browser's own messages still go through Channels' dispatch (and its connection clean-up).
    await comms[0].send_json_to({"action": "resync"})
    assert (await comms[0].receive_json_from(timeout=5))["kind"] == "snapshot"
    assert hops == [1]
    for comm in comms:
        await comm.disconnect()


def test_text_is_kept_on_the_event_and_never_shared_between_kinds() -> None:
    event: dict[str, Any] = {"type": protocol.DELTA, "scope": "topic:a", "gen": "g", "seq": 2, "prev": 1, "data": {}}
    first = fanout.delta_text(event)
    assert fanout.delta_text(event) is first and event[fanout.TEXT_KEY] is first
    assert fanout.is_group_event(event) and fanout.handler_name(event) == "live_delta"
    assert not fanout.is_group_event({"type": "websocket.receive", "text": "{}"})
    status: dict[str, Any] = {"type": protocol.STATUS, "status": {"zk_state": "CONNECTED"}}
    assert fanout.status_text(status) == '{"kind":"status","status":{"zk_state":"CONNECTED"}}'


async def test_sockets_of_one_user_share_a_push_recheck_and_all_see_a_revocation(
    alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from asgiref.sync import sync_to_async

    from dashboard.live import permissions

    cookie = await sync_to_async(_cookie)(alice)
    comms = [await _subscribed(cookie) for _ in range(SOCKETS)]
    checks: list[int] = []
    real_check = permissions.still_allowed

    def counting_check(user: Any, cluster: str) -> bool:
        checks.append(1)
        return real_check(user, cluster)

    monkeypatch.setattr(permissions, "still_allowed", counting_check)
    monkeypatch.setattr(permissions, "RECHECK_S", 0.5)
    # A check stays shared for 30 s here, not share_window()'s 0.1 s: under a loaded machine the three
    # sockets' pushes can be handled more than 0.1 s apart, and sharing (not timing) is the point.
    monkeypatch.setattr(verdicts, "share_window", lambda: 30.0)
    await asyncio.sleep(0.6)  # every socket is due
    status = {"type": protocol.STATUS, "status": {"gen": "g1"}}
    await get_channel_layer().group_send(groups.status(CLUSTER), status)
    kinds = [(await comm.receive_json_from(timeout=5))["kind"] for comm in comms]
    assert kinds == ["status"] * SOCKETS
    assert len(checks) == 1, f"{len(checks)} database checks for {SOCKETS} sockets of one user"

    await sync_to_async(User.objects.filter(pk=alice.pk).update)(is_active=False)
    await asyncio.sleep(0.6)  # due again
    for key, (started, task) in list(verdicts._checks.items()):  # the shared verdict has aged out
        verdicts._checks[key] = (started - 60.0, task)
    await get_channel_layer().group_send(groups.status(CLUSTER), status)
    for comm in comms:
        output = await comm.receive_output(timeout=5)
        assert output["type"] == "websocket.close" and output["code"] == 4403
    assert len(checks) == 2
