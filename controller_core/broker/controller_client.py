"""The broker's client of the active controller's API (AlterIsr and ControlledShutdown).

Brokers find the controller the way Kafka's do, through ``/controller``: the active controller writes
its API address there as the extra key ``endpoint`` (``http://host:port``). The client keeps that
address current with a data watch and, because watches can lag, also re-reads ``/controller`` after
any failure (connection refused, NOT_CONTROLLER answered by the caller, a timeout).

Failures surface as ``ControllerUnavailableError``; the callers (the AlterIsr sender, controlled
shutdown) decide how to retry. Each API path has its own keep-alive connection, so a slow controlled
shutdown never holds up ISR proposals.
"""

from __future__ import annotations

import http.client
import logging
import threading
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import ZnodeStat

from controller_core.protocol.client import HttpStatusError, JsonConnection, controller_endpoint, split_url
from controller_core.protocol.messages import (
    ALTER_ISR_PATH,
    CONTROLLED_SHUTDOWN_PATH,
    AlterIsrRequest,
    AlterIsrResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    decode,
    encode,
)
from controller_core.zk import codecs, paths

logger = logging.getLogger(__name__)


class ControllerUnavailableError(Exception):
    """No controller is registered, it advertises no endpoint, or it could not be reached."""


class ControllerClient:
    """Talk to whichever controller is active.

    Example::

        client = ControllerClient(zk, timeout_s=30.0)
        client.start()
        response = client.controlled_shutdown(ControlledShutdownRequest(broker_id=1, broker_epoch=epoch))
    """

    def __init__(self, zk: KazooClient, *, timeout_s: float = 30.0) -> None:
        self._zk = zk
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._endpoint: str | None = None
        self._controller_id: int | None = None
        self._connections: dict[str, tuple[str, JsonConnection, threading.Lock]] = {}

    def start(self) -> None:
        """Watch ``/controller`` (kazoo re-arms the watch, also after a session expiry)."""
        self._zk.DataWatch(paths.CONTROLLER_PATH, self._on_controller)

    @property
    def controller_id(self) -> int | None:
        return self._controller_id

    def _on_controller(self, data: bytes | None, stat: ZnodeStat | None, *_: Any) -> None:
        # kazoo's watcher thread: decode and store only.
        self._store(data)

    def _store(self, data: bytes | None) -> None:
        endpoint: str | None = None
        controller_id: int | None = None
        if data:
            try:
                info = codecs.decode_controller(data)
            except ValueError as exc:
                logger.warning("unreadable /controller: %s", exc)
            else:
                controller_id = info.broker_id
                endpoint = controller_endpoint(info.extra)
                if endpoint is None:
                    logger.warning("controller %d advertises no usable %r in /controller", info.broker_id, "endpoint")
        with self._lock:
            changed = endpoint != self._endpoint
            self._endpoint, self._controller_id = endpoint, controller_id
        if changed:
            logger.info("active controller: %s at %s", controller_id, endpoint)

    def refresh(self) -> str | None:
        """Re-read ``/controller`` now; the endpoint (None when there is no usable one).

        The read waits at most the request timeout: kazoo's synchronous ``get`` waits for ever while
        ZooKeeper is unreachable, which hung a controlled shutdown with ZooKeeper down (KAFKA-9189;
        reliability scenario F12): the broker must give up after its bounded retries instead.
        """
        try:
            data, _ = self._zk.get_async(paths.CONTROLLER_PATH).get(timeout=self._timeout_s)
        except NoNodeError:
            data = None
        except (KazooException, self._zk.handler.timeout_exception) as exc:
            logger.debug("cannot read /controller: %s", exc)
            return None
        self._store(data)
        return self._endpoint

    def refresh_in_background(self) -> None:
        """Re-read ``/controller`` without waiting: the next call uses the answer if it came. A
        failed call must not add a ZooKeeper wait to the caller's retry loop (with ZooKeeper down,
        every controlled-shutdown attempt would take a request timeout longer)."""

        def store(result: Any) -> None:
            try:
                data, _ = result.get_nowait()
            except NoNodeError:
                data = None
            except Exception as exc:  # connection loss, session expiry: keep what the watch knows
                logger.debug("cannot read /controller: %s", exc)
                return
            self._store(data)

        try:
            self._zk.get_async(paths.CONTROLLER_PATH).rawlink(store)
        except KazooException as exc:  # the client is closing
            logger.debug("cannot read /controller: %s", exc)

    def endpoint(self) -> str | None:
        with self._lock:
            endpoint = self._endpoint
        return endpoint if endpoint is not None else self.refresh()

    # -- API calls -------------------------------------------------------------------------------

    def alter_isr(self, request: AlterIsrRequest) -> AlterIsrResponse:
        body = self._post(ALTER_ISR_PATH, encode(request))
        try:
            return decode(body, AlterIsrResponse, "AlterIsr response")
        except ValueError as exc:
            raise ControllerUnavailableError(f"the controller answered AlterIsr with garbage: {exc}") from None

    def controlled_shutdown(self, request: ControlledShutdownRequest) -> ControlledShutdownResponse:
        body = self._post(CONTROLLED_SHUTDOWN_PATH, encode(request))
        try:
            return decode(body, ControlledShutdownResponse, "ControlledShutdown response")
        except ValueError as exc:
            raise ControllerUnavailableError(
                f"the controller answered ControlledShutdown with garbage: {exc}"
            ) from None

    def _post(self, path: str, body: bytes) -> bytes:
        endpoint = self.endpoint()
        if endpoint is None:
            raise ControllerUnavailableError("no active controller with an endpoint in /controller")
        conn, lock = self._connection(path, endpoint)
        with lock:
            try:
                return conn.post(path, body)
            except (OSError, http.client.HTTPException, HttpStatusError) as exc:
                conn.close()
                self.refresh_in_background()
                raise ControllerUnavailableError(f"controller at {endpoint}: {type(exc).__name__}: {exc}") from None

    def _connection(self, path: str, endpoint: str) -> tuple[JsonConnection, threading.Lock]:
        with self._lock:
            entry = self._connections.get(path)
            if entry is None or entry[0] != endpoint:
                if entry is not None:
                    entry[1].close()
                host, port = split_url(endpoint)
                entry = (endpoint, JsonConnection(host, port, self._timeout_s), threading.Lock())
                self._connections[path] = entry
            return entry[1], entry[2]

    def close(self) -> None:
        with self._lock:
            entries = list(self._connections.values())
            self._connections.clear()
        for _, conn, _ in entries:
            conn.close()
