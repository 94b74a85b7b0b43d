"""Two clusters mirrored by one real Celery worker (issue #32): one cluster's full resync does not
stall the other's.

The worker (``WORKER_ROLES=mirror``) follows the registry and runs each cluster's mirror on threads
of its own. The big cluster's snapshot is taken from under it (its meta deleted, as a Redis flush
would), so its mirror re-reads every partition; meanwhile topics appear in the small cluster every
0.2 s and each must reach Redis quickly, and the small mirror's heartbeat must stay fresh.

Sizes: 20,000 partitions in the regular suite; the issue's 100,000 under the ``slow`` marker (the
resync alone takes several seconds there, the set-up longer).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest
import redis
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from dashboard.clusters import layout
from scripts.devservices import REPO_ROOT
from scripts.support.kafka_layout import KafkaLayoutWriter
from tests.integration.mirror_helpers import small_cluster
from tests.support.dashboard_db import install_migrated
from tests.support.processes import manage, terminate_all
from tests.support.zk import wait_for

BROKERS = (1, 2, 3, 4, 5, 6)


def big_cluster(zk: KazooClient, partitions: int, topics: int = 100) -> None:
    """``partitions`` partitions (RF 3 over six brokers) in ``topics`` topics, every one with a leader."""
    w = KafkaLayoutWriter(zk)
    w.ensure_layout()
    for b in BROKERS:
        w.register_broker(b, port=9200 + b, rack=f"r{b % 2}")
    w.elect_controller(1, 2)
    per_topic = partitions // topics
    assignment = {
        f"big-{t:03d}": {p: [BROKERS[(t + p + i) % 6] for i in range(3)] for p in range(per_topic)}
        for t in range(topics)
    }
    w.create_topics_bulk(assignment)
    w.write_states({TopicPartition(t, p): (r[0], 0, r) for t, parts in assignment.items() for p, r in parts.items()}, 2)


def drop_big_cluster(zk: KazooClient, batch: int = 2_000) -> None:
    """Delete the big layout's topics in multis, children first: the chroot fixture's recursive delete
    would take one round trip per znode (over a minute at 100,000 partitions)."""
    doomed: list[str] = []
    for topic in zk.get_children("/brokers/topics"):
        base = f"/brokers/topics/{topic}"
        parts = zk.get_children(base + "/partitions") if zk.exists(base + "/partitions") else []
        doomed += [f"{base}/partitions/{p}/state" for p in parts]
        doomed += [f"{base}/partitions/{p}" for p in parts]
        doomed += [f"{base}/partitions"] if zk.exists(base + "/partitions") else []
    doomed += [f"/brokers/topics/{t}" for t in zk.get_children("/brokers/topics")]
    for start in range(0, len(doomed), batch):
        tx = zk.transaction()
        for path in doomed[start : start + batch]:
            tx.delete(path)
        tx.commit()


@pytest.fixture
def worker_env(tmp_path: Path, redis_url: str, zk_chroot: str, migrated_db_template: Path) -> Iterator[dict[str, str]]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": redis_url,
        "ZOOKEEPER_CONNECT": zk_chroot,
        "HOSTING_POLL_S": "0.5",
        "MIRROR_WINDOW_MS": "100",
        "WORKER_ROLES": "mirror",
        "PYTHONUNBUFFERED": "1",
    }
    install_migrated(migrated_db_template, env)  # a copy of the session's migrated database
    yield env


@pytest.mark.parametrize(
    "partitions", [pytest.param(20_000, id="20k"), pytest.param(100_000, id="100k", marks=pytest.mark.slow)]
)
def test_a_big_resync_does_not_stall_another_cluster_in_the_same_worker(
    zk: KazooClient, zk_chroot: str, redis_url: str, worker_env: dict[str, str], tmp_path: Path, partitions: int
) -> None:
    zk.ensure_path("/big")
    zk.ensure_path("/small")
    big_zk = KazooClient(hosts=zk_chroot + "/big", timeout=10.0)
    small_zk = KazooClient(hosts=zk_chroot + "/small", timeout=10.0)
    big_zk.start(timeout=15)
    small_zk.start(timeout=15)
    rds = redis.Redis.from_url(redis_url, decode_responses=True)
    log = tmp_path / "worker.log"
    worker: subprocess.Popen[bytes] | None = None
    t0 = time.monotonic()
    try:
        big_cluster(big_zk, partitions)
        print(f"\nlayout written in {time.monotonic() - t0:.1f} s")
        small = small_cluster(small_zk)
        manage(worker_env, "ensure_cluster", "--name", "big", "--zookeeper", zk_chroot + "/big", "--mode", "observed")
        manage(
            worker_env, "ensure_cluster", "--name", "small", "--zookeeper", zk_chroot + "/small", "--mode", "observed"
        )
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "-l", "INFO", "-c", "1", "-n", "m1@%h"],
            env=worker_env,
            cwd=REPO_ROOT,
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
        )

        def count(cluster: str, name: str) -> int:
            return int(rds.hget(layout.counts_key(cluster), name) or 0)

        def small_has(topics: int) -> bool:
            return count("small", "topics") == topics

        wait_for(lambda: count("big", "partitions") == partitions, timeout=180, interval=0.2, what="big mirrored")
        wait_for(lambda: count("small", "partitions") == 4, timeout=30, what="small mirrored")
        print(f"both mirrored at {time.monotonic() - t0:.1f} s")
        wait_for(lambda: bool(rds.hget(layout.meta_key("big"), "gen")), timeout=10, what="big meta")
        owners = {rds.get(layout.lock_key(c)) for c in ("big", "small")}
        assert len(owners) == 1 and None not in owners  # one worker holds both
        old_gen = rds.hget(layout.meta_key("big"), "gen")
        time.sleep(2.0)  # let the big mirror's post-resync sweep settle

        rds.delete(layout.meta_key("big"))  # Redis lost the big snapshot: the big mirror resyncs
        lost_at = time.monotonic()
        latencies: list[float] = []
        heartbeat_ages: list[float] = []
        resynced_at: float | None = None
        topics = count("small", "topics")
        while resynced_at is None or time.monotonic() - resynced_at < 0.5:
            if time.monotonic() - lost_at > 240:
                raise AssertionError("the big resync did not finish within 240 s")
            topics += 1
            small.create_topic(f"late-{topics}", {0: [1, 2]})
            written = time.monotonic()
            wait_for(partial(small_has, topics), timeout=30, interval=0.01, what="small live")
            latencies.append(time.monotonic() - written)
            beat = int(rds.hget(layout.meta_key("small"), "heartbeat_at") or 0)
            heartbeat_ages.append(time.time() - beat / 1000.0)
            gen = rds.hget(layout.meta_key("big"), "gen")
            if resynced_at is None and gen and gen != old_gen:
                resynced_at = time.monotonic()
            time.sleep(0.2)
        resync_s = resynced_at - lost_at
        during = latencies[: max(1, len(latencies) - 2)]
        print(
            f"\n{partitions} partitions: big resync {resync_s:.1f} s; {len(latencies)} small-cluster topics meanwhile, "
            f"latency median {statistics.median(latencies) * 1000:.0f} ms, max {max(latencies) * 1000:.0f} ms; "
            f"small heartbeat age max {max(heartbeat_ages):.1f} s"
        )
        assert count("big", "partitions") == partitions
        assert len(during) >= 3, "the small cluster changed too few times during the resync to tell"
        # A mirror stalled behind the resync waits for the whole of it (7.4 s of 7.4 s when forced); one
        # beside it shares the CPU only. Relative to the resync, which the machine's load slows alike.
        assert max(latencies) < max(1.5, resync_s / 2), latencies
        assert max(heartbeat_ages) < 5.0, heartbeat_ages  # MIRROR_STALE_AFTER_S: its pages never read stale
    finally:
        if worker is not None:
            terminate_all([worker], timeout=20)
            if worker.returncode not in (0, None):
                print(log.read_text()[-4000:])
        rds.close()
        drop_big_cluster(big_zk)
        for client in (big_zk, small_zk):
            client.stop()
            client.close()
