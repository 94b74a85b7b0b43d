"""Controller candidates hosted by real Celery workers (the ``controller`` role bootstep).

Two workers give one active controller and one hot standby; stopping the active worker hands
leadership to the standby with the next epoch. The active one publishes its status hash and its
state-change records to Redis (docs/contracts.md).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from controller_core.zk import codecs, paths
from scripts.devservices import REPO_ROOT
from tests.support.dashboard_db import install_migrated
from tests.support.processes import manage
from tests.support.snapshots import zk_write_stamps
from tests.support.zk import wait_for

pytestmark = pytest.mark.slow


class Workers:
    def __init__(self, connect: str, redis_url: str, tmp: Path, template: Path) -> None:
        self.connect = connect
        self.redis_url = redis_url
        self.tmp = tmp
        self.procs: dict[int, subprocess.Popen[bytes]] = {}
        self.env = dict(
            os.environ,
            WORKER_ROLES="controller",
            ZOOKEEPER_CONNECT=self.connect,
            ZOOKEEPER_SESSION_TIMEOUT_S="4",
            REDIS_URL=self.redis_url,
            STATE_CHANGE_LOG_DIR=str(self.tmp / "scl"),
            DATABASE_URL=f"sqlite:///{self.tmp / 'db.sqlite3'}",
            VAR_DIR=str(self.tmp / "var"),
        )
        # Workers host candidates for the registered managed clusters (workers.controller_fleet); the
        # database is a copy of the session's migrated template (tests/support/dashboard_db.py).
        install_migrated(template, self.env)
        manage(self.env, "ensure_cluster", "--name", "hosttest", "--zookeeper", connect, "--mode", "managed")

    def start(self, controller_id: int) -> subprocess.Popen[bytes]:
        env = dict(self.env, CONTROLLER_ID=str(controller_id))
        log = open(self.tmp / f"worker-{controller_id}.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-c", "1", "-n", f"c{controller_id}@%h"],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        self.procs[controller_id] = proc
        return proc

    def stop(self, controller_id: int, sig: int = signal.SIGTERM) -> None:
        proc = self.procs.pop(controller_id)
        proc.send_signal(sig)
        proc.wait(timeout=30)

    def stop_all(self) -> None:
        for cid in list(self.procs):
            self.stop(cid, signal.SIGKILL)


@pytest.fixture
def workers(zk_chroot: str, redis_url: str, tmp_path: Path, migrated_db_template: Path) -> Iterator[Workers]:
    w = Workers(zk_chroot, redis_url, tmp_path, migrated_db_template)
    try:
        yield w
    finally:
        w.stop_all()


def _controller_id(zk: KazooClient) -> int | None:
    try:
        return codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0]).broker_id
    except NoNodeError:  # between two controllers
        return None


def test_two_workers_give_one_active_controller_and_a_hot_standby(
    zk: KazooClient, redis_url: str, workers: Workers, tmp_path: Path
) -> None:
    workers.start(100)
    wait_for(lambda: _controller_id(zk) == 100, timeout=60, what="worker 100 elected")
    workers.start(101)
    conn = redis.Redis.from_url(redis_url, decode_responses=True)
    wait_for(lambda: conn.hget("kcp:hosttest:controller:101", "active") == "0", timeout=60, what="standby status")
    assert conn.hget("kcp:hosttest:controller:100", "active") == "1"
    assert conn.hget("kcp:hosttest:controller:100", "epoch") == "1"

    workers.stop(100)  # warm shutdown: resigns and deletes /controller
    wait_for(lambda: _controller_id(zk) == 101, timeout=30, what="standby takes over")
    assert int(zk.get(paths.CONTROLLER_EPOCH_PATH)[0]) == 2

    entries: list[tuple[str, dict[str, str]]] = conn.xrange("kcp:hosttest:state-changes")  # type: ignore[assignment]
    records = [json.loads(fields["r"]) for _, fields in entries]
    failovers = [(r["controller_id"], r["controller_epoch"]) for r in records if r["kind"] == "failover"]
    assert failovers == [(100, 1), (101, 2)]
    assert any(r["kind"] == "resignation" and r["controller_id"] == 100 for r in records)
    assert list((tmp_path / "scl" / "hosttest").glob("state-change-*.jsonl"))


def test_sigkill_of_the_active_controller_elects_the_standby_with_epoch_2(zk: KazooClient, workers: Workers) -> None:
    workers.start(100)
    wait_for(lambda: _controller_id(zk) == 100, timeout=60, what="worker 100 elected")
    workers.start(101)
    conn = redis.Redis.from_url(workers.redis_url, decode_responses=True)
    wait_for(lambda: conn.hget("kcp:hosttest:controller:101", "active") == "0", timeout=60, what="standby up")
    workers.stop(100, signal.SIGKILL)  # no resignation: the ephemeral goes with the session
    wait_for(lambda: _controller_id(zk) == 101, timeout=30, what="standby elected after the session expires")
    assert int(zk.get(paths.CONTROLLER_EPOCH_PATH)[0]) == 2


def test_a_paused_controller_whose_session_expired_cannot_act_and_resigns(
    zk: KazooClient, redis_url: str, workers: Workers, tmp_path: Path
) -> None:
    from controller_core.model import BrokerRegistration, EndPoint, TopicPartition
    from controller_core.zk.store import ZkStore

    broker_client = KazooClient(hosts=workers.connect, timeout=10.0)
    broker_client.start(timeout=10)
    registrations: list[KazooClient] = []
    try:
        store = ZkStore(broker_client)
        store.ensure_persistent_paths()
        for b in (1, 2):
            # Registrations only: requests to these brokers are refused, which the channel retries.
            c = KazooClient(hosts=workers.connect, timeout=30.0)
            c.start(timeout=10)
            registrations.append(c)
            ZkStore(c).register_broker(BrokerRegistration(b, (EndPoint("PLAINTEXT", "127.0.0.1", 1),)))
        store.create_topic("orders", {0: [1, 2], 1: [2, 1]})
        workers.start(100)
        state_path = paths.partition_state_path(TopicPartition("orders", 1))
        wait_for(lambda: zk.exists(state_path) is not None, timeout=60, what="controller 100 elects leaders")
        workers.start(101)
        conn = redis.Redis.from_url(redis_url, decode_responses=True)
        wait_for(lambda: conn.hget("kcp:hosttest:controller:101", "active") == "0", timeout=60, what="standby up")

        workers.procs[100].send_signal(signal.SIGSTOP)  # a long GC pause, as far as ZooKeeper can tell
        try:
            wait_for(lambda: _controller_id(zk) == 101, timeout=30, what="standby elected while 100 is paused")
            assert int(zk.get(paths.CONTROLLER_EPOCH_PATH)[0]) == 2
            # Change the cluster while the zombie sleeps: topic creation for the new controller to handle.
            store.create_topic("late", {0: [1, 2]})
            wait_for(lambda: zk.exists(paths.partition_state_path(TopicPartition("late", 0))) is not None, timeout=30)
            # Every state znode (and the election's znodes) as it is before the zombie wakes up.
            watched = [
                *(
                    paths.partition_state_path(TopicPartition(t, p))
                    for t, n in (("orders", 2), ("late", 1))
                    for p in range(n)
                ),
                paths.CONTROLLER_PATH,
                paths.CONTROLLER_EPOCH_PATH,
            ]
            before = zk_write_stamps(zk, watched)
        finally:
            workers.procs[100].send_signal(signal.SIGCONT)
        # The zombie wakes up with a dead session: it must resign, not act.
        wait_for(
            lambda: conn.hget("kcp:hosttest:controller:100", "active") == "0",
            timeout=30,
            what="the paused controller reports itself inactive",
        )
        assert _controller_id(zk) == 101
        entries: list[tuple[str, dict[str, str]]] = conn.xrange("kcp:hosttest:state-changes")  # type: ignore[assignment]
        records = [json.loads(f["r"]) for _, f in entries]
        after_pause = [r for r in records if r["controller_id"] == 100 and r["kind"] in ("election", "isr_change")]
        assert all(r["controller_epoch"] == 1 for r in after_pause)

        def zombie_resigned() -> bool:
            raw: list[tuple[str, dict[str, str]]] = conn.xrange("kcp:hosttest:state-changes")  # type: ignore[assignment]
            return any((r := json.loads(f["r"]))["kind"] == "resignation" and r["controller_id"] == 100 for _, f in raw)

        wait_for(zombie_resigned, timeout=30, what="the zombie records its resignation")
        # The zombie woke up, resigned and wrote nothing: no state znode, nor /controller or
        # /controller_epoch, has a new version or mzxid (its writes are fenced by /controller_epoch).
        assert zk_write_stamps(zk, watched) == before
        assert int(zk.get(paths.CONTROLLER_EPOCH_PATH)[0]) == 2
    finally:
        for c in registrations:
            c.stop()
            c.close()
        broker_client.stop()
        broker_client.close()


def test_removing_the_cluster_resigns_its_candidates_without_a_needless_election(
    zk: KazooClient, redis_url: str, workers: Workers
) -> None:
    workers.start(100)
    wait_for(lambda: _controller_id(zk) == 100, timeout=60, what="worker 100 elected")
    workers.start(101)
    conn = redis.Redis.from_url(redis_url, decode_responses=True)
    wait_for(lambda: conn.hget("kcp:hosttest:controller:101", "active") == "0", timeout=60, what="standby up")
    manage(
        workers.env,
        "shell",
        "-c",
        "from dashboard.clusters.models import Cluster; Cluster.objects.filter(name='hosttest').delete()",
    )
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is None, timeout=30, what="the active candidate resigned")
    wait_for(lambda: not conn.exists("kcp:hosttest:controller:101"), timeout=30, what="the standby stopped")
    time.sleep(2.0)  # a standby still running would have been elected by now
    assert zk.exists(paths.CONTROLLER_PATH) is None
    assert int(zk.get(paths.CONTROLLER_EPOCH_PATH)[0]) == 1  # no second election on the way out
    entries: list[tuple[str, dict[str, str]]] = conn.xrange("kcp:hosttest:state-changes")  # type: ignore[assignment]
    records = [json.loads(f["r"]) for _, f in entries]
    assert any(r["kind"] == "resignation" and r["controller_id"] == 100 for r in records)
