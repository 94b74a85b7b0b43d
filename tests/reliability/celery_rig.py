"""The rig of the Celery-worker fault tests (F16, F17): a preferred election queued for a real worker.

What the tests share: the environment of the ``manage.py`` and worker subprocesses (their own Redis
database and SQLite file), a topic whose partitions are all led by their *second* replica, with three
broker registrations and no controller yet, the queued preferred-election ``Action`` that fixes it
with the ``send_task`` that hands it to the worker, the worker process, and the action row as the
worker left it. What each test does to the worker, and what it checks, stays in the test.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final, TypedDict

import redis
from kazoo.client import KazooClient

from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.zk.store import ZkStore
from scripts.devservices import REPO_ROOT
from tests.support.controllers import Candidates, FakeBrokers
from tests.support.dashboard_db import install_migrated
from tests.support.processes import manage

TOPIC: Final = "orders"
#: partition -> replicas; the state znodes start with the *second* replica leading.
ASSIGNMENT: Final = {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(6)}
BROKERS: Final = (1, 2, 3)

#: The run lease of the rig's workers (workers/action_lease.py: production holds it 10 s, renewed every
#: 2 s). A copy waits up to one lease period for another's lease, so the rig shortens both, keeping the
#: same ratio of five heartbeats per lease: the same claims, take-overs and renewals in less waiting.
LEASE_S: Final = 4.0
HEARTBEAT_S: Final = 0.8


def worker_command(transport_options: Mapping[str, float] | None = None) -> tuple[str, ...]:
    """``celery worker`` of the project's app with the rig's lease (and Redis ``transport_options``,
    e.g. a shortened visibility timeout); the argv up to the worker options."""
    return (
        sys.executable,
        "-c",
        "import sys\n"
        "from django.conf import settings\n"
        "from dashboard.celery import app\n"
        f"settings.ACTION_LEASE_S = {LEASE_S!r}\n"
        f"settings.ACTION_LEASE_HEARTBEAT_S = {HEARTBEAT_S!r}\n"
        + (f"app.conf.broker_transport_options = {dict(transport_options)!r}\n" if transport_options else "")
        + "app.worker_main(sys.argv[1:])\n",
        "worker",
    )


#: Runs of each Celery fault test: 2 in the per-PR tier; the plan's pass figure is 20/20
#: (``RELIABILITY_RUNS=20 scripts/test tests/reliability/test_f16* tests/reliability/test_f17*``).
RUNS: Final = int(os.environ.get("RELIABILITY_RUNS", "2"))


class ActionRow(TypedDict):
    status: str
    attempts: int
    outcome: dict[str, Any]
    deliveries: list[dict[str, Any]]
    lease_owner: str


def fresh_redis_db(redis_url: str, db: int) -> str:
    """The URL of database ``db`` on ``redis_url``'s server, emptied: a Celery queue of the test's own."""
    base, _, _ = redis_url.rpartition("/")
    url = f"{base}/{db}"
    redis.Redis.from_url(url).flushdb()
    return url


def database(tmp_path: Path) -> Path:
    """The SQLite file of :func:`worker_env`."""
    return tmp_path / "db.sqlite3"


def worker_env(tmp_path: Path, redis_db_url: str, zk_chroot: str) -> dict[str, str]:
    """The environment of the dashboard and worker subprocesses: SQLite in ``tmp_path``, queue on ``redis_db_url``."""
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{database(tmp_path)}",
        "VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": redis_db_url,
        "CELERY_BROKER_URL": redis_db_url,
        "CELERY_RESULT_BACKEND": redis_db_url,
        "ZOOKEEPER_CONNECT": zk_chroot,
        "WORKER_ROLES": "",
        "PYTHONUNBUFFERED": "1",
    }


def seed_cluster(zk: KazooClient) -> None:
    """The topic with every partition led by its second replica, and no controller yet."""
    store = ZkStore(zk)
    store.ensure_persistent_paths()
    epoch = store.register_controller_and_increment_epoch(999)
    store.create_topic(TOPIC, ASSIGNMENT)
    store.create_partition_states(
        {
            TopicPartition(TOPIC, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(reps[1], 0, tuple(reps)), epoch.epoch)
            for p, reps in ASSIGNMENT.items()
        },
        epoch.epoch_zk_version,
    )
    store.delete_controller(epoch.epoch_zk_version)


@contextmanager
def seeded_cluster(zk_chroot: str) -> Iterator[tuple[KazooClient, Candidates]]:
    """A ZooKeeper client, the brokers registered and :func:`seed_cluster`; controller candidates to start.

    On exit the candidates and brokers are stopped and the client closed.
    """
    zk = KazooClient(hosts=zk_chroot, timeout=10.0)
    zk.start(timeout=15)
    brokers = FakeBrokers(zk_chroot)
    candidates = Candidates(zk_chroot)
    try:
        for b in BROKERS:
            brokers.start(b)
        seed_cluster(zk)
        yield zk, candidates
    finally:
        candidates.stop_all()
        brokers.stop_all()
        zk.stop()
        zk.close()


def queued_election(env: dict[str, str], zk_chroot: str, cluster: str, template: Path) -> int:
    """The migrated ``template`` as the database, ``cluster`` registered (managed), a preferred election of
    every partition queued and its task sent; the action's pk.

    One ``manage.py`` process does all three (each process is a Django start, seconds under load); the
    cluster is registered by the real ``ensure_cluster`` command through ``call_command``. The task waits
    in the test's own Redis queue until the worker comes up and takes it, as after a worker restart.
    """
    install_migrated(template, env)
    rows = [{"topic": TOPIC, "partition": p, "preferred": reps[0], "leader": reps[1]} for p, reps in ASSIGNMENT.items()]
    out = manage(
        env,
        "shell",
        "-c",
        "from django.core.management import call_command; "
        "from dashboard.audit.models import Action; "
        "from dashboard.celery import app; "
        f"call_command('ensure_cluster', '--name', {cluster!r}, '--zookeeper', {zk_chroot!r}, '--mode', 'managed'); "
        f"a = Action.objects.create(username='otto', cluster={cluster!r}, kind='preferred_election', "
        f"status='queued', preview={{'electable': {rows!r}}}); "
        # Batches of 2, each waiting up to 120 s for a controller.
        "app.send_task('workers.actions.preferred_election', [a.pk], "
        f"kwargs={{'batch_size': 2, 'wait_s': 120, 'connect': {zk_chroot!r}}}); print('action', a.pk)",
    )
    return int(out.split("action ")[-1].split()[0])


@contextmanager
def running_worker(
    env: dict[str, str], command: Sequence[str], *, concurrency: int, name: str, log: Path
) -> Iterator[subprocess.Popen[bytes]]:
    """``command`` (a ``celery worker`` argv, e.g. :func:`worker_command`) with ``concurrency`` pool children.

    Logs to ``log``; runs in a session of its own, SIGKILLed as a group on exit.
    """
    worker = subprocess.Popen(
        [
            *command, *("-c", str(concurrency), "-l", "INFO"),
            *("--without-gossip", "--without-mingle", "--without-heartbeat", "-n", name),
        ],
        env=env,
        cwd=REPO_ROOT,
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    try:
        yield worker
    finally:
        os.killpg(worker.pid, signal.SIGKILL)
        worker.wait(10)


def action_row(db: Path, pk: int) -> ActionRow:
    """Action ``pk`` as the worker left it in ``db``."""
    with sqlite3.connect(db, timeout=10) as conn:
        status, attempts, outcome, deliveries, owner = conn.execute(
            "SELECT status, attempts, outcome, deliveries, lease_owner FROM actions_action WHERE id = ?", (pk,)
        ).fetchone()
    return {
        "status": status,
        "attempts": attempts,
        "outcome": json.loads(outcome or "{}"),
        "deliveries": json.loads(deliveries or "[]"),
        "lease_owner": owner,
    }
