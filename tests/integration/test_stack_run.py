"""scripts/run (scripts/stack.py): a failing set-up step shows its output and stops what the run started."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts import stack
from scripts.devservices import free_port, port_open


def test_failing_migrations_show_their_output_and_stop_the_services(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    zk_port, redis_port = free_port(), free_port()
    monkeypatch.setenv("SERVICES_DIR", str(tmp_path / "services"))
    monkeypatch.setenv("ZK_PORT", str(zk_port))
    monkeypatch.setenv("REDIS_PORT", str(redis_port))
    # No Spark Connect server: its JVM start is most of this test's time and its fixed default port
    # could be a developer's running one; the stop-what-this-run-started path is the same for every
    # service (ZooKeeper and Redis are checked below), and the analytics tests start and stop Spark.
    monkeypatch.setenv("SPARK_CONNECT_PORT", "0")
    # A database the migrations cannot open: its directory does not exist.
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path}/missing-dir/db.sqlite3")
    monkeypatch.setenv("VAR_DIR", str(tmp_path / "var"))
    monkeypatch.delenv("ZOOKEEPER_CONNECT", raising=False)
    monkeypatch.delenv("REDIS_URL", raising=False)

    assert stack.main(["--brokers", "0"]) == 1
    out, err = capsys.readouterr()
    assert "`manage.py migrate --noinput -v 0` failed with exit code 1" in err
    assert "unable to open database file" in err  # the migration's own error, not just "it failed"
    assert "stack: stopped" in out
    # The ZooKeeper and Redis this run started are gone, and so are their pid files.
    assert not port_open("127.0.0.1", zk_port) and not port_open("127.0.0.1", redis_port)
    assert not list((tmp_path / "services").glob("*.pid"))
