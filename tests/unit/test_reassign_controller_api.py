"""The controller's AlterPartitionReassignments endpoint (cancel = replicas null): the wire format,
bad bodies refused with 400 and nothing enqueued, and the answer built from the event's callback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from controller_core.controller_api import ControllerApiServer
from controller_core.events import ApiPartitionReassignment, ControllerEvent
from controller_core.model import TopicPartition as TP
from controller_core.protocol.messages import (
    ALTER_PARTITION_REASSIGNMENTS_PATH,
    AlterPartitionReassignmentsRequest,
    ErrorCode,
    ReassignmentTarget,
    decode,
    encode,
)
from tests.unit.test_controller_api import post


class Events:
    def __init__(self) -> None:
        self.put_events: list[ControllerEvent] = []
        self.standby = False

    def put(self, event: ControllerEvent) -> None:
        self.put_events.append(event)
        assert isinstance(event, ApiPartitionReassignment)
        if self.standby:
            event.preempt()
            return
        results = {}
        for tp, target in event.reassignments.items():
            if target is None and tp.partition == 0:
                results[tp] = (int(ErrorCode.NONE), "")
            else:
                results[tp] = (int(ErrorCode.NO_REASSIGNMENT_IN_PROGRESS), f"no reassignment of {tp} in progress")
        event.callback(int(ErrorCode.NONE), results)


class Controller:
    def __init__(self) -> None:
        self.events = Events()

    def status(self) -> dict[str, Any]:
        return {"active": "1"}


@pytest.fixture
def api() -> Iterator[tuple[ControllerApiServer, Controller]]:
    controller = Controller()
    server = ControllerApiServer(controller, "127.0.0.1", 0)  # type: ignore[arg-type]
    server.start()
    yield server, controller
    server.stop()


def test_request_round_trips_with_null_for_cancel() -> None:
    request = AlterPartitionReassignmentsRequest((ReassignmentTarget("t", 0, None), ReassignmentTarget("t", 1, (2, 3))))
    wire = json.loads(encode(request))
    assert wire == {
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": None},
            {"topic": "t", "partition": 1, "replicas": [2, 3]},
        ]
    }
    body = b'{"partitions":[{"topic":"t","partition":0,"replicas":null},{"topic":"t","partition":1,"replicas":[2,3]}]}'
    assert decode(body, AlterPartitionReassignmentsRequest, "request") == request


def test_cancel_answers_per_partition(api: tuple[ControllerApiServer, Controller]) -> None:
    server, controller = api
    body = {
        "partitions": [
            {"topic": "t", "partition": 0, "replicas": None},
            {"topic": "t", "partition": 1, "replicas": None},
        ]
    }
    status, answer = post(server, ALTER_PARTITION_REASSIGNMENTS_PATH, json.dumps(body).encode())
    assert status == 200
    assert answer == {
        "error_code": 0,
        "partitions": [
            {"topic": "t", "partition": 0, "error_code": 0, "error_message": ""},
            {"topic": "t", "partition": 1, "error_code": 85, "error_message": "no reassignment of t-1 in progress"},
        ],
    }
    (event,) = controller.events.put_events
    assert isinstance(event, ApiPartitionReassignment)
    assert dict(event.reassignments) == {TP("t", 0): None, TP("t", 1): None}


def test_a_standby_answers_not_controller(api: tuple[ControllerApiServer, Controller]) -> None:
    server, controller = api
    controller.events.standby = True
    body = {"partitions": [{"topic": "t", "partition": 0, "replicas": None}]}
    status, answer = post(server, ALTER_PARTITION_REASSIGNMENTS_PATH, json.dumps(body).encode())
    assert status == 200 and answer["error_code"] == int(ErrorCode.NOT_CONTROLLER)


@pytest.mark.parametrize(
    "body",
    [
        {"partitions": []},
        {"partitions": [{"topic": "t", "partition": 0}]},
        {"partitions": [{"topic": "t", "partition": "0", "replicas": None}]},
        {"partitions": [{"topic": "t", "partition": 0, "replicas": ["1"]}]},
        {"partitions": "t-0"},
        {"partitions": [{"topic": "t", "partition": 0.0, "replicas": None}]},
        {"partitions": [{"topic": "t", "partition": 0, "replicas": [1.5]}]},
    ],
)
def test_bad_bodies_are_refused_and_enqueue_nothing(api: tuple[ControllerApiServer, Controller], body: Any) -> None:
    server, controller = api
    status, answer = post(server, ALTER_PARTITION_REASSIGNMENTS_PATH, json.dumps(body).encode())
    assert status == 400 and "error" in answer
    assert controller.events.put_events == []
