"""A checkout never stops (or adopts) a service another checkout started, even from the same directory.

Services are stopped by pid file, so two checkouts pointed at one directory (an exported
``SERVICES_DIR``, a benchmark's shared ``--dir``) used to stop each other's servers: a developer's
Spark Connect server from a clean clone's CI, say. A real redis-server stands in for every
``ManagedProcess`` (Spark's is the same class, and a JVM would cost the suite 15-40 s).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.devservices import REPO_ROOT, RedisServer, ServiceError, ServiceSet, free_port, main
from workers.local_processes import recorded_pid

pytestmark = pytest.mark.integration

ELSEWHERE = "/srv/another-checkout"


@pytest.fixture
def foreign_redis(tmp_path: Path) -> Iterator[RedisServer]:
    """A Redis that another checkout started in ``tmp_path`` (its pid file and owner record there)."""
    server = RedisServer(host="127.0.0.1", port=free_port(), base_dir=tmp_path, owner=ELSEWHERE)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_start_records_its_checkout(foreign_redis: RedisServer) -> None:
    assert json.loads(foreign_redis.info_file.read_text())["owner"] == ELSEWHERE
    assert RedisServer(host="127.0.0.1", port=1, base_dir=foreign_redis.base_dir).recorded_owner() == ELSEWHERE


def test_another_checkouts_down_leaves_it_running(
    foreign_redis: RedisServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    pid = foreign_redis.recorded_pid()
    # This checkout's `scripts/services down` with the same SERVICES_DIR (Spark off: the class is shared).
    monkeypatch.setenv("SERVICES_DIR", str(foreign_redis.base_dir))
    monkeypatch.setenv("REDIS_PORT", str(foreign_redis.port))
    monkeypatch.setenv("ZK_PORT", str(free_port()))
    monkeypatch.setenv("SPARK_CONNECT_PORT", "0")
    assert main(["down"]) == 0
    assert "started by another checkout" in capsys.readouterr().err
    assert foreign_redis.running() and foreign_redis.recorded_pid() == pid
    assert recorded_pid(foreign_redis.pid_file) == pid  # the pid file is kept for its owner

    mine = ServiceSet(base_dir=foreign_redis.base_dir, zk_port=free_port(), redis_port=foreign_redis.port)
    assert mine.owner == str(REPO_ROOT)
    assert mine.redis.stop() is False and foreign_redis.running()
    with pytest.raises(ServiceError, match="another checkout"):
        mine.redis.start(timeout=5.0)  # nor adopted as if it were ours
    assert foreign_redis.running()


def test_its_own_checkout_stops_it(foreign_redis: RedisServer) -> None:
    same = ServiceSet(base_dir=foreign_redis.base_dir, zk_port=free_port(), redis_port=foreign_redis.port)
    same.owner = ELSEWHERE
    same.down()
    assert not foreign_redis.running() and not foreign_redis.pid_file.exists()


def test_a_record_without_an_owner_is_treated_as_before(tmp_path: Path) -> None:
    """Servers started by an older checkout wrote no owner: they stay stoppable, as they were."""
    server = RedisServer(host="127.0.0.1", port=free_port(), base_dir=tmp_path)
    server.start()
    server.info_file.write_text(json.dumps({"host": server.host, "port": server.port}))
    other = RedisServer(host="127.0.0.1", port=server.port, base_dir=tmp_path, owner=ELSEWHERE)
    assert other.recorded_owner() is None and other.foreign_owner() is None
    assert other.stop() is True and not server.running()
