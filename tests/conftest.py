"""Test-session services: a private ZooKeeper and Redis, a fresh ZooKeeper chroot per test.

Real services always (see README): by default the session starts its own ZooKeeper and Redis on
free loopback ports under a temporary directory; with ``TEST_REUSE_SERVICES=1`` it uses the ones
``scripts/services up`` runs instead (faster when iterating).

Tests are marked by folder: ``tests/unit`` -> unit, ``tests/integration`` -> integration,
``tests/e2e`` -> e2e.
"""

from __future__ import annotations

import inspect
import os
import uuid
from collections.abc import Iterator, Sequence
from importlib.metadata import version as _version
from pathlib import Path
from typing import Protocol

import pytest
from kazoo.client import KazooClient

from scripts.devservices import RedisServer, ServiceSet, ZooKeeperServer, default_service_set, free_port
from tests.support.zk import delete_tree, started_client

_FOLDER_MARKS = {"unit": "unit", "integration": "integration", "e2e": "e2e", "reliability": "reliability"}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "reliability: fault-injection scenarios with the history checker (tests/reliability)"
    )
    config.addinivalue_line("markers", "xdist_group(name): tests pytest-xdist runs together on one worker")


def _xdist_group(path: Path) -> str | None:
    """The pytest-xdist group of a test file whose tests share costly state, or None.

    ``scripts/test`` runs ``--dist loadgroup``: every other test is scheduled on its own, in
    collection order, so each worker keeps pytest-django's order (database tests before the
    transactional ones). A browser module (its chromium and its stack, module-scoped fixtures) and
    each Spark test module (its module-scoped histories; the Spark Connect server itself is shared
    by every worker, tests/integration/conftest.py) stay whole on one worker instead: scattered, each
    worker would build them again, and a worker that gets a module's tests between other modules'
    tests tears the module fixtures down and builds them once more.

    pytest-xdist 3.8 (the newest release) groups a test by rewriting ``item._nodeid``, which pytest
    9.2 no longer reads (pytest-xdist issue 1386, fix proposed in its PR 1388), so the groups would
    silently be lost: pyproject pins ``pytest<9.2`` until an xdist release follows, and
    ``pytest_xdist_node_collection_finished`` below stops the run with a clear error if they are lost anyway.
    """
    if "e2e" in path.parts:
        return f"e2e:{path.stem}"
    if "analytics" in path.stem:
        return f"spark:{path.stem}"  # one server for the session (tests/integration/conftest.py), modules spread
    return None


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's worker reads the xdist_group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        path = Path(str(item.fspath))
        for folder, mark in _FOLDER_MARKS.items():
            if folder in path.parts:
                item.add_marker(getattr(pytest.mark, mark))
        group = _xdist_group(path)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


class _XdistWorker(Protocol):
    """What this file reads of pytest-xdist's ``WorkerController`` (xdist ships no type information)."""

    config: pytest.Config


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_node_collection_finished(node: _XdistWorker, ids: Sequence[str]) -> None:
    """Stop a ``--dist loadgroup`` run whose worker did not tag its grouped tests ``@group``.

    The suffix on the node id is how pytest-xdist's scheduler sees a group; without it the run
    still passes, only slower (see ``_xdist_group``), so the loss would go unnoticed.
    """
    if node.config.getvalue("dist") != "loadgroup":
        return
    lost = [nodeid for nodeid in ids if "@" not in nodeid and _xdist_group(Path(nodeid.split("::")[0])) is not None]
    if lost:
        pytest.exit(
            f"--dist loadgroup lost its groups ({len(lost)} tests, e.g. {lost[0]}): pytest-xdist "
            f"{_version('pytest-xdist')} does not group under pytest {pytest.__version__} (pytest-xdist "
            "issue 1386); install pyproject's dev extras (pytest<9.2)",
            returncode=4,
        )


@pytest.fixture(scope="session", autouse=True)
def _quick_password_hashing() -> Iterator[None]:
    """In-process Django tests hash passwords at a low work factor (tests/support/hashers.py says why)."""
    from django.test.utils import override_settings

    with override_settings(PASSWORD_HASHERS=["tests.support.hashers.QuickPBKDF2PasswordHasher"]):
        yield


