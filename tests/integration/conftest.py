"""The Spark Connect server the analytics tests run against: the same kind of server the product uses.

One server for the whole test session, shared by every pytest-xdist worker: starting a JVM costs
15-40 s of a busy 2-core machine, and two of them would also hold two heaps. The first worker that
needs it starts it under a file lock in the session's temp root (shared by the workers), and every
worker that uses it registers its pid there; at its own end a worker unregisters, and the last one
(no live user left) stops the server. A worker that asks after that simply starts a new one. So no
Spark outlives the tests that needed it, and no test depends on which worker runs it (xdist groups
are not relied on). With ``TEST_REUSE_SERVICES=1`` the one ``scripts/services up`` runs is used.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from scripts.devservices import SparkConnectServer, default_service_set, free_port
from workers.analytics.session import build_spark
from workers.local_processes import pid_alive

SHARED_DIR = "spark-connect"


def _session_root(factory: pytest.TempPathFactory) -> Path:
    """The temp directory every worker of this session shares (xdist gives each a ``popen-gwN`` under it)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def _locked(root: Path, name: str = SHARED_DIR) -> Iterator[Path]:
    """``root/name``, held under an exclusive lock (other workers wait for it).

    Created only under the lock: a holder may remove and rebuild it (``shared_dir``), and a worker
    that created it before waiting made the holder's ``mkdir`` fail (seen once, FileExistsError)."""
    shared = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            shared.mkdir(exist_ok=True)
            yield shared
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


SharedDir = Callable[[str, Callable[[Path], None]], Path]


@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory: pytest.TempPathFactory) -> SharedDir:
    """``shared_dir(name, build)``: a directory built once per test session, whichever worker asks first.

    A module fixture runs once per xdist worker, so a history or a job run two workers both need
    would be computed twice; built here (under a lock, marked complete last) it is computed once
    and the other worker reads the same files. What is built must only be read afterwards.
    """
    root = _session_root(tmp_path_factory)

    def get(name: str, build: Callable[[Path], None]) -> Path:
        with _locked(root, f"shared-{name}") as directory:
            done = directory / ".complete"
            if not done.is_file():
                shutil.rmtree(directory)  # a build that failed half-way
                directory.mkdir()
                build(directory)
                done.write_text("")
        return directory

    return get


def _users(shared: Path) -> list[int]:
    """Pids of the live workers using the server (a crashed worker's entry is dropped)."""
    try:
        pids = [int(p) for p in json.loads((shared / "users.json").read_text())]
    except (OSError, ValueError, TypeError):
        pids = []
    return [pid for pid in pids if pid_alive(pid)]


def _save_users(shared: Path, pids: list[int]) -> None:
    (shared / "users.json").write_text(json.dumps(sorted(set(pids))))


#: The suite's server collects with the throughput collector: the Spark test modules' runs are tiny,
#: and on them Java's default G1 cost more server CPU (alternated, 3 workers, load 3-6: 252, 260, 272
#: CPU-s with G1; 219, 244, 252 with Parallel; C1-only JIT 334), and in the whole suite (one run
#: each) 311 against 282, the machine's busy CPU 1,082 against 1,024 CPU-s. The product keeps G1
#: (scripts/devservices/spark.py: no gain on its large runs).
TEST_JAVA_OPTIONS = "-XX:+UseParallelGC"


def _server(shared: Path, port: int | None = None) -> SparkConnectServer:
    """The shared server on ``port``, else on the port a previous start recorded, else on a free one."""
    if port is None:
        try:
            port = int(json.loads((shared / "spark-connect.json").read_text())["port"])
        except (OSError, ValueError, KeyError, TypeError):
            port = free_port()
    return SparkConnectServer(
        port=port,
        host="127.0.0.1",
        base_dir=shared,
        master="local[2]",
        driver_memory="2g",
        java_options=TEST_JAVA_OPTIONS,
    )


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """A Spark Connect server on a loopback port (``local[2]``: the machine has two cores), shared."""
    if os.environ.get("TEST_REUSE_SERVICES") == "1":
        reused = default_service_set().spark
        if reused is None or not reused.running():
            pytest.exit("TEST_REUSE_SERVICES=1 but `scripts/services up` runs no Spark Connect server", returncode=4)
        yield reused
        return
    root = _session_root(tmp_path_factory)
    with _locked(root) as shared:
        server = _server(shared)
        if server.recorded_pid() is not None:
            # Alive: another worker's, perhaps slow to answer on a loaded machine. Wait for it;
            # stopping it would kill the server the other workers are using.
            server.wait_ready(180.0)
        else:
            server.stop()  # a dead one's pid file, if any
            server = _server(shared, free_port())
            server.start(timeout=180.0)
        _save_users(shared, [*_users(shared), os.getpid()])
    try:
        yield server
    finally:
        with _locked(root) as shared:
            left = [pid for pid in _users(shared) if pid != os.getpid()]
            _save_users(shared, left)
            if not left:
                server.stop()


@pytest.fixture(scope="session")
def spark(spark_connect: SparkConnectServer) -> Iterator[SparkSession]:
    """A Connect client session; settings as the job sets them, two shuffle partitions for tiny data."""
    session = build_spark(remote=spark_connect.remote, app_name="analytics-tests", shuffle_partitions=2)
    yield session
    session.stop()


# -- controllers, brokers and operators (house) ----------------------------------------------------
# The fixtures shared by the controller, broker, reassignment and election modules live in their own
# module; importing them here makes them available to every integration module by name.
from tests.integration.controller_fixtures import (  # noqa: E402
    agents,
    candidates,
    election_consumer,
    fake_brokers,
    operator,
    rds,
    sent,
)

__all__ = ["agents", "candidates", "election_consumer", "fake_brokers", "operator", "rds", "sent"]

# -- the analytics tests' hand-computed history and shared job runs (analytics) ---------------------------
from tests.integration.analytics_history import audit, both_days, chained, history  # noqa: E402

__all__ += ["audit", "both_days", "chained", "history"]
