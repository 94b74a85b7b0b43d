"""Buffered socket reads on a kazoo connection (``controller_core.zk.buffered_reads``) against the real
ZooKeeper: a burst of watch events arrives whole and in order, several packets per ``recv``; no
complete packet is ever left buffered when kazoo's main loop goes back to ``select`` (it would wait
for the next server packet); replies, one-shot watches and a reconnection work as without it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.protocol.connection import _CONNECTION_DROP
from kazoo.protocol.states import KazooState

from controller_core.zk.buffered_reads import BufferedReads
from controller_core.zk.persistent_watch import NODE_DATA_CHANGED, PersistentWatchTap, add_watch_async
from tests.support.zk import started_client, wait_for


@pytest.fixture
def follower_client(zk_chroot: str) -> Iterator[KazooClient]:
    with started_client(zk_chroot) as client:
        yield client


def test_a_burst_of_events_arrives_in_order_with_no_packet_left_buffered(
    zk: KazooClient, follower_client: KazooClient
) -> None:
    count = 3000
    paths = [f"/brokers/topics/t/partitions/{i}/state" for i in range(count)]
    zk.ensure_path("/brokers/topics/t/partitions")
    for start in range(0, count, 500):
        tx = zk.transaction()
        for i in range(start, min(count, start + 500)):
            tx.create(f"/brokers/topics/t/partitions/{i}", b"")
            tx.create(paths[i], b"0")
        tx.commit()

    seen: list[tuple[int, str]] = []
    lock = threading.Lock()

    def sink(event_type: int, path: str) -> None:
        with lock:
            seen.append((event_type, path))

    original = follower_client._connection._read_socket
    tap = PersistentWatchTap(follower_client, ["/brokers"], sink)
    reads = BufferedReads(follower_client)
    tap.install()
    reads.install()
    left_buffered: list[int] = []
    wrapped = follower_client._connection._read_socket

    def checked(read_timeout: float) -> Any:  # kazoo's main loop selects again after each call
        response = wrapped(read_timeout)
        # A call still in flight when the test uninstalls (kazoo's thread was handling a packet) may
        # have handed the connection back inside ``wrapped``: nothing is buffered any more then.
        if reads.installed and reads._complete_packet_buffered():
            left_buffered.append(len(reads._buffer) - reads._pos)
        return response

    follower_client._connection._read_socket = checked
    try:
        add_watch_async(follower_client, "/brokers").get(timeout=5)
        one_shot = threading.Event()
        follower_client.get(paths[-1], watch=lambda e: one_shot.set())
        for start in range(0, count, 500):  # rewrite every state, in multis, as a controller does
            tx = zk.transaction()
            for path in paths[start : start + 500]:
                tx.set_data(path, b"1")
            tx.commit()
        wait_for(lambda: len(seen) >= count, interval=0.01, what=f"{count} events")
        assert seen == [(NODE_DATA_CHANGED, path) for path in paths]  # every one, in ZooKeeper's order
        assert one_shot.wait(5), "kazoo's own one-shot watch did not fire"
        assert not left_buffered, f"kazoo went back to select with complete packets buffered: {left_buffered}"
        assert reads.packets_from_buffer > count // 2, "events were not read several per recv"
        assert reads.watch_events_direct > count // 2, "buffered events went through kazoo's packet reading"
        assert follower_client.get(paths[0])[0] == b"1"  # replies still reach their callers
    finally:
        follower_client._connection._read_socket = wrapped
        reads.uninstall()
        tap.uninstall()
    assert follower_client.exists(paths[0]) is not None
    # Handed back on the connection thread after the next packet, with nothing left buffered.
    wait_for(lambda: not reads.installed, interval=0.01)
    assert follower_client._connection._read_socket == original
    assert follower_client.exists(paths[1]) is not None


def test_uninstalling_with_packets_buffered_loses_none(zk: KazooClient, follower_client: KazooClient) -> None:
    zk.ensure_path("/brokers/n")
    seen: list[str] = []
    tap = PersistentWatchTap(follower_client, ["/brokers"], lambda _type, path: seen.append(path))
    reads = BufferedReads(follower_client)
    tap.install()
    reads.install()
    add_watch_async(follower_client, "/brokers").get(timeout=5)
    hold = threading.Event()
    release = threading.Event()
    wrapped = follower_client._connection._read_watch_event

    def slow(buffer: bytes, offset: int) -> Any:  # keeps the connection thread inside a buffered burst
        if not hold.is_set():
            hold.set()
            release.wait(5)
        return wrapped(buffer, offset)

    follower_client._connection._read_watch_event = slow
    try:
        tx = zk.transaction()
        for i in range(200):
            tx.create(f"/brokers/n/{i}", b"x")
        tx.commit()
        assert hold.wait(5)
        reads.uninstall()  # while the rest of the burst sits in the buffer
        release.set()
        wait_for(lambda: len(seen) >= 200, interval=0.01)
        assert seen == [f"/brokers/n/{i}" for i in range(200)]
        assert follower_client.get("/brokers/n")[1].numChildren == 200
        wait_for(lambda: not reads.installed, interval=0.01)
    finally:
        release.set()
        follower_client._connection._read_watch_event = wrapped
        tap.uninstall()


def test_a_reconnection_starts_from_an_empty_buffer(follower_client: KazooClient) -> None:
    reads = BufferedReads(follower_client)
    reads.install()
    try:
        follower_client.ensure_path("/a")
        first_socket = follower_client._connection._socket
        states: list[str] = []
        follower_client.add_listener(states.append)
        follower_client._call(_CONNECTION_DROP, follower_client.handler.async_result())
        wait_for(lambda: KazooState.SUSPENDED in states and follower_client.connected, interval=0.01)
        assert follower_client._connection._socket is not first_socket
        follower_client.set("/a", b"after")
        assert follower_client.get("/a")[0] == b"after"
        assert reads._socket is follower_client._connection._socket
    finally:
        reads.uninstall()
