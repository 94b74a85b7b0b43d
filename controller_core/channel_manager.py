"""Deliver control requests to brokers: one queue, one sender thread, one connection per broker.

Kafka's ``ControllerChannelManager`` (reference §6.4), over the HTTP/JSON protocol of
``controller_core.protocol``:

* ``add_broker`` creates the broker's FIFO queue and sender thread (a no-op when it already has one:
  the controller removes a bounced broker first, then adds it back with its new registration);
  ``remove_broker`` stops the thread and discards whatever is still queued or in flight.
* ``send`` only enqueues, so the controller's event thread never waits on the network. A request for
  a broker without a queue is dropped with a warning (the broker is gone; it gets full metadata when
  it registers again).
* The sender takes one request at a time, so there is one request in flight per broker and requests
  arrive in the order they were sent. On connection loss, a timeout or HTTP 503 (broker not ready)
  it closes the connection, backs off 100 ms and resends *the same* request, until it is answered or
  the broker is removed. Control requests are safe to resend, even when the first copy is still
  being handled and ends up applied after later requests: a repeated LeaderAndIsr or StopReplica is
  refused per partition by its leader epoch, and a broker ignores UpdateMetadata partition states
  older than the ones it holds (``controller_core.broker.metadata_cache``).
* A request the broker refuses as malformed (HTTP 4xx) or fails on (HTTP 500) would fail the same
  way forever; it is answered locally with INVALID_REQUEST / UNKNOWN_SERVER_ERROR so that callbacks
  waiting on it (topic deletion) see a failure instead of a hang.
* The callback runs on the sender thread with the decoded response object
  (``protocol.messages.*Response``). An answer that does not decode strictly as the response to that
  request (a wrongly typed field anywhere, another ``kind``) is answered UNKNOWN_SERVER_ERROR.
  Callbacks must only enqueue controller events (the batch's callbacks do).

The body of each request is encoded once, on the sender thread, and reused for every retry;
UpdateMetadata partition lists shared by several brokers are encoded once for all of them and sent
as a part of each body, not copied into it (``protocol.messages.encode_control_request_parts``). A
sender lets go of a request, its body and its answer as soon as it is done with them, not when the
next one comes: a failover's requests at a million partitions are hundreds of MB.

Metrics (``metrics()``, ``queue_size()``, ``total_queue_size()``): per broker the queue size,
whether a request is in flight, requests sent, retries, last error, and queue time (last and max).
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from controller_core.model import BrokerRegistration, EndPoint
from controller_core.protocol.client import HttpStatusError, JsonConnection
from controller_core.protocol.messages import (
    CONTROL_LISTENER,
    REPLICATION_LISTENER,
    ControlRequest,
    ControlResponse,
    ErrorCode,
    control_request_path,
    decode_control_response,
    empty_response_for,
    encode_control_request_parts,
)

logger = logging.getLogger(__name__)

ResponseCallback = Callable[[Any], None]

#: Kafka's fixed back-off between attempts to (re)connect or resend (reference §11).
RETRY_BACKOFF_S = 0.1


@dataclass(frozen=True, slots=True)
class BrokerChannelMetrics:
    """A snapshot of one broker's channel (Kafka: ``QueueSize``, ``RequestRateAndQueueTimeMs``)."""

    broker_id: int
    address: str
    queue_size: int
    in_flight: bool
    requests_sent: int
    retries: int
    dropped: int
    last_queue_time_ms: float
    max_queue_time_ms: float
    last_error: str | None


@dataclass(slots=True)
class _Item:
    request: ControlRequest
    callback: ResponseCallback | None
    enqueued_at: float


