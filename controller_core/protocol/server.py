"""A small routed HTTP/1.1 server for JSON messages, used by the broker agent and by test doubles.

Handlers take the POST body (or the GET query) and return the JSON answer. The status tells the
peer whether the message itself could be handled (docs/protocol.md):

* 400 -- the body is not a valid message (``ValueError``, e.g. ``messages.MessageError`` naming the
  field; a bug on the sending side, retrying cannot help); nothing was applied;
* 404 / 405 -- no such path / method;
* 503 -- the receiver is not ready yet (a broker that has not registered); retry later;
* 500 -- the receiver failed while handling the message.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

from controller_core.protocol.messages import CONTENT_TYPE, encode

logger = logging.getLogger(__name__)

#: Bodies above this are refused (a 100,000-partition request is ~20 MB).
MAX_BODY_BYTES: Final = 256 * 1024 * 1024


class HttpError(Exception):
    """Raised by a route handler to answer with a non-200 status and ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


PostHandler = Callable[[bytes], bytes]
"""Handle a POST body; return the JSON answer. ``ValueError`` becomes HTTP 400, ``HttpError`` its status."""

GetHandler = Callable[[Mapping[str, str]], bytes]
"""Handle a GET with its query parameters; return the JSON answer."""


class JsonHttpServer:
    """A threaded HTTP/1.1 server routing exact paths to handlers that take and return JSON bytes.

    Each connection gets a thread and may carry many requests (keep-alive). ``close()`` also cuts
    the established connections, so a stopped server looks dead to its peers, as a crashed one would.

    Example::

        server = JsonHttpServer("127.0.0.1", 0, post={"/v1/alter_isr": handle}, get={"/healthz": health})
        server.start()
        ...
        server.close()
    """

    def __init__(
        self,
        host: str,
        port: int,
        *,
        post: Mapping[str, PostHandler] | None = None,
        get: Mapping[str, GetHandler] | None = None,
        name: str = "json-http",
    ) -> None:
        self._post = dict(post or {})
        self._get = dict(get or {})
        self._name = name
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()
        self._server = _TrackingServer((host, port), _make_handler(self), self)
        self._thread: threading.Thread | None = None

    @property
    def host(self) -> str:
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def route_post(self, path: str, handler: PostHandler) -> None:
        self._post[path] = handler

    def route_get(self, path: str, handler: GetHandler) -> None:
        self._get[path] = handler

    def start(self) -> None:
        """Serve on a daemon thread (the socket is already bound, so the port is known before)."""
        self._thread = threading.Thread(target=self._server.serve_forever, name=self._name, daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop accepting, cut every open connection and release the port."""
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=5.0)
            self._thread = None
        self._server.server_close()
        with self._open_lock:
            sockets = list(self._open)
            self._open.clear()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _track(self, sock: socket.socket, open_: bool) -> None:
        with self._open_lock:
            if open_:
                self._open.add(sock)
            else:
                self._open.discard(sock)


class _TrackingServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], owner: JsonHttpServer) -> None:
        self.owner = owner
        super().__init__(address, handler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        self.owner._track(request, True)
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.owner._track(request, False)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A peer that gave up (timeout, shutdown) breaks the pipe under our answer: routine, not a bug.
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError | TimeoutError):
            logger.debug("%s: connection from %s ended: %s", self.owner._name, client_address, error)
            return
        logger.exception("%s: error serving %s", self.owner._name, client_address)


def _make_handler(server: JsonHttpServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "kcp/1"

        def log_message(self, format: str, *args: Any) -> None:
            logger.debug("%s: " + format, server._name, *args)

        def _reply(self, status: int, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _fail(self, status: int, message: str) -> None:
            self._reply(status, encode({"error": message}))

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            handler = server._get.get(parts.path)
            if handler is None:
                status = HTTPStatus.METHOD_NOT_ALLOWED if parts.path in server._post else HTTPStatus.NOT_FOUND
                self._fail(status, f"no GET {parts.path}")
                return
            self._run(lambda: handler(dict(parse_qsl(parts.query))))

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            try:
                length = int(self.headers.get("Content-Length") or "0")
            except ValueError:
                length = -1
            if length < 0 or length > MAX_BODY_BYTES:
                self.close_connection = True
                self._fail(HTTPStatus.BAD_REQUEST, f"Content-Length must be 0..{MAX_BODY_BYTES}")
                return
            body = self.rfile.read(length)
            handler = server._post.get(path)
            if handler is None:
                status = HTTPStatus.METHOD_NOT_ALLOWED if path in server._get else HTTPStatus.NOT_FOUND
                self._fail(status, f"no POST {path}")
                return
            self._run(lambda: handler(body))

        def _run(self, call: Callable[[], bytes]) -> None:
            try:
                answer = call()
            except HttpError as exc:
                self._fail(exc.status, exc.message)
            except ValueError as exc:
                self._fail(HTTPStatus.BAD_REQUEST, str(exc))
            except Exception as exc:
                logger.exception("%s: handler for %s failed", server._name, self.path)
                self._fail(HTTPStatus.INTERNAL_SERVER_ERROR, f"{type(exc).__name__}: {exc}")
            else:
                self._reply(HTTPStatus.OK, answer)

    return Handler
