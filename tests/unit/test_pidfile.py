"""Pid files name one process (pid + start time): a reused pid is never signalled or waited on."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from scripts.devservices import RedisServer, free_port
from workers.local_processes import process_start_ticks, recorded_pid, signal_recorded, stop_recorded, write_pid_file

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]


@pytest.fixture
def bystander() -> Iterator[subprocess.Popen[bytes]]:
    """A process this test did not record: it must survive everything below."""
    proc = subprocess.Popen(SLEEPER, start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_the_file_records_the_start_time(tmp_path: Path, bystander: subprocess.Popen[bytes]) -> None:
    pid_file = tmp_path / "x.pid"
    write_pid_file(pid_file, bystander.pid)
    pid, start = pid_file.read_text().split()
    assert int(pid) == bystander.pid and int(start) == process_start_ticks(bystander.pid)
    assert recorded_pid(pid_file) == bystander.pid


def test_a_reused_pid_is_not_ours_and_is_never_signalled(tmp_path: Path, bystander: subprocess.Popen[bytes]) -> None:
    """A file left by a crash whose pid now belongs to another process (same pid, other start time)."""
    start = process_start_ticks(bystander.pid)
    assert start is not None
    pid_file = tmp_path / "redis.pid"
    pid_file.write_text(f"{bystander.pid} {start - 1}\n")
    assert recorded_pid(pid_file) is None
    assert signal_recorded(pid_file, signal.SIGTERM, group=True) is None
    assert stop_recorded(pid_file, timeout=1.0) is False
    assert not pid_file.exists()  # the stale file is cleared
    assert bystander.poll() is None  # still running, never signalled


def test_a_bare_pid_from_an_older_checkout_is_not_trusted(tmp_path: Path, bystander: subprocess.Popen[bytes]) -> None:
    pid_file = tmp_path / "old.pid"
    pid_file.write_text(f"{bystander.pid}\n")
    assert recorded_pid(pid_file) is None
    assert stop_recorded(pid_file, timeout=1.0) is False
    assert bystander.poll() is None
    # Kept (with a warning): it may be the one record of a server an older checkout started.
    assert pid_file.read_text() == f"{bystander.pid}\n"
    bystander.kill()
    bystander.wait()
    assert stop_recorded(pid_file, timeout=1.0) is False
    assert not pid_file.exists()  # once its process is gone, the file goes


@pytest.mark.parametrize("content", ["{pid}\n", "{pid} 1\n"], ids=["bare-pid", "other-start-time"])
def test_services_down_leaves_a_process_with_the_recorded_pid_alone(
    tmp_path: Path, bystander: subprocess.Popen[bytes], content: str
) -> None:
    """scripts/services down on a stale pid file: nothing signalled, no wait, the server reported stopped."""
    server = RedisServer(host="127.0.0.1", port=free_port(), base_dir=tmp_path)
    server.pid_file.write_text(content.format(pid=bystander.pid))
    assert server.recorded_pid() is None
    assert "stopped" in server.status_line()
    assert server.stop(timeout=1.0) is False
    assert bystander.poll() is None


def test_our_own_process_is_stopped_with_its_group(tmp_path: Path) -> None:
    proc = subprocess.Popen(SLEEPER, start_new_session=True)
    pid_file = tmp_path / "mine.pid"
    write_pid_file(pid_file, proc.pid)
    assert stop_recorded(pid_file, timeout=5.0) is True
    proc.wait(5)  # already reaped by stop_recorded's liveness check
    assert process_start_ticks(proc.pid) is None
    assert not pid_file.exists()
