"""scripts/services' private PostgreSQL: initdb into the services dir, loopback only, never as root."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from scripts.devservices import PostgresServer, free_port, main, port_open, postgres_bin_dir

pytestmark = pytest.mark.skipif(postgres_bin_dir() is None, reason="Debian's postgresql is not installed")


@pytest.fixture
def services_dir() -> Iterator[Path]:
    # Not under pytest's tmp dir (mode 0700): as root the server runs as the `postgres` user, which
    # must be able to reach its data directory.
    path = Path(tempfile.mkdtemp(prefix="kcp-pg-test-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def test_up_env_down(services_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    monkeypatch.setenv("SERVICES_DIR", str(services_dir))
    monkeypatch.setenv("PG_PORT", str(port))
    server = PostgresServer(host="127.0.0.1", port=port, base_dir=services_dir)
    try:
        assert main(["up", "postgresql", "--no-install"]) == 0
        assert server.running()
        capsys.readouterr()
        assert main(["env", "postgresql"]) == 0
        url = capsys.readouterr().out.strip().removeprefix("export DATABASE_URL=")
        assert url == server.url and url.startswith("postgres://kcp:") and url.endswith(f"@127.0.0.1:{port}/kcp")
        with psycopg.connect(url.replace("postgres://", "postgresql://"), connect_timeout=5) as conn:
            owner = conn.execute("SELECT usename FROM pg_stat_activity WHERE pid = pg_backend_pid()").fetchone()
            assert owner == ("kcp",)
            data_dir = conn.execute("SELECT current_setting('data_directory')").fetchone()
            assert data_dir == (str(server.data_dir),)
        assert oct(server.password_file.stat().st_mode & 0o777) == "0o600"
        data_owner = server.data_dir.stat().st_uid
        assert data_owner != 0 or os.geteuid() != 0  # never run (or owned) by root
        # A wrong password is refused: the server is not "trust".
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(f"postgresql://kcp:wrong@127.0.0.1:{port}/kcp", connect_timeout=5).close()
        # Idempotent: up again reuses the running cluster and its database.
        assert main(["up", "postgresql", "--no-install"]) == 0
    finally:
        assert main(["down"]) == 0
    assert not server.running() and not port_open("127.0.0.1", port)
    assert not server.pid_file.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="only root hands the server to another user")
def test_as_root_a_services_dir_the_server_user_cannot_reach_keeps_its_data_under_var_tmp(tmp_path: Path) -> None:
    """pytest's tmp dirs (and a checkout under /root) are mode 0700: the data goes to /var/tmp instead."""
    server = PostgresServer(host="127.0.0.1", port=free_port(), base_dir=tmp_path)
    assert server.data_dir.parent == Path("/var/tmp") and server.data_dir.name.startswith("kcp-postgresql-")
    try:
        server.start()
        assert server.running() and server.data_dir.stat().st_uid != 0
    finally:
        server.stop()
        shutil.rmtree(server.data_dir, ignore_errors=True)
    assert not server.running()
