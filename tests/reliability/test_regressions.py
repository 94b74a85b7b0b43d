"""Regression tests for the bugs the fault-injection scenarios found (one per bug, smallest setup)."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest
import redis
from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

from controller_core.config import ControllerConfig
from controller_core.runner import ControllerRunner
from controller_core.zk import codecs, paths
from tests.integration.mirror_helpers import counts, small_cluster, start_mirror, stop_mirror
from tests.support.zk import drop_connection, wait_for
from workers.mirror.testing import KafkaLayoutWriter

pytestmark = pytest.mark.integration


@pytest.fixture
def leftover_session(zk_chroot: str) -> Iterator[KazooClient]:
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    try:
        yield client
    finally:
        client.stop()
        client.close()


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