class _BrokerSender:
    """The queue, the thread and the connection of one broker."""

    def __init__(self, broker: BrokerRegistration, endpoint: EndPoint, request_timeout_s: float) -> None:
        self.broker_id = broker.id
        self.address = f"{endpoint.host or '127.0.0.1'}:{endpoint.port}"
        self._connection = JsonConnection(endpoint.host or "127.0.0.1", endpoint.port, request_timeout_s)
        self._queue: deque[_Item] = deque()
        self._cond = threading.Condition()
        self._stopped = threading.Event()
        self.in_flight = False
        self.requests_sent = 0
        self.retries = 0
        self.dropped = 0
        self.last_queue_time_ms = 0.0
        self.max_queue_time_ms = 0.0
        self.last_error: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"controller-channel-{broker.id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def enqueue(self, item: _Item) -> bool:
        with self._cond:
            if self._stopped.is_set():
                return False
            self._queue.append(item)
            self._cond.notify()
            return True

    def queue_size(self) -> int:
        return len(self._queue)

    def stop(self, timeout: float) -> None:
        """Stop the thread, drop the queue and break any in-flight request."""
        with self._cond:
            self._stopped.set()
            self.dropped += len(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        self._connection.abort()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout)
        self._connection.close()

    def metrics(self) -> BrokerChannelMetrics:
        return BrokerChannelMetrics(
            broker_id=self.broker_id,
            address=self.address,
            queue_size=len(self._queue),
            in_flight=self.in_flight,
            requests_sent=self.requests_sent,
            retries=self.retries,
            dropped=self.dropped,
            last_queue_time_ms=self.last_queue_time_ms,
            max_queue_time_ms=self.max_queue_time_ms,
            last_error=self.last_error,
        )

    # -- sender thread ---------------------------------------------------------------------------

    def _next(self) -> _Item | None:
        with self._cond:
            while not self._queue and not self._stopped.is_set():
                self._cond.wait()
            if self._stopped.is_set():
                return None
            self.in_flight = True
            return self._queue.popleft()

    def _run(self) -> None:
        while True:
            item = self._next()
            if item is None:
                return
            try:
                queue_ms = (time.monotonic() - item.enqueued_at) * 1000.0
                self.last_queue_time_ms = queue_ms
                self.max_queue_time_ms = max(self.max_queue_time_ms, queue_ms)
                response = self._deliver(item.request)
                if response is None:  # removed while in flight: the request is dropped
                    self.dropped += 1
                    return
                self.requests_sent += 1
                if item.callback is not None:
                    try:
                        item.callback(response)
                    except Exception:
                        logger.exception("callback for %s to broker %d failed", item.request.kind, self.broker_id)
            except Exception:  # never let one bad request kill the broker's channel
                logger.exception("sending %s to broker %d failed", item.request.kind, self.broker_id)
            finally:
                self.in_flight = False
                item = response = None  # not held while waiting for the next request

    def _deliver(self, request: ControlRequest) -> ControlResponse | None:
        path = control_request_path(request)
        body = encode_control_request_parts(request)
        while not self._stopped.is_set():
            try:
                answer = self._connection.post(path, body)
            except HttpStatusError as exc:
                if exc.retriable:
                    self._note_retry(request, exc)
                    continue
                code = (
                    ErrorCode.INVALID_REQUEST
                    if exc.status < HTTPStatus.INTERNAL_SERVER_ERROR
                    else ErrorCode.UNKNOWN_SERVER_ERROR
                )
                logger.error(
                    "broker %d refused %s (%s); answering it with %s", self.broker_id, request.kind, exc, code.name
                )
                self.last_error = str(exc)
                return empty_response_for(request, code)
            except (OSError, http.client.HTTPException) as exc:  # refused, reset, timed out, garbled
                if self._stopped.is_set():  # ``stop`` broke it (the broker left, the controller resigned)
                    return None
                self._note_retry(request, exc)
                continue
            try:
                return decode_control_response(request.kind, answer)
            except ValueError as exc:
                logger.error("broker %d answered %s with garbage: %s", self.broker_id, request.kind, exc)
                self.last_error = str(exc)
                return empty_response_for(request, ErrorCode.UNKNOWN_SERVER_ERROR)
        return None

    def _note_retry(self, request: ControlRequest, exc: BaseException) -> None:
        self.retries += 1
        message = f"{type(exc).__name__}: {exc}"
        if message != self.last_error:  # log a change of condition, not every 100 ms retry
            logger.warning(
                "controller channel to broker %d (%s): %s; resending %s every %.0f ms",
                self.broker_id,
                self.address,
                message,
                request.kind,
                RETRY_BACKOFF_S * 1000,
            )
        self.last_error = message
        self._connection.close()
        self._stopped.wait(RETRY_BACKOFF_S)


