"""F16: a Celery worker's pool process is SIGKILLed in the middle of an admin task (reliability plan §6c).

Real processes: a Celery worker (prefork, one child, ``acks_late`` and ``reject_on_worker_lost`` as in
production) on its own Redis database and SQLite file, the project's controller, broker registrations
in ZooKeeper. The preferred-election task writes its first batch to ``/admin/preferred_replica_election``
and waits for a controller, which is not running yet; the child is killed there. Celery requeues the
task, a new child runs it again, and only then does a controller start.

Pass: the action ends *succeeded* with ``attempts == 2``; the controller received every partition in
exactly one request (no batch written twice: S5 "applied at most once"); every preferred replica leads.
Twice, as the rest of the fast tier.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from scripts.devservices import REPO_ROOT
from tests.integration.test_controller_zk import Candidates, FakeBrokers
from tests.support.zk import wait_for

pytestmark = pytest.mark.slow

TOPIC = "orders"
#: partition -> replicas; the state znodes start with the *second* replica leading.
ASSIGNMENT = {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(6)}


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _action(db: Path, pk: int) -> dict[str, Any]:
    with sqlite3.connect(db) as conn:
        status, attempts, outcome = conn.execute(
            "SELECT status, attempts, outcome FROM actions_action WHERE id = ?", (pk,)
        ).fetchone()
    return {"status": status, "attempts": attempts, "outcome": json.loads(outcome or "{}")}


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


@pytest.mark.parametrize("run", range(2))
def test_f16_worker_killed_mid_task_has_one_effect(run: int, zk_chroot: str, redis_url: str, tmp_path: Path) -> None:
    base, _, _ = redis_url.rpartition("/")
    private_redis = f"{base}/{9 + run}"  # its own Celery queue, whatever else shares the server
    db = tmp_path / "db.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{db}",
        "VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": private_redis,
        "CELERY_BROKER_URL": private_redis,
        "CELERY_RESULT_BACKEND": private_redis,
        "ZOOKEEPER_CONNECT": zk_chroot,
        "WORKER_ROLES": "",
        "PYTHONUNBUFFERED": "1",
    }
    import redis

    redis.Redis.from_url(private_redis).flushdb()
    zk = KazooClient(hosts=zk_chroot, timeout=10.0)
    zk.start(timeout=15)
    brokers = FakeBrokers(zk_chroot)
    candidates = Candidates(zk_chroot)
    worker: subprocess.Popen[bytes] | None = None
    try:
        for b in (1, 2, 3):
            brokers.start(b)
        store = ZkStore(zk)
        store.ensure_persistent_paths()
        epoch = store.register_controller_and_increment_epoch(999)
        store.create_topic(TOPIC, ASSIGNMENT)
        store.create_partition_states(
            {
                TopicPartition(TOPIC, p): LeaderIsrAndControllerEpoch(
                    LeaderAndIsr(reps[1], 0, tuple(reps)), epoch.epoch
                )
                for p, reps in ASSIGNMENT.items()
            },
            epoch.epoch_zk_version,
        )
        store.delete_controller(epoch.epoch_zk_version)

        _manage(env, "migrate", "--noinput", "-v", "0")
        _manage(env, "ensure_cluster", "--name", "f16", "--zookeeper", zk_chroot, "--mode", "managed")
        rows = [
            {"topic": TOPIC, "partition": p, "preferred": reps[0], "leader": reps[1]} for p, reps in ASSIGNMENT.items()
        ]
        out = _manage(
            env,
            "shell",
            "-c",
            "from dashboard.actions.models import Action; "
            f"a = Action.objects.create(username='otto', cluster='f16', kind='preferred_election', "
            f"status='queued', preview={{'electable': {rows!r}}}); print('action', a.pk)",
        )
        pk = int(out.split("action ")[-1].split()[0])
        worker = subprocess.Popen(
            [
                *(sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-c", "1", "-l", "INFO"),
                *("--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"f16-{run}-{os.getpid()}@%h"),
            ],
            env=env,
            cwd=REPO_ROOT,
            stdout=(tmp_path / "worker.log").open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _manage(
            env,
            "shell",
            "-c",
            "from dashboard.celery import app; "
            f"app.send_task('workers.actions.preferred_election', [{pk}], "
            f"kwargs={{'batch_size': 2, 'wait_s': 120, 'connect': {zk_chroot!r}}})",
        )
        # The first batch is written and the task waits for a controller: kill the child there.
        wait_for(lambda: zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is not None, timeout=60, what="batch 1")
        wait_for(lambda: _action(db, pk)["outcome"].get("journal", {}).get("submitted"), timeout=30)
        (child,) = _children(worker.pid)
        os.kill(child, signal.SIGKILL)
        wait_for(lambda: _action(db, pk)["attempts"] == 2, timeout=60, what="the task redelivered to a new child")
        assert _action(db, pk)["status"] == "running"

        candidates.start(100)
        wait_for(lambda: _action(db, pk)["status"] not in ("queued", "running"), timeout=90, what="the action ends")
        final = _action(db, pk)
        log = (tmp_path / "worker.log").read_text(errors="replace")
        assert (final["status"], final["attempts"]) == ("succeeded", 2), log[-3000:]

        requests = [r for r in candidates.sinks[100].records if r["kind"] == "preferred_election_request"]
        requested = Counter(str(tp) for r in requests for tp in r.get("results") or {})
        assert requested == Counter(f"{TOPIC}-{p}" for p in ASSIGNMENT), requests
        for p, reps in ASSIGNMENT.items():
            data, stat = zk.get(paths.partition_state_path(TopicPartition(TOPIC, p)))
            assert codecs.decode_partition_state(data, stat.version).leader_and_isr.leader == reps[0]
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
        candidates.stop_all()
        brokers.stop_all()
        zk.stop()
        zk.close()
        time.sleep(0)
