"""A reassignment's progress pushed over the WebSocket: the real ASGI stack (origin check, session
auth) and the real Redis channel layer, published from a plain thread as the Celery worker does
(``reassign_service.push``), so the message crosses Redis exactly as it does between processes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.contrib.auth.models import User

from dashboard.actions import reassign_push, reassign_service
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.integration.test_live_consumers import session_cookie

pytestmark = pytest.mark.django_db(transaction=True)

CLUSTER = "push-test"


@pytest.fixture
def redis_layer(settings: Any, redis_url: str) -> Iterator[None]:
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [redis_url], "prefix": f"asgi-{uuid.uuid4().hex[:8]}"},
        }
    }
    settings.ALLOWED_HOSTS = ["127.0.0.1", "testserver"]
    from channels.layers import channel_layers

    channel_layers.backends.clear()  # pick up the settings above
    yield
    channel_layers.backends.clear()


@pytest.fixture
def running(redis_layer: None) -> Action:
    Cluster.objects.create(name=CLUSTER, zookeeper_connect="127.0.0.1:1/none", mode="managed")
    progress = {"time": 1.0, "done": False, "counts": {"copying": 1}, "total": 1, "partitions": [], "samples": {}}
    return Action.objects.create(
        username="olive",
        cluster=CLUSTER,
        kind=Action.Kind.REASSIGNMENT,
        parameters={"partitions": [{"topic": "orders", "partition": 0, "replicas": [2, 3], "origin": [1, 2]}]},
        reason="r",
        status=Action.Status.RUNNING,
        outcome={"written": True, "progress": progress},
    )


@pytest.fixture
def viewer(django_user_model: type[User]) -> User:
    return django_user_model.objects.create_user("vera", password="correct horse battery")


async def _socket(path: str, user: User | None) -> WebsocketCommunicator:
    from dashboard.asgi import application

    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if user is not None:
        headers.append((b"cookie", await sync_to_async(session_cookie)(user)))
    return WebsocketCommunicator(application, path, headers=headers)


def _path(action_id: int, cluster: str = CLUSTER) -> str:
    return f"/ws/clusters/{cluster}/reassignments/{action_id}/progress/"


async def _rejections() -> list[str]:
    rows = Action.objects.filter(kind=Action.Kind.REQUEST_REJECTED).order_by("id")
    return await sync_to_async(lambda: [r.error for r in rows])()


async def test_the_page_gets_the_stored_document_then_every_push(running: Action, viewer: User) -> None:
    comm = await _socket(_path(running.pk), viewer)
    connected, _ = await comm.connect()
    assert connected
    first = await comm.receive_json_from(timeout=5)
    assert first["kind"] == "progress" and first["document"]["status"] == "running"
    assert first["document"]["progress"]["counts"] == {"copying": 1} and "samples" not in first["document"]["progress"]

    measured = {
        "time": 2.0,
        "done": False,
        "counts": {"copying": 1},
        "total": 1,
        "partitions": [{"topic": "orders", "partition": 0, "state": "copying"}],
        "copy_rate_by_broker": {"3": 99_000},
        "samples": {"orders/0/3": {"lag": 5}},
    }
    assert await sync_to_async(reassign_service.push, thread_sensitive=False)(running, measured)
    pushed = await comm.receive_json_from(timeout=5)
    assert pushed["kind"] == "progress"
    assert pushed["document"]["progress"]["copy_rate_by_broker"] == {"3": 99_000}
    assert "samples" not in pushed["document"]["progress"]

    # Too big to push: only a notice, and the page fetches the document over HTTP.
    huge = {**measured, "partitions": [{"topic": "x" * 200, "partition": p} for p in range(2000)]}
    assert await sync_to_async(reassign_service.push, thread_sensitive=False)(running, huge)
    assert await comm.receive_json_from(timeout=5) == {"kind": "changed"}
    await comm.disconnect()


async def test_another_reassignment_s_pushes_do_not_arrive(running: Action, viewer: User) -> None:
    comm = await _socket(_path(running.pk), viewer)
    assert (await comm.connect())[0]
    await comm.receive_json_from(timeout=5)
    other = {"id": running.pk + 1000, "cluster": CLUSTER, "status": "running"}
    assert await sync_to_async(reassign_push.publish, thread_sensitive=False)(other)
    assert await comm.receive_nothing(timeout=0.5)
    await comm.disconnect()


async def test_refused_sockets_are_closed_and_audited(running: Action, viewer: User) -> None:
    cases = [
        (_path(running.pk), None, 4401, "anonymous socket"),
        (_path(running.pk, "nope"), viewer, 4403, "no viewer access to cluster 'nope'"),
        (_path(running.pk + 1000), viewer, 4403, f"no reassignment #{running.pk + 1000}"),
    ]
    for path, user, code, reason in cases:
        comm = await _socket(path, user)
        connected, got = await comm.connect()
        assert (connected, got) == (False, code), path
        await comm.disconnect()
        assert any(reason in e for e in await _rejections()), reason


async def test_the_socket_only_pushes(running: Action, viewer: User) -> None:
    comm = await _socket(_path(running.pk), viewer)
    assert (await comm.connect())[0]
    await comm.receive_json_from(timeout=5)
    await comm.send_json_to({"action": "subscribe"})
    out = await comm.receive_output(timeout=5)
    assert out == {"type": "websocket.close", "code": 4400}
    await asyncio.sleep(0)
    assert any("only pushes" in e for e in await _rejections())
