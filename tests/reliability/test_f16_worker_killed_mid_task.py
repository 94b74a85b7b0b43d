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

import os
import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from controller_core.model import TopicPartition
from controller_core.zk import codecs, paths
from tests.reliability.celery_rig import (
    ASSIGNMENT,
    RUNS,
    TOPIC,
    action_row,
    database,
    fresh_redis_db,
    queued_election,
    running_worker,
    seeded_cluster,
    worker_command,
    worker_env,
)
from tests.support.zk import wait_for

pytestmark = pytest.mark.slow


def _children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in path.read_text().split()] if path.exists() else []


@pytest.mark.parametrize("run", range(RUNS))
def test_f16_worker_killed_mid_task_has_one_effect(
    run: int,
    zk_chroot: str,
    redis_url: str,
    tmp_path: Path,
    migrated_db_template: Path,
    record_property: Callable[[str, object], None],
) -> None:
    private_redis = fresh_redis_db(redis_url, 9 + run % 2)  # its own Celery queue, whatever else shares the server
    db = database(tmp_path)
    env = worker_env(tmp_path, private_redis, zk_chroot)
    log_path = tmp_path / "worker.log"
    with seeded_cluster(zk_chroot) as (zk, candidates):
        pk = queued_election(env, zk_chroot, cluster="f16", template=migrated_db_template)
        with running_worker(
            env, worker_command(), concurrency=1, name=f"f16-{run}-{os.getpid()}@%h", log=log_path
        ) as worker:
            # The first batch is written and the task waits for a controller: kill the child there.
            wait_for(lambda: zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is not None, timeout=60, what="batch 1")
            wait_for(lambda: action_row(db, pk)["outcome"].get("journal", {}).get("submitted"), timeout=30)
            (child,) = _children(worker.pid)
            os.kill(child, signal.SIGKILL)
            wait_for(
                lambda: action_row(db, pk)["attempts"] == 2, timeout=60, what="the task redelivered to a new child"
            )
            assert action_row(db, pk)["status"] == "running"

            candidates.start(100)
            controller_started = time.monotonic()
            wait_for(
                lambda: action_row(db, pk)["status"] not in ("queued", "running"), timeout=90, what="the action ends"
            )
            record_property("recovery_s", round(time.monotonic() - controller_started, 3))  # for scripts/soak
            final = action_row(db, pk)
            log = log_path.read_text(errors="replace")
            assert (final["status"], final["attempts"]) == ("succeeded", 2), log[-3000:]

            requests = [r for r in candidates.sinks[100].records if r["kind"] == "preferred_election_request"]
            requested = Counter(str(tp) for r in requests for tp in r.get("results") or {})
            assert requested == Counter(f"{TOPIC}-{p}" for p in ASSIGNMENT), requests
            for p, reps in ASSIGNMENT.items():
                data, stat = zk.get(paths.partition_state_path(TopicPartition(TOPIC, p)))
                assert codecs.decode_partition_state(data, stat.version).leader_and_isr.leader == reps[0]
