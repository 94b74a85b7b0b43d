"""The test harness itself: real services, isolated chroots, real session expiry."""

from __future__ import annotations

import threading

import redis
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from scripts.devservices import RedisServer, ZooKeeperServer, four_letter_word
from tests.support.zk import drop_connection, expire_session, wait_for


def test_each_test_gets_an_empty_chroot(zk: KazooClient) -> None:
    assert zk.get_children("/") == []
    zk.create("/brokers/ids", makepath=True)
    assert zk.get_children("/") == ["brokers"]


def test_zookeeper_is_a_real_3_6_plus_server(zk_server: ZooKeeperServer) -> None:
    version_line = four_letter_word(zk_server.host, zk_server.port, "srvr").splitlines()[0]
    major, minor = version_line.split(":", 1)[1].strip().split(".")[:2]
    assert (int(major), int(minor)) >= (3, 6), version_line  # multi-read needs 3.6


def test_session_really_expires_and_its_ephemeral_goes(zk_chroot: str) -> None:
    victim = KazooClient(hosts=zk_chroot, timeout=4.0)
    victim.start(timeout=10)
    watcher = KazooClient(hosts=zk_chroot, timeout=4.0)
    watcher.start(timeout=10)
    try:
        victim.create("/controller", b"{}", ephemeral=True)
        old_session = victim.client_id[0]
        states: list[str] = []
        victim.add_listener(states.append)
        expire_session(victim, zk_chroot)
        assert KazooState.LOST in states
        wait_for(lambda: watcher.exists("/controller") is None, what="ephemeral removed on expiry")
        # kazoo re-establishes a *new* session afterwards.
        wait_for(lambda: victim.connected and victim.client_id[0] != old_session, what="new session")
    finally:
        victim.stop()
        watcher.stop()


def test_dropped_connection_keeps_the_session(zk_chroot: str) -> None:
    client = KazooClient(hosts=zk_chroot, timeout=6.0)
    client.start(timeout=10)
    try:
        client.create("/eph", ephemeral=True)
        session = client.client_id[0]
        reconnected = threading.Event()
        seen: list[str] = []

        def listener(state: str) -> None:
            seen.append(state)
            if state == KazooState.CONNECTED and KazooState.SUSPENDED in seen:
                reconnected.set()

        client.add_listener(listener)
        drop_connection(client)
        assert reconnected.wait(10), seen
        assert client.client_id[0] == session
        assert client.exists("/eph") is not None
    finally:
        client.stop()


def test_zookeeper_server_can_be_stopped_and_restarted(zk_server: ZooKeeperServer, zk_chroot: str) -> None:
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=10)
    try:
        client.create("/persistent", b"x")
        zk_server.stop()
        wait_for(lambda: not client.connected, what="client notices the server is gone")
        zk_server.start()
        wait_for(lambda: client.connected, timeout=20, what="client reconnects")
        assert client.get("/persistent")[0] == b"x"
    finally:
        client.stop()


def test_redis_is_private_and_flushed(redis_url: str, redis_server: RedisServer) -> None:
    conn = redis.Redis.from_url(redis_url)
    assert conn.dbsize() == 0
    conn.set("k", "v")
    assert conn.get("k") == b"v"
    assert redis_server.port != 6379