@pytest.fixture(autouse=True)
def _async_orm_connection_closed(request: pytest.FixtureRequest) -> Iterator[None]:
    """After an async test, close the database connection of asgiref's one thread for thread-sensitive
    sync code (``sync_to_async`` and Channels' ``database_sync_to_async`` called from a test's event
    loop, with no sync caller above, run there). That thread outlives the test, and its connection,
    left open, kept PostgreSQL from dropping the test database at the session's end ("database
    test_kcp_gwN is being accessed by other users"). In the product, Channels runs Django's
    ``close_old_connections`` around each consumer handler."""
    yield
    if inspect.iscoroutinefunction(getattr(request, "function", None)):
        from asgiref.sync import SyncToAsync
        from django.db import connections

        SyncToAsync.single_thread_executor.submit(connections.close_all).result(timeout=30)


#: The suite's ZooKeeper servers compile with C1 only. Half of their CPU went to the JIT's compiler
#: threads, for servers that live minutes; C1 code is slower, but ZooKeeper's work here is small
#: requests. Six ZooKeeper-heavy integration modules on 3 workers (per-thread /proc sampling, two
#: runs each, alternated): 34.3 and 35.7 ZooKeeper CPU-s with the full JIT (17.2 and 17.1 of it
#: compiling), 22.5 and 25.7 with C1 only. The benchmarks and the product keep the full JIT.
TEST_ZK_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1"


@pytest.fixture(scope="session")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServiceSet]:
    """ZooKeeper and Redis for the whole test session."""
    if os.environ.get("TEST_REUSE_SERVICES") == "1":
        reused = default_service_set()
        if os.environ.get("PYTEST_XDIST_WORKER"):
            # One Redis for every worker: their flushes and fixed database numbers would collide.
            pytest.exit("TEST_REUSE_SERVICES=1 shares one Redis: run it without -n (pytest-xdist)", returncode=4)
        if not (reused.zookeeper.running() and reused.redis.running()):
            pytest.exit("TEST_REUSE_SERVICES=1 but `scripts/services up` is not running", returncode=4)
        yield reused
        return
    started = ServiceSet(
        base_dir=tmp_path_factory.mktemp("services"),
        zk_port=free_port(),
        redis_port=free_port(),
        zk_java_options=TEST_ZK_JAVA_OPTIONS,
    )
    started.up()
    try:
        yield started
    finally:
        started.down()


@pytest.fixture(scope="session")
def zk_server(services: ServiceSet) -> ZooKeeperServer:
    return services.zookeeper


@pytest.fixture(scope="session")
def redis_server(services: ServiceSet) -> RedisServer:
    return services.redis


@pytest.fixture
def zk_chroot(zk_server: ZooKeeperServer) -> Iterator[str]:
    """A connect string with a fresh, empty chroot (``host:port/t-<hex>``), removed afterwards."""
    if not zk_server.ready():  # a previous test may have stopped it
        zk_server.start()
    root = f"/t-{uuid.uuid4().hex[:12]}"
    admin = KazooClient(hosts=zk_server.connect_string, timeout=10.0)
    admin.start(timeout=15)
    try:
        admin.ensure_path(root)
    except BaseException:
        admin.stop()
        admin.close()
        raise
    try:
        yield zk_server.connect_string + root
    finally:
        # The same session cleans up when it is still connected (one connection per test, not two).
        # A test that stopped ZooKeeper (healthz, reliability) can outlast that session, and an
        # expired or reconnecting session fails the delete: a fresh one does it then.
        if not zk_server.ready():
            zk_server.start()
        cleaner = admin
        if not admin.connected:
            admin.stop()
            admin.close()
            cleaner = KazooClient(hosts=zk_server.connect_string, timeout=10.0)
            cleaner.start(timeout=15)
        try:
            delete_tree(cleaner, root)
        finally:
            cleaner.stop()
            cleaner.close()


@pytest.fixture
def zk(zk_chroot: str) -> Iterator[KazooClient]:
    """A started kazoo client inside this test's chroot."""
    with started_client(zk_chroot) as client:
        yield client


@pytest.fixture
def redis_url(redis_server: RedisServer, request: pytest.FixtureRequest) -> str:
    """The Redis URL, with the database flushed so each test starts empty; a test marked
    ``isolated_redis`` gets a database of its own instead (``tests.support.snapshots.isolated_db``)."""
    import redis

    if not redis_server.ready():
        redis_server.start()
    if request.node.get_closest_marker("isolated_redis") is not None:
        from tests.support.snapshots import isolated_db

        return isolated_db(redis_server.url)
    conn = redis.Redis.from_url(redis_server.url)
    conn.flushdb()
    conn.close()
    return redis_server.url


@pytest.fixture(scope="session")
def migrated_db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite database ``manage.py migrate`` wrote once for the session (tests/support/dashboard_db.py)."""
    from tests.support.dashboard_db import migrate_template

    return migrate_template(tmp_path_factory.mktemp("migrated-db"))
