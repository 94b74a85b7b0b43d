"""What every private service shares: where they live, their errors, and ``ManagedProcess``.

A service of ours is started in its own session, tracked by a pid file that records the process's
start time (``workers.local_processes``), and stopped only when that very process still runs.

Each start also records its **owner**, the checkout that started it (its repository root), next to the
pid (``<name>.json``). A pid file is all a stop needs, so any checkout pointed at the same directory
(an exported ``SERVICES_DIR``, a benchmark's shared ``--dir``) could otherwise stop another's server:
a developer's Spark Connect server, say, from a clean clone's CI. ``stop`` refuses a process whose
recorded owner is another checkout (it says so and leaves the pid file), and ``start`` refuses to
adopt one. A record without an owner (written by an older checkout) is treated as before.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from scripts.devservices.paths import REPO_ROOT
from workers.local_processes import port_open, recorded_pid, stop_recorded, write_pid_file


class ServiceError(RuntimeError):
    """A service could not be found, installed, started or stopped."""


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds a process has used so far, every thread, user + system (Linux ``/proc``).

    Raises ``OSError`` when the process is gone (or there is no procfs); the benchmarks decide what
    that means for their figure."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise ServiceError("java not found: install a JDK 11+ (Java 17 recommended) or set JAVA_HOME")
    return found


@dataclass(kw_only=True)
class ManagedProcess:
    """A server process of ours: started in its own session, tracked by a pid file."""

    name: str
    host: str
    port: int
    base_dir: Path
    #: The checkout this process belongs to (recorded at start; only that checkout stops it).
    owner: str = str(REPO_ROOT)
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def pid_file(self) -> Path:
        return self.base_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.base_dir / f"{self.name}.log"

    @property
    def info_file(self) -> Path:
        return self.base_dir / f"{self.name}.json"

    def command(self) -> list[str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def prepare(self) -> None:
        """Write config files before the first start."""

    def ready(self) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    def recorded_pid(self) -> int | None:
        """Our instance's pid while that very process runs (pid and start time match; workers/local_processes.py)."""
        return recorded_pid(self.pid_file)

    def recorded_owner(self) -> str | None:
        """The checkout that started the recorded process (None when unknown: no record, or an older one)."""
        try:
            owner = json.loads(self.info_file.read_text()).get("owner")
        except (OSError, ValueError, AttributeError):
            return None
        return owner if isinstance(owner, str) else None

    def foreign_owner(self) -> str | None:
        """The other checkout that started the live recorded process, if it is another's (else None)."""
        if self.recorded_pid() is None:
            return None
        owner = self.recorded_owner()
        return owner if owner is not None and owner != self.owner else None

    def running(self) -> bool:
        return self.recorded_pid() is not None and self.ready()

    def start(self, timeout: float = 30.0) -> None:
        """Start the server unless our own instance already runs (idempotent)."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        foreign = self.foreign_owner()
        if foreign is not None:
            raise ServiceError(
                f"{self.name}: {self.base_dir} holds a {self.name} started by another checkout ({foreign});"
                " use a directory of this checkout's own (SERVICES_DIR)"
            )
        if self.recorded_pid() is not None:
            self.wait_ready(timeout)
            return
        if port_open(self.host, self.port):
            raise ServiceError(
                f"{self.name}: port {self.host}:{self.port} is taken by a process we did not start; choose another port"
            )
        self.spawn()
        self.wait_ready(timeout)

    def spawn(self) -> None:
        """Write the config, start the process in its own session and record it (without waiting)."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.prepare()
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=self.base_dir,
                start_new_session=True,
            )
        write_pid_file(self.pid_file, self.process.pid)
        info = {"host": self.host, "port": self.port, "pid": self.process.pid, "owner": self.owner}
        self.info_file.write_text(json.dumps(info))

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready():
                return
            pid = self.recorded_pid()
            if pid is None:
                tail = self.log_file.read_text(errors="replace")[-2000:] if self.log_file.exists() else ""
                raise ServiceError(f"{self.name} exited during start-up; log tail:\n{tail}")
            time.sleep(0.1)
        raise ServiceError(f"{self.name} not ready on {self.host}:{self.port} after {timeout:.0f}s")

    def stop(self, timeout: float = 10.0, sig: int = signal.SIGTERM) -> bool:
        """Stop our instance (its process group, by pid and start time); True when something was stopped.

        A stale pid file, or one whose pid now belongs to another process, is removed and nothing
        is signalled. A process another checkout started is left running, with its pid file."""
        foreign = self.foreign_owner()
        if foreign is not None:
            print(
                f"{self.name}: pid {self.recorded_pid()} in {self.base_dir} was started by another checkout"
                f" ({foreign}); not stopped",
                file=sys.stderr,
            )
            return False
        stopped = stop_recorded(self.pid_file, timeout, sig, group=True)
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.process.wait(timeout=1)
            self.process = None
        return stopped

    def kill(self) -> None:
        """SIGKILL, as a crash would."""
        self.stop(timeout=5.0, sig=signal.SIGKILL)

    def status_line(self) -> str:
        pid = self.recorded_pid()
        state = "running" if pid and self.ready() else ("starting/unhealthy" if pid else "stopped")
        return (
            f"{self.name:<13} {state:<18} {self.host}:{self.port}"
            + (f"  pid {pid}" if pid else "")
            + (f"  log {self.log_file}")
        )
