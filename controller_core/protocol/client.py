"""The keep-alive HTTP/JSON client both sides use (docs/protocol.md), and where to find the controller.

Why HTTP/JSON: it is plain, debuggable with ``curl``, needs only the standard library, and keeps
connections alive, so one controller-to-broker channel is one TCP connection. Kafka-level errors
travel *inside* the JSON (``error_code``) with HTTP 200; any other status means the message itself
could not be handled and surfaces as ``HttpStatusError`` (only 503, "not ready yet", is worth
resending unchanged).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
from collections.abc import Mapping, Sequence
from http import HTTPStatus
from typing import Any, Final
from urllib.parse import urlsplit

from controller_core.protocol.messages import CONTENT_TYPE

#: The extra key of ``/controller`` holding the active controller's base URL (``http://host:port``).
CONTROLLER_ENDPOINT_KEY: Final = "endpoint"


def controller_endpoint(extra: Mapping[str, Any]) -> str | None:
    """The controller API URL from the extra keys of ``/controller`` (None when absent or invalid)."""
    value = extra.get(CONTROLLER_ENDPOINT_KEY)
    if not isinstance(value, str):
        return None
    try:
        split_url(value)
    except ValueError:
        return None
    return value


def split_url(url: str) -> tuple[str, int]:
    """``http://host:port`` -> ``(host, port)``; only plain HTTP is spoken."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname or parts.port is None:
        raise ValueError(f"not an http://host:port URL: {url!r}")
    return parts.hostname, parts.port


class HttpStatusError(Exception):
    """The peer answered with an HTTP status other than 200."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.message = message

    @property
    def retriable(self) -> bool:
        """Only "not ready yet" is worth resending unchanged."""
        return self.status == HTTPStatus.SERVICE_UNAVAILABLE


class JsonConnection:
    """One keep-alive HTTP connection to one peer; not thread-safe (one owner thread).

    Any failure (refused, reset, timeout, malformed answer) closes the connection and raises; the
    next ``post`` reconnects. One exception, as HTTP clients do: a kept-alive connection that the
    peer closed while idle (it restarted, or timed the connection out) fails at once on reuse, and
    the request is then sent again once on a fresh connection. ``abort()`` may be called from
    another thread to break a blocked call.

    Example::

        conn = JsonConnection("127.0.0.1", 9092, timeout=30.0)
        body = conn.post(LEADER_AND_ISR_PATH, encode_control_request(request))
    """

    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        self.host = host
        self.port = port
        self.timeout = timeout
        self._conn: http.client.HTTPConnection | None = None
        self._reused = False
        self._stale = False
        self._aborted = False

    def _request(self, method: str, path: str, body: bytes | Sequence[bytes | memoryview] | None) -> bytes:
        if self._aborted:
            raise ConnectionAbortedError(f"connection to {self.host}:{self.port} was aborted")
        try:
            return self._attempt(method, path, body)
        except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
            if not self._stale or self._aborted:
                raise
            return self._attempt(method, path, body)

    def _attempt(self, method: str, path: str, body: bytes | Sequence[bytes | memoryview] | None) -> bytes:
        self._stale = False
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
            self._reused = False
        conn = self._conn
        headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE}
        if body is not None and not isinstance(body, bytes):
            # Parts: http.client sends each as it is (no chunked encoding: the length is known).
            headers["Content-Length"] = str(sum(map(len, body)))
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except BaseException:
            self._stale = self._reused  # a reused connection that broke: probably closed while idle
            self.close()
            raise
        self._reused = True
        if response.will_close:
            self.close()
        if response.status != HTTPStatus.OK:
            raise HttpStatusError(response.status, _error_message(data))
        return data

    def post(self, path: str, body: bytes | Sequence[bytes | memoryview]) -> bytes:
        """POST a JSON body, whole or in parts sent one after the other (``encode_control_request_parts``:
        no copy of a large shared part); return the 200 answer's body (``HttpStatusError`` otherwise)."""
        return self._request("POST", path, body)

    def get(self, path: str) -> bytes:
        """GET a path; return the 200 answer's body."""
        return self._request("GET", path, None)

    def abort(self) -> None:
        """Break an in-flight call from another thread (its owner sees an ``OSError``); final: every
        later call fails too (the owner is stopping)."""
        self._aborted = True
        conn = self._conn
        sock = getattr(conn, "sock", None) if conn is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def _error_message(data: bytes) -> str:
    try:
        value = json.loads(data)
    except ValueError:
        return data[:200].decode(errors="replace")
    if isinstance(value, dict) and isinstance(value.get("error"), str):
        return str(value["error"])
    return data[:200].decode(errors="replace")
