"""``scripts/web_processes.py``: two daphne processes behind one address, both serving, both stopped.

Real processes on a real socket (the web side's Redis and a migrated SQLite copy): connections
to the one port land on both processes (``SO_REUSEPORT`` hashes each client port, so 40 connections
all on one of two processes has odds of 1 in 2^39), and SIGTERM to the launcher stops both.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from scripts.devservices import REPO_ROOT, free_port
from scripts.support.live_rig import established_on
from tests.support.dashboard_db import install_migrated


def _children(pid: int) -> list[int]:
    text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    return [int(x) for x in text.split()]


def test_two_processes_share_one_address_and_stop_together(
    tmp_path: Path, redis_url: str, migrated_db_template: Path
) -> None:
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": redis_url,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
    }
    install_migrated(migrated_db_template, env)
    launcher = subprocess.Popen(
        [sys.executable, "scripts/web_processes.py", "--processes", "2", "--port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    held: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5) as answer:
                    assert answer.status == 200
                break
            except OSError:
                assert launcher.poll() is None, launcher.stdout.read().decode() if launcher.stdout else ""
                assert time.monotonic() < deadline, "the web processes never answered"
                time.sleep(0.2)
        daphnes = _children(launcher.pid)
        assert len(daphnes) == 2
        for _ in range(40):
            held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        deadline = time.monotonic() + 10
        while sum(established_on(pid, port) for pid in daphnes) < 40 and time.monotonic() < deadline:
            time.sleep(0.1)
        spread = [established_on(pid, port) for pid in daphnes]
        assert sum(spread) == 40 and min(spread) > 0, spread
    finally:
        for sock in held:
            sock.close()
        launcher.send_signal(signal.SIGTERM)
        status = launcher.wait(30)
    assert status == 0
    for pid in daphnes:
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