class ControllerChannelManager:
    """The controller's ``RequestTransport``: per-broker ordered delivery of control requests.

    Thread-safe: the controller's event thread calls ``add_broker``/``remove_broker``/``send``;
    callbacks run on the per-broker sender threads.

    Example::

        channels = ControllerChannelManager()
        for broker in live_brokers:
            channels.add_broker(broker)
        channels.send(1, leader_and_isr_request, callback=on_response)
        ...
        channels.shutdown()
    """

    def __init__(
        self,
        *,
        listener: str = CONTROL_LISTENER,
        fallback_listener: str = REPLICATION_LISTENER,
        request_timeout_s: float = 30.0,
    ) -> None:
        """``listener`` is Kafka's ``control.plane.listener.name``; brokers that do not advertise it
        are reached on ``fallback_listener`` (the inter-broker one), else on their first endpoint.
        ``request_timeout_s`` is ``request.timeout.ms``: connect and response wait of one attempt."""
        self._listener = listener.upper()
        self._fallback_listener = fallback_listener.upper()
        self._request_timeout_s = request_timeout_s
        self._senders: dict[int, _BrokerSender] = {}
        self._lock = threading.Lock()
        self._shut_down = False

    # -- membership ------------------------------------------------------------------------------

    def add_broker(self, broker: BrokerRegistration) -> None:
        """Start a queue and sender for ``broker`` (no-op if it already has one)."""
        endpoint = self._endpoint(broker)
        with self._lock:
            if self._shut_down:
                raise RuntimeError("the controller channel manager is shut down")
            if broker.id in self._senders:
                logger.debug("broker %d already has a controller channel", broker.id)
                return
            sender = _BrokerSender(broker, endpoint, self._request_timeout_s)
            self._senders[broker.id] = sender
        sender.start()
        logger.info("controller channel to broker %d at %s started", broker.id, sender.address)

    def remove_broker(self, broker_id: int) -> None:
        """Stop the broker's sender and drop everything still queued or in flight for it."""
        with self._lock:
            sender = self._senders.pop(broker_id, None)
        if sender is None:
            return
        dropped = sender.queue_size() + (1 if sender.in_flight else 0)
        sender.stop(timeout=self._request_timeout_s)
        logger.info("controller channel to broker %d removed (%d requests dropped)", broker_id, dropped)

    def add_brokers(self, brokers: Iterable[BrokerRegistration]) -> None:
        for broker in brokers:
            self.add_broker(broker)

    @property
    def broker_ids(self) -> frozenset[int]:
        with self._lock:
            return frozenset(self._senders)

    # -- RequestTransport ------------------------------------------------------------------------

    def send(self, broker_id: int, request: Any, callback: ResponseCallback | None = None) -> None:
        """Queue ``request`` for ``broker_id``; never blocks. Dropped (warning) if the broker has no queue."""
        with self._lock:
            sender = self._senders.get(broker_id)
        if sender is None or not sender.enqueue(_Item(request, callback, time.monotonic())):
            logger.warning(
                "not sending %s to broker %d: it has no controller channel (not registered)",
                getattr(request, "kind", type(request).__name__),
                broker_id,
            )

    def shutdown(self) -> None:
        """Stop every sender (queued and in-flight requests are dropped)."""
        with self._lock:
            self._shut_down = True
            senders = list(self._senders.values())
            self._senders.clear()
        for sender in senders:
            sender.stop(timeout=self._request_timeout_s)

    # -- metrics ---------------------------------------------------------------------------------

    def queue_size(self, broker_id: int) -> int:
        """Requests waiting for ``broker_id`` (not counting the one in flight); 0 if unknown."""
        with self._lock:
            sender = self._senders.get(broker_id)
        return 0 if sender is None else sender.queue_size()

    def total_queue_size(self) -> int:
        with self._lock:
            senders = list(self._senders.values())
        return sum(s.queue_size() for s in senders)

    def metrics(self) -> dict[int, BrokerChannelMetrics]:
        with self._lock:
            senders = list(self._senders.values())
        return {s.broker_id: s.metrics() for s in senders}

    # -- helpers ---------------------------------------------------------------------------------

    def _endpoint(self, broker: BrokerRegistration) -> EndPoint:
        endpoint = broker.endpoint(self._listener) or broker.endpoint(self._fallback_listener)
        if endpoint is None:
            if not broker.endpoints:
                raise ValueError(f"broker {broker.id} has no endpoints to send control requests to")
            endpoint = broker.endpoints[0]
        return endpoint
