"""The live socket's security through the real ASGI stack: origin, login, per-message re-checks, limits.

Every refusal closes the socket with a clear code and leaves a ``REQUEST_REJECTED`` audit row.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User
from django.test import Client

from dashboard.audit.models import Action
from dashboard.clusters import layout
from dashboard.clusters.models import Cluster
from dashboard.live import consumers

pytestmark = pytest.mark.django_db(transaction=True)

CLUSTER = "ws-sec"
PATH = f"/ws/clusters/{CLUSTER}/live/"


@pytest.fixture
def cluster(settings: Any, redis_url: str) -> Iterator[Cluster]:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    settings.REDIS_URL = redis_url
    settings.ALLOWED_HOSTS = ["127.0.0.1", "testserver"]
    client = redis.Redis.from_url(redis_url)
    client.hset(layout.meta_key(CLUSTER), mapping={"gen": "g1", "seq": 1, "zk_state": "CONNECTED", "mode": "managed"})
    client.close()
    yield Cluster.objects.create(name=CLUSTER, zookeeper_connect="127.0.0.1:2181/kafka", mode="managed")


@pytest.fixture
def alice(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("alice", password="correct horse battery")


def _cookie(user: User) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _socket(user: User | None, origin: bytes | None = b"http://127.0.0.1") -> WebsocketCommunicator:
    from dashboard.asgi import application

    headers = [(b"host", b"127.0.0.1")] + ([] if origin is None else [(b"origin", origin)])
    if user is not None:
        headers.append((b"cookie", await sync_to_async(_cookie)(user)))
    return WebsocketCommunicator(application, PATH, headers=headers)


def _rejections() -> list[Action]:
    return list(Action.objects.filter(kind=Action.Kind.REQUEST_REJECTED, status=Action.Status.REJECTED))


async def test_a_foreign_origin_is_closed_and_audited(cluster: Cluster, alice: User) -> None:
    comm = await _socket(alice, origin=b"http://evil.example")
    connected, _ = await comm.connect()
    assert not connected
    (row,) = await sync_to_async(_rejections)()
    assert "foreign Origin 'http://evil.example'" in row.error and row.parameters["path"] == PATH
    assert row.cluster == CLUSTER
    await comm.disconnect()


async def test_a_socket_without_an_origin_header_is_closed_and_audited(cluster: Cluster, alice: User) -> None:
    """A browser always sends Origin on a WebSocket; a socket without one is not a page of ours."""
    comm = await _socket(alice, origin=None)
    connected, _ = await comm.connect()
    assert not connected
    (row,) = await sync_to_async(_rejections)()
    assert "foreign Origin None" in row.error and row.parameters["path"] == PATH
    await comm.disconnect()


async def test_an_anonymous_socket_is_closed_and_audited(cluster: Cluster) -> None:
    comm = await _socket(None)
    connected, code = await comm.connect()
    assert not connected and code == consumers.CLOSE_UNAUTHENTICATED
    (row,) = await sync_to_async(_rejections)()
    assert "log in" in row.error and row.username == "" and row.parameters["close_code"] == 4401


async def test_a_deactivated_user_has_the_next_message_refused_and_the_socket_closed(
    cluster: Cluster, alice: User
) -> None:
    comm = await _socket(alice)
    assert (await comm.connect())[0]
    await comm.send_json_to({"action": "subscribe", "scope": "cluster"})
    assert (await comm.receive_json_from(timeout=5))["kind"] == "snapshot"
    await sync_to_async(User.objects.filter(pk=alice.pk).update)(is_active=False)
    # No RECHECK_S wait: the very next inbound message is checked against the database.
    await comm.send_json_to({"action": "resync"})
    error = await comm.receive_json_from(timeout=5)
    assert error == {"kind": "error", "error": f"access to cluster {CLUSTER!r} was revoked"}
    closed = await comm.receive_output(timeout=5)
    assert closed["type"] == "websocket.close" and closed["code"] == consumers.CLOSE_FORBIDDEN
    (row,) = await sync_to_async(_rejections)()
    assert row.username == "alice" and "revoked" in row.error


async def test_a_removed_cluster_cuts_the_socket_at_the_next_message(cluster: Cluster, alice: User) -> None:
    comm = await _socket(alice)
    assert (await comm.connect())[0]
    await sync_to_async(Cluster.objects.filter(name=CLUSTER).delete)()
    await comm.send_json_to({"action": "subscribe", "scope": "cluster"})
    assert "revoked" in (await comm.receive_json_from(timeout=5))["error"]
    assert (await comm.receive_output(timeout=5))["code"] == consumers.CLOSE_FORBIDDEN


async def test_oversized_messages_close_the_socket(cluster: Cluster, alice: User) -> None:
    comm = await _socket(alice)
    assert (await comm.connect())[0]
    await comm.send_to(text_data='{"action": "subscribe", "scope": "' + "x" * consumers.MAX_MESSAGE_BYTES + '"}')
    assert "byte limit" in (await comm.receive_json_from(timeout=5))["error"]
    assert (await comm.receive_output(timeout=5))["code"] == consumers.CLOSE_TOO_BIG
    (row,) = await sync_to_async(_rejections)()
    assert row.parameters["close_code"] == consumers.CLOSE_TOO_BIG


async def test_a_message_flood_closes_the_socket(
    cluster: Cluster, alice: User, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(consumers, "MAX_MESSAGES", 3)
    comm = await _socket(alice)
    assert (await comm.connect())[0]
    for _ in range(3):
        await comm.send_json_to({"action": "noop"})
        assert "unknown action" in (await comm.receive_json_from(timeout=5))["error"]
    await comm.send_json_to({"action": "noop"})
    assert "more than 3 messages" in (await comm.receive_json_from(timeout=5))["error"]
    assert (await comm.receive_output(timeout=5))["code"] == consumers.CLOSE_TOO_MANY


async def test_non_json_text_gets_a_clear_error(cluster: Cluster, alice: User) -> None:
    comm = await _socket(alice)
    assert (await comm.connect())[0]
    await comm.send_to(text_data="not json")
    assert (await comm.receive_json_from(timeout=5))["error"] == "messages must be JSON objects"
    await comm.disconnect()
