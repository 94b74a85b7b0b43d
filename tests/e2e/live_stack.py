"""The live stack of the browser tests: daphne and ``run_mirror`` subprocesses on real ZooKeeper and Redis.

ZooKeeper holds a Kafka layout (brokers 1-3, controller 2 at epoch 5, topic ``orders`` as in
:data:`ASSIGNMENT`, every partition led by its preferred replica with the whole replica set in sync);
the dashboard has the cluster :data:`CLUSTER` (observed) and the user ``alice``. Test modules wrap
:func:`running_stack` in a ``stack`` fixture, with the leader epoch they seed and, to keep more state
on the stack, a :class:`Stack` subclass of their own.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import redis
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from dashboard.clusters import layout
from scripts.devservices import REPO_ROOT, free_port, port_open
from scripts.support.kafka_layout import KafkaLayoutWriter
from tests.support.dashboard_db import install_migrated, register_cluster_and_user
from tests.support.processes import terminate_all

CLUSTER: Final = "e2e"
PASSWORD: Final = "correct horse battery"
# Topic "orders": 6 partitions on brokers 1-3; broker 1 leads 0 and 3 alone in their ISR.
ASSIGNMENT: Final = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 3], 4: [2, 1], 5: [3, 2]}
#: The controller epoch of the seeded layout (and of every state a test writes).
CONTROLLER_EPOCH: Final = 5
#: How long the stack's processes may take to start and the mirror to write its first snapshot: a
#: wait for a condition, not a latency bound. With the suite's Spark jobs on both cores, daphne's and
#: ``run_mirror``'s start-up alone took 15-25 s (a page's 30 s wait for "live" once ran out in CI).
FIRST_SNAPSHOT_S: Final = 120.0


@dataclass
class Stack:
    url: str
    zk: KazooClient
    writer: KafkaLayoutWriter
    env: dict[str, str]
    web: subprocess.Popen[bytes]
    mirror: subprocess.Popen[bytes]
    logs: Path

    def start_mirror(self) -> None:
        """Start ``run_mirror`` for :data:`CLUSTER` (again, after a test stopped it), appending to its log."""
        self.mirror = start_mirror(self.env, self.logs)


S = TypeVar("S", bound=Stack)


def seed_layout(zk: KazooClient, leader_epoch: int) -> KafkaLayoutWriter:
    """Write the module docstring's layout, every partition state at ``leader_epoch``; the writer."""
    writer = KafkaLayoutWriter(zk)
    writer.ensure_layout()
    for broker in (1, 2, 3):
        writer.register_broker(broker, port=9090 + broker, rack=f"rack-{broker}")
    writer.elect_controller(2, CONTROLLER_EPOCH)
    writer.create_topic("orders", ASSIGNMENT, min_isr=2)
    writer.write_states(
        {TopicPartition("orders", p): (r[0], leader_epoch, r) for p, r in ASSIGNMENT.items()}, CONTROLLER_EPOCH
    )
    return writer


def stack_env(tmp_path: Path, redis_url: str, zk_chroot: str) -> dict[str, str]:
    """The environment of the stack's processes: SQLite and ``var`` in ``tmp_path``, a 100 ms mirror window."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": redis_url,
        "ZOOKEEPER_CONNECT": zk_chroot,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "MIRROR_WINDOW_MS": "100",
        "PYTHONUNBUFFERED": "1",
    }


def prepare_dashboard(env: dict[str, str], zk_chroot: str) -> None:
    """Register :data:`CLUSTER` (observed) and create the user ``alice``, in one ``manage.py`` process.

    The database is already migrated (a copy of the session's template, tests/support/dashboard_db.py);
    ``ensure_cluster`` runs as the real command, through ``call_command``.
    """
    register_cluster_and_user(
        env, cluster=CLUSTER, zookeeper=zk_chroot, mode="observed", user="alice", password=PASSWORD, group=None
    )


def start_web(env: dict[str, str], logs: Path, port: int) -> subprocess.Popen[bytes]:
    """daphne serving the dashboard on 127.0.0.1:``port``, logging to ``logs/web.log``."""
    return subprocess.Popen(
        [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "dashboard.asgi:application"],
        env=env,
        cwd=REPO_ROOT,
        stdout=(logs / "web.log").open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def start_mirror(env: dict[str, str], logs: Path) -> subprocess.Popen[bytes]:
    """``run_mirror`` for :data:`CLUSTER`, appending to ``logs/mirror.log``."""
    return subprocess.Popen(
        [sys.executable, "manage.py", "run_mirror", "--cluster", CLUSTER],
        env=env,
        cwd=REPO_ROOT,
        stdout=(logs / "mirror.log").open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def wait_for_first_snapshot(stack: Stack, redis_url: str, deadline: float) -> None:
    """Wait until the mirror has written a snapshot of :data:`CLUSTER` (its meta carries a generation).

    So a test's own waits start from a mirrored cluster: a page opened before the first snapshot
    shows "not mirrored yet", and its wait for "live" would also time the mirror's start-up.
    """
    client = redis.Redis.from_url(redis_url)
    try:
        while not client.hget(layout.meta_key(CLUSTER), "gen"):
            if time.monotonic() > deadline or stack.mirror.poll() is not None:
                raise AssertionError("the mirror wrote no snapshot:\n" + (stack.logs / "mirror.log").read_text())
            time.sleep(0.1)
    finally:
        client.close()


@contextmanager
def running_stack(
    zk_chroot: str, redis_url: str, tmp_path: Path, *, template: Path, leader_epoch: int, stack_type: type[S]
) -> Iterator[S]:
    """The seeded layout, the dashboard and its web and mirror processes, once daphne listens.

    The dashboard's database is a copy of the session's migrated ``template`` (the
    ``migrated_db_template`` fixture); daphne starts while the cluster and user are written, since
    nothing reads the database before the first request. ``stack_type`` is :class:`Stack` or a
    subclass whose own fields have defaults. On exit the web process is resumed if a test paused it,
    both processes (the stack's current mirror) terminated, killed after 10 s, and the ZooKeeper
    client closed.
    """
    zk = KazooClient(hosts=zk_chroot, timeout=10.0)
    zk.start(timeout=15)
    try:
        writer = seed_layout(zk, leader_epoch)
        port = free_port()
        env = stack_env(tmp_path, redis_url, zk_chroot)
        install_migrated(template, env)
        logs = tmp_path / "logs"
        logs.mkdir()
        web = start_web(env, logs, port)
        stack: S | None = None
        try:
            prepare_dashboard(env, zk_chroot)
            stack = stack_type(
                url=f"http://127.0.0.1:{port}",
                zk=zk,
                writer=writer,
                env=env,
                web=web,
                mirror=start_mirror(env, logs),
                logs=logs,
            )
            deadline = time.monotonic() + FIRST_SNAPSHOT_S
            while not port_open("127.0.0.1", port):
                if time.monotonic() > deadline or web.poll() is not None:
                    raise AssertionError("daphne did not start:\n" + (logs / "web.log").read_text())
                time.sleep(0.1)
            wait_for_first_snapshot(stack, redis_url, deadline)
            yield stack
        finally:
            if web.poll() is None:
                os.kill(web.pid, signal.SIGCONT)
            terminate_all([web] if stack is None else [web, stack.mirror])  # the stack's current mirror
    finally:
        zk.stop()
        zk.close()
