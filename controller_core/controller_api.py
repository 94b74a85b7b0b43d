"""The controller's HTTP endpoint: AlterIsr and ControlledShutdown for brokers (docs/protocol.md), and
AlterPartitionReassignments for operators (start, retarget or cancel reassignments, KIP-455).

Why a tiny stdlib server: brokers must reach whichever candidate is active, the active one
advertises this endpoint in ``/controller``, and requests must become events on the controller's
single event thread. Each request thread only enqueues an event and waits for its callback (with a
timeout), so the controller's state is never touched here. A standby candidate answers
NOT_CONTROLLER, which makes brokers re-read ``/controller`` and retry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, TypeVar

from controller_core.events import AlterIsrReceived, ApiPartitionReassignment, ControlledShutdown, ControllerEvent
from controller_core.model import LeaderAndIsr, TopicPartition
from controller_core.protocol.messages import (
    ALTER_ISR_PATH,
    ALTER_PARTITION_REASSIGNMENTS_PATH,
    CONTROLLED_SHUTDOWN_PATH,
    AlterIsrPartitionResult,
    AlterIsrRequest,
    AlterIsrResponse,
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ErrorCode,
    MessageError,
    PartitionId,
    ReassignmentPartitionResult,
    decode,
    encode,
)

if TYPE_CHECKING:
    from controller_core.controller import Controller

logger = logging.getLogger(__name__)

STATUS_PATH = "/v1/status"
MAX_BODY_BYTES = 64 * 1024 * 1024
REQUEST_TIMEOUT_S = 60.0
R = TypeVar("R")


class BadRequest(ValueError):
    """The body is not a valid request; answered with HTTP 400 and this message."""


def alter_isr_response(error: int, results: Mapping[TopicPartition, Any]) -> AlterIsrResponse:
    """The wire answer for the controller's per-partition AlterIsr outcomes."""
    out = []
    for tp, result in results.items():
        if isinstance(result, LeaderAndIsr):
            out.append(
                AlterIsrPartitionResult(
                    tp.topic,
                    tp.partition,
                    ErrorCode.NONE,
                    result.leader,
                    result.leader_epoch,
                    result.isr,
                    result.zk_version,
                )
            )
        else:
            out.append(AlterIsrPartitionResult(tp.topic, tp.partition, ErrorCode(int(result))))
    return AlterIsrResponse(ErrorCode(error), tuple(out))


def controlled_shutdown_response(error: int, remaining: Sequence[TopicPartition]) -> ControlledShutdownResponse:
    """The wire answer for a controlled shutdown: the partitions the broker still leads."""
    return ControlledShutdownResponse(ErrorCode(error), tuple(PartitionId(tp.topic, tp.partition) for tp in remaining))


def reassignments_response(
    error: int, results: Mapping[TopicPartition, tuple[int, str]]
) -> AlterPartitionReassignmentsResponse:
    """The wire answer for AlterPartitionReassignments: each partition's error code and message."""
    return AlterPartitionReassignmentsResponse(
        ErrorCode.parse(error),
        tuple(
            ReassignmentPartitionResult(tp.topic, tp.partition, ErrorCode.parse(code), message)
            for tp, (code, message) in sorted(results.items())
        ),
    )


class ControllerApiServer:
    """Serves the controller's broker-facing API on its own threads.

    Example::

        api = ControllerApiServer(controller, "127.0.0.1", 0)
        api.start()
        controller.endpoint = api.url
    """

    def __init__(self, controller: Controller, host: str, port: int) -> None:
        self._controller = controller
        handler = _make_handler(controller)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="controller-api", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def _make_handler(controller: Controller) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "kcp-controller/1"

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("api: " + format, *args)

        def _send(self, status: int, body: object) -> None:
            payload = encode(body)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            if length <= 0 or length > MAX_BODY_BYTES:
                raise BadRequest(f"body must be 1..{MAX_BODY_BYTES} bytes")
            return self.rfile.read(length)

        def do_GET(self) -> None:
            if self.path == STATUS_PATH:
                self._send(HTTPStatus.OK, controller.status())
            else:
                self._send(HTTPStatus.NOT_FOUND, {"error": f"no such path {self.path}"})

        def do_POST(self) -> None:
            try:
                body = self._body()
                if self.path == ALTER_ISR_PATH:
                    self._send(HTTPStatus.OK, self._alter_isr(body))
                elif self.path == CONTROLLED_SHUTDOWN_PATH:
                    self._send(HTTPStatus.OK, self._controlled_shutdown(body))
                elif self.path == ALTER_PARTITION_REASSIGNMENTS_PATH:
                    self._send(HTTPStatus.OK, self._alter_partition_reassignments(body))
                else:
                    self._send(HTTPStatus.NOT_FOUND, {"error": f"no such path {self.path}"})
            except (BadRequest, MessageError) as exc:
                self._send(HTTPStatus.BAD_REQUEST, {"error": str(exc)})
            except TimeoutError:
                self._send(HTTPStatus.SERVICE_UNAVAILABLE, {"error": "the controller did not answer in time"})

        def _alter_isr(self, body: bytes) -> AlterIsrResponse:
            request = decode(body, AlterIsrRequest, "AlterIsr request")
            partitions = {
                p.topic_partition: (p.leader_epoch, p.new_isr, p.current_isr_version) for p in request.partitions
            }
            return _ask(
                controller,
                lambda reply: AlterIsrReceived(request.broker_id, request.broker_epoch, partitions, reply),
                alter_isr_response,
            )

        def _controlled_shutdown(self, body: bytes) -> ControlledShutdownResponse:
            request = decode(body, ControlledShutdownRequest, "ControlledShutdown request")
            return _ask(
                controller,
                lambda reply: ControlledShutdown(request.broker_id, request.broker_epoch, reply),
                controlled_shutdown_response,
            )

        def _alter_partition_reassignments(self, body: bytes) -> AlterPartitionReassignmentsResponse:
            request = decode(body, AlterPartitionReassignmentsRequest, "AlterPartitionReassignments request")
            targets = {p.topic_partition: p.replicas for p in request.partitions}
            return _ask(controller, lambda reply: ApiPartitionReassignment(targets, reply), reassignments_response)

    return Handler


def _ask(
    controller: Controller,
    event_for: Callable[[Callable[..., None]], ControllerEvent],
    answer: Callable[..., R],
) -> R:
    """Put ``event_for(reply)`` on the controller's queue and wait for the event thread to call
    ``reply``; its arguments become the wire response through ``answer``. TimeoutError (HTTP 503)
    when the controller does not answer within ``REQUEST_TIMEOUT_S``."""
    done = threading.Event()
    box: list[R] = []

    def reply(*args: Any) -> None:
        box.append(answer(*args))
        done.set()

    controller.events.put(event_for(reply))
    if not done.wait(REQUEST_TIMEOUT_S):
        raise TimeoutError
    return box[0]
