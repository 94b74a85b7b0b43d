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

import os
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import pytest

from controller_core.model import TopicPartition
from controller_core.zk import codecs, paths
from tests.reliability.celery_rig import (
    ASSIGNMENT,
    HEARTBEAT_S,
    LEASE_S,
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

VISIBILITY_TIMEOUT_S: Final = 2

#: The worker's Redis transport: the visibility timeout shortened and its restore sweep run every second
#: (kombu's defaults scan every 100 s).
TRANSPORT: Final = {
    "visibility_timeout": VISIBILITY_TIMEOUT_S,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}


def _duplicates(db: Path, pk: int) -> list[dict[str, Any]]:
    return [d for d in action_row(db, pk)["deliveries"] if str(d["what"]).startswith("duplicate")]


def _eventually(predicate: Callable[[], bool], timeout: float) -> bool:
    """Whether ``predicate`` became true within ``timeout`` (unlike ``wait_for``, not an error when not)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.parametrize("run", range(RUNS))
def test_f17_task_outliving_the_visibility_timeout_has_one_effect(
    run: int,
    zk_chroot: str,
    redis_url: str,
    tmp_path: Path,
    migrated_db_template: Path,
    record_property: Callable[[str, object], None],
) -> None:
    private_redis = fresh_redis_db(redis_url, 11 + run % 2)  # its own Celery queue (F16 uses 9 and 10)
    db = database(tmp_path)
    env = worker_env(tmp_path, private_redis, zk_chroot)
    log_path = tmp_path / "worker.log"
    with seeded_cluster(zk_chroot) as (zk, candidates):
        pk = queued_election(env, zk_chroot, cluster="f17", template=migrated_db_template)
        with running_worker(
            env, worker_command(TRANSPORT), concurrency=2, name=f"f17-{run}-{os.getpid()}@%h", log=log_path
        ):
            # The first batch is written and the first copy waits for a controller.
            wait_for(lambda: zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is not None, timeout=60, what="batch 1")
            wait_for(lambda: action_row(db, pk)["outcome"].get("journal", {}).get("submitted"), timeout=30)
            first_started = time.monotonic()
            # The transport redelivers it after the visibility timeout. With the lease, the second copy waits
            # about one lease period for the first one's lease, which keeps being renewed, then leaves the
            # action alone; the controller starts only then (without a lease both copies would be waiting).
            wait_for(lambda: action_row(db, pk)["attempts"] >= 2, timeout=30, what="the task redelivered")
            _eventually(lambda: bool(_duplicates(db, pk)), timeout=LEASE_S + HEARTBEAT_S + 10)
            running_for = time.monotonic() - first_started
            assert running_for >= 2 * VISIBILITY_TIMEOUT_S, running_for
            assert action_row(db, pk)["status"] == "running"

            candidates.start(100)
            controller_started = time.monotonic()
            wait_for(
                lambda: action_row(db, pk)["status"] not in ("queued", "running"), timeout=90, what="the action ends"
            )
            record_property("recovery_s", round(time.monotonic() - controller_started, 3))  # for scripts/soak
            final = action_row(db, pk)
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
            # Released at the end. A copy redelivered once the action had finished may claim the free lease
            # for a moment (it then reads the final status, releases it and notes "left alone"): wait that
            # out, and check that whoever held it at the first read was such a copy, not the holder.
            assert _eventually(lambda: action_row(db, pk)["lease_owner"] == "", timeout=HEARTBEAT_S + 5), action_row(
                db, pk
            )
            if final["lease_owner"]:
                late = {"owner": final["lease_owner"], "what": "left alone: already succeeded"}
                assert late["owner"] != holder["owner"], final
                assert _eventually(
                    lambda: any(late.items() <= d.items() for d in action_row(db, pk)["deliveries"]),
                    timeout=HEARTBEAT_S + 5,
                ), action_row(db, pk)
            assert final["outcome"]["journal"].get("resumed_batches") is None, final["outcome"]["journal"]
