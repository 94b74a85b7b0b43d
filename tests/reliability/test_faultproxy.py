"""The fault proxy's modes, against a loopback echo server and a real ZooKeeper session."""

from __future__ import annotations

import asyncio
import socket
import socketserver
import threading
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from scripts.devservices import ZooKeeperServer
from scripts.reliability.faultproxy import FaultProxy
from tests.support.zk import wait_for

pytestmark = pytest.mark.integration


class _Echo(socketserver.BaseRequestHandler):
    received: list[bytes] = []

    def handle(self) -> None:
        while data := self.request.recv(4096):
            _Echo.received.append(data)
            self.request.sendall(data)


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    _Echo.received = []
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    p = FaultProxy("127.0.0.1", server.server_address[1]).start()
    try:
        yield p
    finally:
        p.stop()
        server.shutdown()
        server.server_close()


def _connect(proxy: FaultProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    sock.settimeout(0.5)
    return sock


def test_pass_and_delay_forward_in_order(proxy: FaultProxy) -> None:
    sock = _connect(proxy)
    sock.sendall(b"one")
    assert sock.recv(10) == b"one"
    proxy.set_mode("delay", delay_ms=50)
    sock.settimeout(5)
    sock.sendall(b"two")
    assert sock.recv(10) == b"two"


def test_blackhole_holds_bytes_until_pass(proxy: FaultProxy) -> None:
    sock = _connect(proxy)
    proxy.set_mode("blackhole")
    sock.sendall(b"held")
    with pytest.raises(TimeoutError):
        sock.recv(10)
    assert _Echo.received == []
    proxy.set_mode("pass")
    sock.settimeout(5)
    assert sock.recv(10) == b"held"


def test_one_way_drop_delivers_requests_but_not_replies(proxy: FaultProxy) -> None:
    sock = _connect(proxy)
    proxy.set_mode("drop_s2c")
    sock.sendall(b"ping")
    wait_for(lambda: _Echo.received == [b"ping"], what="the request reached the server")
    with pytest.raises(TimeoutError):
        sock.recv(10)


def test_reset_resets_open_and_new_connections(proxy: FaultProxy) -> None:
    sock = _connect(proxy)
    proxy.set_mode("reset")
    sock.settimeout(5)
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        sock.sendall(b"x")
        if not sock.recv(10):
            raise ConnectionResetError("closed")
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        fresh = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        fresh.settimeout(5)
        if not fresh.recv(10):
            raise ConnectionResetError("closed")


def test_a_reset_loses_the_replies_a_drop_was_holding(proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch) -> None:
    # The reset runs on the proxy's loop after set_mode has switched the mode; the gap is widened
    # here so that a pipe polling its gate in it would forward the held reply, as it once did.
    reset_all = proxy._reset_all

    async def late_reset() -> None:
        await asyncio.sleep(0.2)
        await reset_all()

    monkeypatch.setattr(proxy, "_reset_all", late_reset)
    sock = _connect(proxy)
    proxy.set_mode("drop_s2c")
    sock.sendall(b"applied")
    wait_for(lambda: _Echo.received == [b"applied"], what="the request reached the server")
    proxy.set_mode("reset")
    sock.settimeout(5)
    with pytest.raises((ConnectionResetError, BrokenPipeError)):
        if not sock.recv(10):  # b"applied" here is the held reply delivered after all
            raise ConnectionResetError("closed")


def test_bad_mode_is_refused(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="unknown fault proxy mode"):
        proxy.set_mode("slow")
    with pytest.raises(ValueError, match="delay_ms"):
        proxy.set_mode("delay")
    assert proxy.mode == "pass"


def test_a_zookeeper_session_suspends_and_comes_back_through_a_blackhole(zk_server: ZooKeeperServer) -> None:
    p = FaultProxy(zk_server.host, zk_server.port).start()
    client = KazooClient(hosts=f"127.0.0.1:{p.port}", timeout=4.0)
    states: list[str] = []
    client.add_listener(states.append)
    try:
        client.start(timeout=15)
        session = client.client_id
        p.set_mode("blackhole")
        wait_for(lambda: KazooState.SUSPENDED in states, timeout=15, what="SUSPENDED")
        p.set_mode("pass")
        wait_for(lambda: client.state == KazooState.CONNECTED, timeout=15, what="reconnected")
        assert client.client_id == session  # a blip shorter than the session timeout keeps the session
        assert KazooState.LOST not in states
    finally:
        client.stop()
        client.close()
        p.stop()
