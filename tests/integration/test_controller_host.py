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
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from kazoo.client import KazooClient

from controller_core.zk import codecs, paths
from scripts.devservices import REPO_ROOT
from tests.support.zk import wait_for

pytestmark = pytest.mark.slow


class Workers:
    def __init__(self, connect: str, redis_url: str, tmp: Path) -> None:
        self.connect = connect
        self.redis_url = redis_url
        self.tmp = tmp
        self.procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self, controller_id: int) -> subprocess.Popen[bytes]:
        env = dict(
            os.environ,
            WORKER_ROLES="controller",
            CONTROLLER_ID=str(controller_id),
            CONTROLLER_CLUSTER="hosttest",
            ZOOKEEPER_CONNECT=self.connect,
            ZOOKEEPER_SESSION_TIMEOUT_S="4",
            REDIS_URL=self.redis_url,
            STATE_CHANGE_LOG_DIR=str(self.tmp / "scl"),
            DATABASE_URL=f"sqlite:///{self.tmp / 'db.sqlite3'}",
        )
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
def workers(zk_chroot: str, redis_url: str, tmp_path: Path) -> Iterator[Workers]:
    w = Workers(zk_chroot, redis_url, tmp_path)
    try:
        yield w
    finally:
        w.stop_all()


def _controller_id(zk: KazooClient) -> int | None:
    if zk.exists(paths.CONTROLLER_PATH) is None:
        return None
    return codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0]).broker_id


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
