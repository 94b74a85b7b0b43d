"""Regression tests for the bugs the fault-injection scenarios found (one per bug, smallest setup)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from controller_core.broker.controller_client import ControllerClient, ControllerUnavailableError
from controller_core.broker.registration import BrokerRegistrar
from controller_core.config import ControllerConfig
from controller_core.model import BrokerRegistration, EndPoint
from controller_core.protocol.messages import ControlledShutdownRequest
from controller_core.runner import ControllerRunner
from controller_core.zk import codecs, paths
from controller_core.zk.client import stop_client
from controller_core.zk.store import ZkStore
from scripts.devservices import ZooKeeperServer
from scripts.reliability.faultproxy import FaultProxy
from scripts.support.kafka_layout import KafkaLayoutWriter
from tests.integration.mirror_helpers import counts, small_cluster, start_mirror, stop_mirror
from tests.support.zk import drop_connection, started_client, wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def leftover_session(zk_chroot: str) -> Iterator[KazooClient]:
    with started_client(zk_chroot) as client:
        yield client


def test_own_id_in_a_controller_znode_of_an_earlier_session_is_not_taken_for_active(
    zk_chroot: str, zk: KazooClient, leftover_session: KazooClient
) -> None:
    """F5 (KAFKA-7165 class): after a client-side expiry the server still holds the candidate's old
    session and its ephemeral ``/controller`` naming the candidate. The candidate, now on a new session,
    used to read "controller 100 is active", see its own id and report itself active with no epoch
    (headless) until the old session timed out. It must stand by, then win once the znode goes."""
    zk.create(paths.CONTROLLER_EPOCH_PATH, b"1", makepath=True)
    leftover_session.create(paths.CONTROLLER_PATH, codecs.encode_controller(100), ephemeral=True)
    runner = ControllerRunner(
        ControllerConfig(
            controller_id=100,
            zookeeper_connect=zk_chroot,
            zookeeper_session_timeout_s=4.0,
            first_rebalance_delay_seconds=3600,
        )
    )
    controller = runner.start()
    try:
        # The Startup event (watch /controller, elect) is processed before this probe.
        assert controller.run_on_event_thread(lambda: controller.is_active) is False
        assert controller.status()["active"] == "0"
        leftover_session.stop()  # the old session ends: its /controller goes, the watch fires
        wait_for(lambda: controller.is_active and controller.ctx.epoch == 2, timeout=20, what="re-election")
        stat = zk.exists(paths.CONTROLLER_PATH)
        assert stat is not None and stat.ephemeralOwner == runner.client.client_id[0]  # type: ignore[union-attr]
    finally:
        runner.stop()


@pytest.fixture
def rds(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


def test_mirror_rearms_its_watches_after_a_dropped_connection(
    zk_chroot: str, zk: KazooClient, rds: redis.Redis
) -> None:
    """F22 (nemesis, ZooKeeper leader restart): on a dropped connection kazoo discards every raw watch
    (it fires them with a NONE event and no path) even though the session survives. The mirror only
    resynced after LOST, so after a plain reconnect it never saw a new topic again (L4: mirror != ZK)."""
    small_cluster(zk)
    mirror, _publisher, client = start_mirror(zk_chroot, rds)
    try:
        session = client.client_id
        reconnected = threading.Event()
        client.add_listener(lambda state: reconnected.set() if state == KazooState.CONNECTED else None)
        drop_connection(client)
        assert reconnected.wait(20), "the mirror's client did not reconnect"
        assert client.client_id == session  # same session: not a LOST resync
        KafkaLayoutWriter(zk).create_topic("after-blip", {0: [1]})
        wait_for(lambda: counts(rds).get("topics") == 2, timeout=20, what="the topic created after the reconnect")
    finally:
        stop_mirror(mirror, client)


@pytest.fixture
def silent_controller() -> Iterator[str]:
    """A controller API that accepts connections and never answers (one whose ZooKeeper is gone)."""
    server = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            with contextlib.suppress(OSError):
                accepted.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for conn in accepted:
            conn.close()
        server.close()


def test_controlled_shutdown_gives_up_in_bounded_time_with_zookeeper_unreachable(
    zk_server: ZooKeeperServer, zk_chroot: str, zk: KazooClient, silent_controller: str
) -> None:
    """F12, ZooKeeper-down variant (KAFKA-9189): a broker's controlled shutdown must end after its
    bounded retries. After each failed attempt the client re-read ``/controller`` with kazoo's
    synchronous ``get``, which waits for ever while ZooKeeper is unreachable: the broker hung in
    shutdown until ZooKeeper came back. Deregistering had the same wait."""
    chroot = zk_chroot[zk_chroot.index("/") :]
    zk.create(paths.CONTROLLER_PATH, codecs.encode_controller(100, extra={"endpoint": silent_controller}))
    zk.ensure_path(paths.broker_id_path(1).rsplit("/", 1)[0])
    proxy = FaultProxy(zk_server.host, zk_server.port).start()
    broker_zk = KazooClient(hosts=f"127.0.0.1:{proxy.port}{chroot}", timeout=6.0)
    broker_zk.start(timeout=15)
    try:
        registrar = BrokerRegistrar(
            broker_zk,
            ZkStore(broker_zk),
            BrokerRegistration(id=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 1),)),
            on_epoch=lambda _: None,
        )
        registrar.register()
        client = ControllerClient(broker_zk, timeout_s=1.0)
        client.start()
        wait_for(lambda: client.controller_id == 100, timeout=10)
        proxy.set_mode("blackhole")
        wait_for(lambda: broker_zk.state != KazooState.CONNECTED, timeout=15)

        def shut_down() -> None:
            for _ in range(3):  # the broker's controlled.shutdown.max.retries
                with pytest.raises(ControllerUnavailableError):
                    client.controlled_shutdown(ControlledShutdownRequest(1, 0))
            registrar.deregister()

        started = time.monotonic()
        worker = threading.Thread(target=shut_down, daemon=True)
        worker.start()
        worker.join(20)
        assert not worker.is_alive(), "the controlled shutdown hung on ZooKeeper"
        assert time.monotonic() - started < 3 * 1.0 + 5.0  # three request timeouts, and slack
    finally:
        proxy.stop()
        broker_zk.stop()
        broker_zk.close()


def test_a_broker_stops_its_zookeeper_client_promptly_when_zookeeper_is_unreachable(
    zk_server: ZooKeeperServer, zk_chroot: str, zk: KazooClient
) -> None:
    """F12, ZooKeeper-down variant: after its bounded shutdown attempts the broker exited up to ~2 s
    late, close to the scenario's bound. kazoo's ``stop()`` waits for its connection thread, which was
    inside a connect attempt to a server that accepts the TCP connection and never answers (here: a
    blackholed proxy, up to the 6 s session timeout per attempt). With no reachable server there is
    no session to close, so ``stop_client`` waits at most ``unreachable_wait_s``."""
    chroot = zk_chroot[zk_chroot.index("/") :]
    proxy = FaultProxy(zk_server.host, zk_server.port).start()
    client = KazooClient(hosts=f"127.0.0.1:{proxy.port}{chroot}", timeout=6.0)
    client.start(timeout=15)
    try:
        connections = proxy.stats.accepted
        proxy.set_mode("blackhole")
        wait_for(lambda: client.state != KazooState.CONNECTED, timeout=15)
        # kazoo is in a reconnect attempt that waits for an answer once the proxy accepted its new
        # connection (a blackholed proxy accepts and never answers).
        wait_for(lambda: proxy.stats.accepted > connections, timeout=15)
        started = time.monotonic()
        finished = stop_client(client, unreachable_wait_s=0.5)
        took = time.monotonic() - started
        assert not finished  # kazoo's own stop is still waiting for its connection thread
        assert took < 1.5, f"stopping the client took {took:.1f} s with ZooKeeper unreachable"
    finally:
        proxy.stop()


def test_stopping_a_connected_client_closes_its_session_at_once(zk_chroot: str, zk: KazooClient) -> None:
    """The bounded stop still ends a reachable session cleanly: its ephemeral znodes go at once."""
    client = KazooClient(hosts=zk_chroot, timeout=6.0)
    client.start(timeout=15)
    client.create("/stop-client-ephemeral", b"", ephemeral=True)
    assert stop_client(client) is True
    assert zk.exists("/stop-client-ephemeral") is None
