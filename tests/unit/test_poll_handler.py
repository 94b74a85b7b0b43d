"""``poll_select`` keeps ``select.select``'s contract, which kazoo's connection loop relies on."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from kazoo.protocol.states import Callback

from controller_core.zk.poll_handler import PollingThreadingHandler, inline_watch, poll_select

pytestmark = pytest.mark.unit


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_nothing_to_read_times_out_empty(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _b = pair
    started = time.monotonic()
    assert poll_select([a], [], [], 0.05) == ([], [], [])
    assert time.monotonic() - started >= 0.04


def test_reports_only_the_ready_objects_as_given(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    c, d = socket.socketpair()
    try:
        b.send(b"x")
        readable, writable, exceptional = poll_select([c, a], [d], [], 1.0)
        assert readable == [a]  # the file object itself, not its descriptor
        assert writable == [d]
        assert exceptional == []
        assert poll_select([a.fileno()], [], [], 0) == ([a.fileno()], [], [])  # descriptors work too
    finally:
        c.close()
        d.close()


def test_a_hung_up_peer_wakes_the_reader(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    b.close()
    assert poll_select([a], [], [], 1.0)[0] == [a]
    assert a.recv(1) == b""  # the recv that follows reports the hang-up


def test_bad_input_is_refused(pair: tuple[socket.socket, socket.socket]) -> None:
    a, _b = pair
    with pytest.raises(ValueError, match="non-negative"):
        poll_select([a], [], [], -1)
    with pytest.raises(TypeError, match="number"):
        poll_select([a], [], [], "1")  # type: ignore[arg-type]
    closed = socket.socket()
    closed.close()
    with pytest.raises(ValueError, match="invalid file descriptor"):
        poll_select([closed], [], [], 0)


def test_the_handler_selects_with_it(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    b.send(b"x")
    assert PollingThreadingHandler().select([a], [], [], 1.0) == ([a], [], [])


def test_inline_watches_run_on_the_dispatching_thread_and_others_are_queued() -> None:
    handler = PollingThreadingHandler()
    handler.start()
    try:
        ran_on: dict[str, int] = {}
        done = threading.Event()

        class Watcher:
            @inline_watch
            def inline(self, _event: object) -> None:
                ran_on["inline"] = threading.get_ident()

            def queued(self, _event: object) -> None:
                ran_on["queued"] = threading.get_ident()
                done.set()

            @inline_watch
            def broken(self, _event: object) -> None:
                raise RuntimeError("a broken promise")

        watcher = Watcher()
        handler.dispatch_callback(Callback("watch", watcher.inline, (None,)))
        assert ran_on == {"inline": threading.get_ident()}  # already ran, here
        handler.dispatch_callback(Callback("watch", watcher.broken, (None,)))  # logged, not raised
        handler.dispatch_callback(Callback("watch", watcher.queued, (None,)))
        assert done.wait(5)
        assert ran_on["queued"] != threading.get_ident()  # kazoo's callback thread
    finally:
        handler.stop()
