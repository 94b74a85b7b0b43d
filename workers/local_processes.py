"""Local processes the project starts itself: free ports, and pid files that name one process.

A pid file here records the pid and that process's start time, not a bare number.

Why: a pid file outlives its process after a crash, a reboot or a ``kill -9``, and the kernel
reuses pids. Trusting the bare number, ``scripts/services down`` or ``demo_cluster stop`` would
signal whatever process (or process group) got that pid since, perhaps another user's, and wait
forever for it to exit. So the file records the process's start time too (field 22 of
``/proc/<pid>/stat``, clock ticks since boot: it never changes for a process and differs for any
later one with the same pid), and a pid counts as ours only while a live process with that pid
has that start time. Every signal goes through ``signal_recorded``, which checks again right before
it sends.

Without procfs (macOS) the start time is unknown: the file records the pid alone and liveness falls
back to ``kill(pid, 0)``, as before. A file without a start time on a machine with procfs (written
by an older checkout) is not trusted: its process is reported stopped and never signalled.

Imports nothing from the project, and lives in a product package because a product command uses it:
``manage.py demo_cluster`` (its brokers), ``scripts/devservices`` (private ZooKeeper, Redis, ...) and
the test, benchmark and reliability rigs all share it (product code never imports ``scripts``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

_PROC = Path("/proc")


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def process_start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` (clock ticks after boot), or None when gone or no procfs."""
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # Fields after the command name (which may hold spaces and parentheses): state is field 3, so
    # starttime (field 22) is index 19.
    fields = stat.rpartition(")")[2].split()
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie child is reaped and counts as dead)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(ChildProcessError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return True  # no procfs (macOS): trust kill(0)
    return stat.rpartition(")")[2].split()[0] != "Z"


def write_pid_file(path: Path, pid: int) -> None:
    """Record ``pid`` and its start time (written whole, then renamed: never a half-written file)."""
    start = process_start_ticks(pid)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(f"{pid} {start}\n" if start is not None else f"{pid}\n")
    tmp.replace(path)


def recorded_pid(path: Path) -> int | None:
    """The pid in ``path`` when that very process still runs, else None (never another process)."""
    try:
        parts = path.read_text().split()
        pid = int(parts[0])
        start = int(parts[1]) if len(parts) > 1 else None
    except (OSError, ValueError, IndexError):
        return None
    if not pid_alive(pid):
        return None
    if _PROC.is_dir() and (start is None or process_start_ticks(pid) != start):
        return None  # the pid was reused (or the file predates start times): not ours
    return pid


def _legacy_live_pid(path: Path) -> int | None:
    """The pid of a file written before start times were recorded, when that pid still runs.

    Such a file is never trusted to signal (the pid may have been reused), but it is kept, with a
    warning, so that the one record of a server started by an older checkout is not thrown away."""
    try:
        parts = path.read_text().split()
        pid = int(parts[0])
    except (OSError, ValueError, IndexError):
        return None
    if len(parts) > 1 or not pid_alive(pid):
        return None
    print(
        f"{path}: pid {pid} was recorded without its start time (an older checkout) and still runs;"
        f" not signalled: stop it by hand if it is ours (kill {pid}), then remove {path}",
        file=sys.stderr,
    )
    return pid


def signal_recorded(path: Path, sig: int, *, group: bool = False) -> int | None:
    """Send ``sig`` to the process in ``path`` (its process group with ``group``) if it is still ours.

    Returns the pid signalled, or None when the file names no process of ours (nothing is sent)."""
    pid = recorded_pid(path)
    if pid is None:
        return None
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except ProcessLookupError:
        return None
    return pid


def wait_gone(path: Path, pid: int, timeout: float) -> bool:
    """Wait until the process ``path`` recorded as ``pid`` has exited (or the pid is someone else's)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if recorded_pid(path) != pid:
            return True
        time.sleep(0.05)
    return recorded_pid(path) != pid


def stop_recorded(path: Path, timeout: float = 10.0, sig: int = signal.SIGTERM, *, group: bool = True) -> bool:
    """Stop the process ``path`` records (``sig``, then SIGKILL after ``timeout``); remove the file.

    True when a process of ours was stopped; False when the file named none (stale or reused pid),
    in which case nothing was signalled. Bounded: never waits on a process that is not ours."""
    pid = signal_recorded(path, sig, group=group)
    if pid is None:
        if _legacy_live_pid(path) is None:
            path.unlink(missing_ok=True)
        return False
    if not wait_gone(path, pid, timeout):
        signal_recorded(path, signal.SIGKILL, group=group)
        wait_gone(path, pid, 10.0)
    path.unlink(missing_ok=True)
    return True


def terminate_all(procs: Iterable[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    """SIGTERM every process at once, then wait for each, SIGKILLing any still there after ``timeout``
    (children this process started: their pids cannot have been reused while unreaped)."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
