"""A private live stack for the web-side benchmarks: ZooKeeper, Redis, a Kafka-layout cluster, web, mirror.

Why here: ``scripts/bench_viewers.py`` needs what ``scripts/bench_live.py`` builds (a cluster of
100,000 partitions in Kafka's layout, a database with users, daphne and ``run_mirror`` as
subprocesses) and, besides, several web processes behind one address, started the way
``scripts/web_processes.py`` starts them (a ``SO_REUSEPORT`` listening socket each).

    with LiveRig(partitions=100_000, topics=100, failover=20_000, mode="managed") as rig:
        rig.start_web(processes=2)
        rig.start_mirror()
        rig.wait_synced()
        ...  # rig.base_url, rig.writer, rig.redis, rig.failing
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import redis
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from scripts.devservices import REPO_ROOT, ServiceSet, free_port
from scripts.support.django_manage import manage
from scripts.support.kafka_layout import KafkaLayoutWriter
from scripts.web_processes import bind_shared, spawn
from workers.local_processes import terminate_all

BROKERS = (1, 2, 3, 4, 5, 6)
CONTROLLER_EPOCH = 7
PASSWORD = "bench-password-1"


def build_assignment(partitions: int, topics: int, failover: int) -> dict[str, dict[int, list[int]]]:
    """RF 3 over six brokers; the first ``failover`` partitions (round-robin over topics) led by broker 1."""
    per_topic = partitions // topics
    assignment: dict[str, dict[int, list[int]]] = {f"bench-{t:04d}": {} for t in range(topics)}
    names = list(assignment)
    others = [b for b in BROKERS if b != 1]
    for i in range(per_topic * topics):
        topic, p = names[i % topics], i // topics
        if i < failover:
            replicas = [1, others[i % 5], others[(i + 2) % 5]]
        else:
            lead = others[i % 5]
            rest = [b for b in BROKERS if b != lead]
            replicas = [lead, rest[i % 5], rest[(i + 3) % 5]]
        assignment[topic][p] = replicas
    return assignment


class LiveRig:
    """Services, cluster, database and processes of one benchmark run; everything goes on ``close``."""

    def __init__(
        self,
        *,
        partitions: int,
        topics: int,
        failover: int,
        batch: int = 2000,
        mode: str = "managed",
        keep: bool = False,
        db_template: Path | None = None,
    ) -> None:
        self.mode = mode
        self.keep = keep
        self.batch = batch
        self.tmp = Path(tempfile.mkdtemp(prefix=f"bench-{mode}-"))
        self.logs = self.tmp / "logs"
        self.logs.mkdir()
        self.services = ServiceSet(base_dir=self.tmp / "services", zk_port=free_port(), redis_port=free_port())
        self.web: list[subprocess.Popen[bytes]] = []
        self.mirror: subprocess.Popen[bytes] | None = None
        self._sockets: list[socket.socket] = []
        self.services.up()
        root = KazooClient(hosts=self.services.zookeeper.connect_string, timeout=30.0)
        root.start(timeout=30)
        root.ensure_path("/bench")
        root.stop()
        root.close()
        self.connect = self.services.zookeeper.connect_string + "/bench"
        self.zk = KazooClient(hosts=self.connect, timeout=30.0)
        self.zk.start(timeout=30)
        self.redis = redis.Redis.from_url(self.services.redis.url)
        self.writer = KafkaLayoutWriter(self.zk, batch=batch)
        self.writer.ensure_layout()
        for b in BROKERS:
            self.writer.register_broker(b, port=9090 + b, rack=f"rack-{b % 3}", ephemeral=False)
        self.writer.elect_controller(2, CONTROLLER_EPOCH)
        self.assignment = build_assignment(partitions, topics, failover)
        self.writer.create_topics_bulk(self.assignment)
        self.initial = {TopicPartition(t, p): (r[0], 0, r) for t, ps in self.assignment.items() for p, r in ps.items()}
        self.writer.write_states(self.initial, CONTROLLER_EPOCH)
        self.total = len(self.initial)
        self.failing = [tp for tp, (leader, _e, _i) in self.initial.items() if leader == 1]
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "dashboard.settings",
            "DATABASE_URL": f"sqlite:///{self.tmp / 'db.sqlite3'}",
            "VAR_DIR": str(self.tmp / "var"),
            "REDIS_URL": self.services.redis.url,
            "ZOOKEEPER_CONNECT": self.connect,
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
            "PYTHONUNBUFFERED": "1",
            "LOG_LEVEL": "WARNING",
        }
        if db_template is not None:
            # A byte copy of a migrated SQLite file is the same migrated database (``migrate_into``).
            shutil.copyfile(db_template, self.tmp / "db.sqlite3")
        else:
            self.manage("migrate", "--noinput", "-v", "0")
        self.port = 0

    # -- processes ------------------------------------------------------------------------------
    def manage(self, *args: str) -> None:
        manage(self.env, *args)

    def create_users(self, count: int) -> list[str]:
        """Register the cluster (``ensure_cluster``, the real command) and ``count`` users, in one process."""
        names = [f"viewer{i}" for i in range(count)]
        self.manage(
            "shell",
            "-c",
            "from django.core.management import call_command\n"
            "from django.contrib.auth.models import User\n"
            f"call_command('ensure_cluster', name='bench', zookeeper={self.connect!r}, mode={self.mode!r})\n"
            f"for n in {names!r}: User.objects.create_user(n, password={PASSWORD!r})",
        )
        return names

    def start_web(self, processes: int = 1) -> None:
        """``processes`` daphnes on one address (``scripts/web_processes.py``: a socket each)."""
        self._sockets = bind_shared("127.0.0.1", 0, processes)
        self.port = self._sockets[0].getsockname()[1]
        for i, sock in enumerate(self._sockets):
            self.web.append(spawn(sock, self.env, self.logs / f"web-{i}.log"))

    def connections(self) -> list[int]:
        """Established connections each web process holds on the shared port (Linux ``/proc``)."""
        return [established_on(p.pid, self.port) for p in self.web]

    def start_mirror(self, wrapper: Path | None = None) -> None:
        """``run_mirror``; ``wrapper``: run it as ``python WRAPPER manage.py ...`` (a profiler)."""
        prefix = [str(wrapper.resolve())] if wrapper is not None else []
        self.mirror = subprocess.Popen(
            [sys.executable, *prefix, "manage.py", "run_mirror", "--cluster", "bench"],
            env={**self.env, "LOG_LEVEL": "INFO"},
            cwd=REPO_ROOT,
            stdout=(self.logs / "mirror.log").open("wb"),
            stderr=subprocess.STDOUT,
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def count(self, key: str) -> int:
        return int(self.redis.hget("kcp:bench:m:counts", key) or 0)

    def wait_synced(self, timeout: float = 600.0) -> None:
        """Until the mirror's snapshot holds every partition online."""
        deadline = time.monotonic() + timeout
        while self.count("p:OnlinePartition") < self.total:
            if time.monotonic() > deadline:
                raise RuntimeError(f"the mirror did not sync {self.total} partitions in {timeout:.0f} s")
            if self.mirror is not None and self.mirror.poll() is not None:
                raise RuntimeError(f"the mirror exited ({self.mirror.returncode}); see {self.logs / 'mirror.log'}")
            time.sleep(0.2)

    def web_ready(self, timeout: float = 60.0) -> None:
        import urllib.request

        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.base_url + "/accounts/login/", timeout=5) as answer:
                    answer.read()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the web process did not answer; see {self.logs}") from None
                time.sleep(0.2)

    # -- teardown -------------------------------------------------------------------------------
    def close(self) -> None:
        terminate_all([*self.web, *([self.mirror] if self.mirror is not None else [])], timeout=15)
        for sock in self._sockets:
            sock.close()
        try:
            self.zk.stop()
            self.zk.close()
        except Exception:
            pass
        self.redis.close()
        self.services.down()
        if self.keep:
            print(f"kept {self.tmp}", flush=True)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def __enter__(self) -> LiveRig:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def migrate_into(directory: Path) -> Path:
    """``manage.py migrate`` into ``directory/db.sqlite3``; the file, for ``LiveRig(db_template=...)``.

    Why: migrating is a Django start-up plus every migration (3-5 s here); a benchmark that builds
    several stacks (both modes, several viewer counts) migrates once and copies the file.
    """
    db = directory / "db.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{db}",
        "VAR_DIR": str(directory / "var"),
    }
    manage(env, "migrate", "--noinput", "-v", "0")
    return db


def process_rss_bytes(pid: int) -> int:
    """Resident set size of a process (Linux ``/proc``); 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return 0
    return 0


def as_json_ready(value: Any) -> Any:
    """Round floats (to the millisecond for seconds) for a readable JSON summary."""
    if isinstance(value, float):
        return round(value, 3)
    if isinstance(value, dict):
        return {k: as_json_ready(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_json_ready(v) for v in value]
    return value


def established_on(pid: int, port: int) -> int:
    """How many established TCP connections with local ``port`` the process ``pid`` holds."""
    inodes: set[str] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "01":  # 01: ESTABLISHED
                inodes.add(fields[9])
    held = 0
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in inodes:
                held += 1
    except OSError:
        return 0
    return held
