"""The controller's broker-facing HTTP API: bad input is a 400 that enqueues nothing."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest

from controller_core.controller_api import ControllerApiServer
from controller_core.events import AlterIsrReceived, ControlledShutdown, ControllerEvent
from controller_core.model import LeaderAndIsr, TopicPartition
from controller_core.protocol.messages import ErrorCode


class StubEvents:
    """Answers events the way a standby controller (or a fixed outcome) would."""

    def __init__(self) -> None:
        self.put_events: list[ControllerEvent] = []

    def put(self, event: ControllerEvent) -> None:
        self.put_events.append(event)
        if isinstance(event, AlterIsrReceived):
            event.callback(
                0,
                {
                    TopicPartition("t", 0): LeaderAndIsr(1, 3, (1, 2), 7),
                    TopicPartition("t", 1): ErrorCode.FENCED_LEADER_EPOCH,
                },
            )
        elif isinstance(event, ControlledShutdown):
            event.preempt()  # as if the queue were cleared: NOT_CONTROLLER


class StubController:
    def __init__(self) -> None:
        self.events = StubEvents()

    def status(self) -> dict[str, Any]:
        return {"active": "0"}


@pytest.fixture
def api() -> Iterator[tuple[ControllerApiServer, StubController]]:
    controller = StubController()
    server = ControllerApiServer(controller, "127.0.0.1", 0)  # type: ignore[arg-type]
    server.start()
    yield server, controller
    server.stop()


def post(server: ControllerApiServer, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    host, port = server.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    return response.status, json.loads(response.read())


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        json.dumps({"broker_id": 1}).encode(),
        json.dumps({"broker_id": 1, "broker_epoch": 5, "partitions": [{"topic": "t", "partition": 0}]}).encode(),
        json.dumps(
            {
                "broker_id": 1,
                "broker_epoch": 5,
                "partitions": [
                    {"topic": "t", "partition": 0, "leader_epoch": 1, "new_isr": [], "current_isr_version": 0}
                ],
            }
        ).encode(),
    ],
)
def test_bad_alter_isr_bodies_are_400_and_enqueue_nothing(
    api: tuple[ControllerApiServer, StubController], body: bytes
) -> None:
    server, controller = api
    status, answer = post(server, "/v1/alter_isr", body)
    assert status == 400
    assert answer["error"]
    assert controller.events.put_events == []


def test_alter_isr_answers_per_partition(api: tuple[ControllerApiServer, StubController]) -> None:
    server, _ = api
    body = {
        "broker_id": 1,
        "broker_epoch": 5,
        "partitions": [
            {"topic": "t", "partition": 0, "leader_epoch": 3, "new_isr": [1, 2], "current_isr_version": 6},
            {"topic": "t", "partition": 1, "leader_epoch": 1, "new_isr": [1], "current_isr_version": 2},
        ],
    }
    status, answer = post(server, "/v1/alter_isr", json.dumps(body).encode())
    assert status == 200
    assert answer["error_code"] == 0
    by_partition = {p["partition"]: p for p in answer["partitions"]}
    assert by_partition[0] == {
        "topic": "t",
        "partition": 0,
        "error_code": 0,
        "leader": 1,
        "leader_epoch": 3,
        "isr": [1, 2],
        "zk_version": 7,
    }
    assert by_partition[1]["error_code"] == int(ErrorCode.FENCED_LEADER_EPOCH)


def test_controlled_shutdown_on_a_standby_is_not_controller(api: tuple[ControllerApiServer, StubController]) -> None:
    server, _ = api
    status, answer = post(server, "/v1/controlled_shutdown", json.dumps({"broker_id": 2, "broker_epoch": 9}).encode())
    assert status == 200
    assert answer == {"error_code": int(ErrorCode.NOT_CONTROLLER), "remaining_partitions": []}
