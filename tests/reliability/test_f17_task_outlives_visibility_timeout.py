"""F17: an admin task outlives the broker's visibility timeout (reliability plan §6c).

Real processes, as in F16: a Celery worker (prefork, two children, ``acks_late`` as in production) on
its own Redis database and SQLite file, the project's controller, broker registrations in ZooKeeper.
The worker's Redis transport runs with ``visibility_timeout`` shortened to 2 s (and its restore sweep
every second), so while the first copy of a preferred election waits for a controller that is not
running yet, the transport hands the same task to the second child: two copies at the same time.

Pass: the second copy finds the first one's run lease live and renewed, leaves the action alone and
notes the duplicate delivery (``Action.deliveries``); nobody takes the lease over. The first copy has
been running for more than twice the visibility timeout when the controller starts. The action ends
*succeeded* with ``attempts >= 2``; the controller received every partition in exactly one request (no
batch written twice: S5 "applied at most once"); every preferred replica leads; the lease is released.
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
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest
from kazoo.client import KazooClient

from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from scripts.devservices import REPO_ROOT
from tests.integration.test_controller_zk import Candidates, FakeBrokers
from tests.support.zk import wait_for
from workers.action_lease import HEARTBEAT_S, LEASE_S

pytestmark = pytest.mark.slow

TOPIC: Final = "orders"
#: partition -> replicas; the state znodes start with the *second* replica leading.
ASSIGNMENT: Final = {p: [1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3] for p in range(6)}
VISIBILITY_TIMEOUT_S: Final = 2

#: The worker: the project's Celery app with the Redis transport's visibility timeout shortened and its
#: restore sweep run every second (kombu's defaults scan every 100 s), then ``celery worker`` argv.
WORKER: Final = f"""
import sys
from dashboard.celery import app
app.conf.broker_transport_options = {{
    "visibility_timeout": {VISIBILITY_TIMEOUT_S}, "unacked_restore_interval": 1, "unacked_restore_throttle": 1,
}}
app.worker_main(sys.argv[1:])
"""


def _manage(env: dict[str, str], *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "manage.py", *args], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def _action(db: Path, pk: int) -> dict[str, Any]:
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


def _duplicates(db: Path, pk: int) -> list[dict[str, Any]]:
    return [d for d in _action(db, pk)["deliveries"] if str(d["what"]).startswith("duplicate")]


def _eventually(predicate: Callable[[], bool], timeout: float) -> bool:
    """Whether ``predicate`` became true within ``timeout`` (unlike ``wait_for``, not an error when not)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


def _env(tmp_path: Path, redis_db_url: str, zk_chroot: str) -> dict[str, str]:
    return {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": redis_db_url,
        "CELERY_BROKER_URL": redis_db_url,
        "CELERY_RESULT_BACKEND": redis_db_url,
        "ZOOKEEPER_CONNECT": zk_chroot,
        "WORKER_ROLES": "",
        "PYTHONUNBUFFERED": "1",
    }


def _seed_cluster(zk: KazooClient) -> None:
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


def _queued_action(env: dict[str, str], zk_chroot: str) -> int:
    _manage(env, "migrate", "--noinput", "-v", "0")
    _manage(env, "ensure_cluster", "--name", "f17", "--zookeeper", zk_chroot, "--mode", "managed")
    rows = [{"topic": TOPIC, "partition": p, "preferred": reps[0], "leader": reps[1]} for p, reps in ASSIGNMENT.items()]
    out = _manage(
        env,
        "shell",
        "-c",
        "from dashboard.actions.models import Action; "
        f"a = Action.objects.create(username='otto', cluster='f17', kind='preferred_election', "
        f"status='queued', preview={{'electable': {rows!r}}}); print('action', a.pk)",
    )
    return int(out.split("action ")[-1].split()[0])


@pytest.mark.parametrize("run", range(2))
def test_f17_task_outliving_the_visibility_timeout_has_one_effect(
    run: int, zk_chroot: str, redis_url: str, tmp_path: Path
) -> None:
    base, _, _ = redis_url.rpartition("/")
    private_redis = f"{base}/{11 + run}"  # its own Celery queue (F16 uses 9 and 10)
    db = tmp_path / "db.sqlite3"
    env = _env(tmp_path, private_redis, zk_chroot)
    import redis

    redis.Redis.from_url(private_redis).flushdb()
    zk = KazooClient(hosts=zk_chroot, timeout=10.0)
    zk.start(timeout=15)
    brokers = FakeBrokers(zk_chroot)
    candidates = Candidates(zk_chroot)
    worker: subprocess.Popen[bytes] | None = None
    log_path = tmp_path / "worker.log"
    try:
        for b in (1, 2, 3):
            brokers.start(b)
        _seed_cluster(zk)
        pk = _queued_action(env, zk_chroot)
        worker = subprocess.Popen(
            [
                *(sys.executable, "-c", WORKER, "worker", "-c", "2", "-l", "INFO"),
                *("--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"f17-{run}-{os.getpid()}@%h"),
            ],
            env=env,
            cwd=REPO_ROOT,
            stdout=log_path.open("wb"),
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
        # The first batch is written and the first copy waits for a controller.
        wait_for(lambda: zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is not None, timeout=60, what="batch 1")
        wait_for(lambda: _action(db, pk)["outcome"].get("journal", {}).get("submitted"), timeout=30)
        first_started = time.monotonic()
        # The transport redelivers it after the visibility timeout. With the lease, the second copy waits
        # about one lease period for the first one's lease, which keeps being renewed, then leaves the
        # action alone; the controller starts only then (without a lease both copies would be waiting).
        wait_for(lambda: _action(db, pk)["attempts"] >= 2, timeout=30, what="the task redelivered")
        _eventually(lambda: bool(_duplicates(db, pk)), timeout=LEASE_S + HEARTBEAT_S + 10)
        running_for = time.monotonic() - first_started
        assert running_for >= 2 * VISIBILITY_TIMEOUT_S, running_for
        assert _action(db, pk)["status"] == "running"

        candidates.start(100)
        wait_for(lambda: _action(db, pk)["status"] not in ("queued", "running"), timeout=90, what="the action ends")
        final = _action(db, pk)
        log = log_path.read_text(errors="replace")
        assert final["status"] == "succeeded" and final["attempts"] >= 2, (final, log[-3000:])
        requests = [r for r in candidates.sinks[100].records if r["kind"] == "preferred_election_request"]
        requested = Counter(str(tp) for r in requests for tp in r.get("results") or {})
        assert requested == Counter(f"{TOPIC}-{p}" for p in ASSIGNMENT), requests
        for p, reps in ASSIGNMENT.items():
            data, stat = zk.get(paths.partition_state_path(TopicPartition(TOPIC, p)))
            assert codecs.decode_partition_state(data, stat.version).leader_and_isr.leader == reps[0]

        # The run lease: one holder all along, the duplicate noted against it, released at the end.
        holder = final["deliveries"][0]
        assert holder["what"] == "claimed", final["deliveries"]
        assert {d["holder"] for d in _duplicates(db, pk)} == {holder["owner"]}, final["deliveries"]
        assert not [d for d in final["deliveries"] if "took over" in d["what"]], final["deliveries"]
        assert final["lease_owner"] == "", final
        assert final["outcome"]["journal"].get("resumed_batches") is None, final["outcome"]["journal"]
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGKILL)
            worker.wait(10)
        candidates.stop_all()
        brokers.stop_all()
        zk.stop()
        zk.close()
