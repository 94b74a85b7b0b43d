"""Private ZooKeeper and Redis processes for development, tests, benchmarks and the demo.

Why this exists: every developer, test session and newcomer needs *real* ZooKeeper and Redis, but
must never touch the machine's system services. This module starts private instances on loopback
ports with data and logs under a directory of ours (``var/`` by default), records their pids, and
stops only what it started.

It imports nothing from the project but ``scripts/pidfile.py`` (pid files that record each process's
start time, so a reused pid is never signalled), so ``scripts/services``, the pytest fixtures, ``scripts/bench``
and ``manage.py demo`` all share it.

ZooKeeper is run straight from its jars (Debian's ``zookeeper`` package puts them in
``/usr/share/java``; ``ZK_HOME`` points at any other install, e.g. Homebrew's ``libexec``), with
``java`` from ``PATH`` or ``JAVA_HOME``. Redis is ``redis-server`` from ``PATH`` (or ``REDIS_SERVER``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from scripts.pidfile import recorded_pid, stop_recorded, write_pid_file

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_VAR = REPO_ROOT / "var"
DEFAULT_ZK_PORT = 21810
DEFAULT_REDIS_PORT = 26379

_ZK_JARS = (
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "netty-all.jar",
    "slf4j-api.jar",
    "slf4j-simple.jar",
    "metrics-core.jar",
    "commons-cli.jar",
    "snappy-java.jar",
)


class ServiceError(RuntimeError):
    """A service could not be found, installed, started or stopped."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def four_letter_word(host: str, port: int, word: str = "ruok", timeout: float = 2.0) -> str:
    """Send a ZooKeeper four-letter command and return the answer ('' when unreachable)."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.sendall(word.encode())
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
            return b"".join(chunks).decode(errors="replace")
    except OSError:
        return ""


def process_cpu_seconds(pid: int) -> float:
    """CPU seconds a process has used so far, every thread, user + system (Linux ``/proc``).

    Raises ``OSError`` when the process is gone (or there is no procfs); the benchmarks decide what
    that means for their figure."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def zookeeper_classpath() -> str:
    """The classpath of an installed ZooKeeper server, or a ServiceError saying how to get one."""
    zk_home = os.environ.get("ZK_HOME")
    if zk_home:
        jars = sorted(str(p) for p in Path(zk_home).glob("**/*.jar"))
        if jars:
            return os.pathsep.join(jars)
        raise ServiceError(f"ZK_HOME={zk_home} holds no jars")
    java_dir = Path("/usr/share/java")
    found = [java_dir / name for name in _ZK_JARS]
    missing = [j.name for j in found if not j.exists()]
    if missing:
        raise ServiceError(
            "ZooKeeper is not installed (missing " + ", ".join(missing) + "). "
            "On Debian/Ubuntu: `scripts/services up` installs the `zookeeper` package; "
            "elsewhere set ZK_HOME to a ZooKeeper 3.6+ install."
        )
    return os.pathsep.join(str(j) for j in found)


def java_binary() -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return str(Path(java_home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise ServiceError("java not found: install a JDK 11+ (Java 17 recommended) or set JAVA_HOME")
    return found


def redis_binary() -> str:
    found = os.environ.get("REDIS_SERVER") or shutil.which("redis-server")
    if not found:
        raise ServiceError("redis-server not found: `scripts/services up` installs Debian's redis-server")
    return found


@dataclass(kw_only=True)
class ManagedProcess:
    """A server process of ours: started in its own session, tracked by a pid file."""

    name: str
    host: str
    port: int
    base_dir: Path
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
        """Our instance's pid while that very process runs (pid and start time match; scripts/pidfile.py)."""
        return recorded_pid(self.pid_file)

    def running(self) -> bool:
        return self.recorded_pid() is not None and self.ready()

    def start(self, timeout: float = 30.0) -> None:
        """Start the server unless our own instance already runs (idempotent)."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        if self.recorded_pid() is not None:
            self.wait_ready(timeout)
            return
        if port_open(self.host, self.port):
            raise ServiceError(
                f"{self.name}: port {self.host}:{self.port} is taken by a process we did not start; choose another port"
            )
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
        self.info_file.write_text(json.dumps({"host": self.host, "port": self.port, "pid": self.process.pid}))
        self.wait_ready(timeout)

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
        is signalled."""
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
            f"{self.name:<10} {state:<18} {self.host}:{self.port}"
            + (f"  pid {pid}" if pid else "")
            + (f"  log {self.log_file}")
        )


@dataclass(kw_only=True)
class ZooKeeperServer(ManagedProcess):
    """A standalone ZooKeeper 3.6+ server (multi-read needs 3.6) on a loopback port."""

    name: str = "zookeeper"
    tick_ms: int = 500
    heap_mb: int = 512

    @property
    def data_dir(self) -> Path:
        return self.base_dir / f"{self.name}-data"

    @property
    def config_file(self) -> Path:
        return self.base_dir / f"{self.name}.cfg"

    @property
    def connect_string(self) -> str:
        return f"{self.host}:{self.port}"

    def prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config_file.write_text(
            "\n".join(
                [
                    f"tickTime={self.tick_ms}",
                    f"dataDir={self.data_dir}",
                    f"clientPort={self.port}",
                    f"clientPortAddress={self.host}",
                    "admin.enableServer=false",
                    "4lw.commands.whitelist=ruok,stat,srvr,mntr,cons",
                    # Sessions as short as 1 s let tests expire them quickly; 60 s for operators.
                    "minSessionTimeout=1000",
                    "maxSessionTimeout=60000",
                    "maxClientCnxns=0",
                    # Room for big multis (the controller batches thousands of ops per request).
                    "jute.maxbuffer=4194304",
                    "snapCount=200000",
                    "autopurge.snapRetainCount=3",
                    "autopurge.purgeInterval=1",
                    "",
                ]
            )
        )

    def command(self) -> list[str]:
        return [
            java_binary(),
            f"-Xmx{self.heap_mb}m",
            "-XX:+UseParallelGC",
            "-Djute.maxbuffer=4194304",
            "-Dzookeeper.jmx.log4j.disable=true",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
            "-cp",
            zookeeper_classpath(),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain",
            str(self.config_file),
        ]

    def ready(self) -> bool:
        return four_letter_word(self.host, self.port, "ruok", timeout=1.0) == "imok"

    def wipe(self) -> None:
        """Delete the data directory (server must be stopped)."""
        shutil.rmtree(self.data_dir, ignore_errors=True)


@dataclass(kw_only=True)
class RedisServer(ManagedProcess):
    """A private redis-server on a loopback port, no persistence unless asked."""

    name: str = "redis"
    persist: bool = False

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def command(self) -> list[str]:
        cmd = [
            redis_binary(),
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--dir",
            str(self.base_dir),
            "--daemonize",
            "no",
            "--protected-mode",
            "yes",
            "--appendonly",
            "no",
            "--dbfilename",
            f"{self.name}.rdb",
        ]
        if not self.persist:
            cmd += ["--save", ""]
        return cmd

    def ready(self) -> bool:
        try:
            with socket.create_connection((self.host, self.port), timeout=1.0) as sock:
                sock.sendall(b"PING\r\n")
                return sock.recv(64).startswith(b"+PONG")
        except OSError:
            return False


def missing_debian_packages() -> list[str]:
    """Debian packages the stack needs that this machine lacks."""
    missing = []
    try:
        zookeeper_classpath()
    except ServiceError:
        missing.append("zookeeper")
    if not (os.environ.get("REDIS_SERVER") or shutil.which("redis-server")):
        missing.append("redis-server")
    return missing


def install_debian_packages(packages: Sequence[str]) -> None:
    """apt-get install what is missing (as root, or through sudo), without starting system services."""
    if not packages:
        return
    if not shutil.which("apt-get"):
        raise ServiceError(
            "missing " + ", ".join(packages) + " and this is not a Debian/Ubuntu machine: see README "
            "(macOS: `brew install zookeeper redis`, then ZK_HOME=$(brew --prefix zookeeper)/libexec)"
        )
    prefix: list[str] = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"installing Debian packages: {' '.join(packages)}", flush=True)
    subprocess.run([*prefix, "apt-get", "update", "-qq"], check=True, env=env)
    # policy-rc.d 101 keeps the packages' own system services from being started.
    policy = Path("/usr/sbin/policy-rc.d")
    created_policy = False
    if os.geteuid() == 0 and not policy.exists():
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        created_policy = True
    try:
        subprocess.run(
            [*prefix, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
            check=True,
            env=env,
        )
    finally:
        if created_policy:
            policy.unlink(missing_ok=True)


@dataclass(kw_only=True)
class ServiceSet:
    """The services of one environment (dev stack, a test session, a benchmark)."""

    base_dir: Path
    zk_port: int
    redis_port: int
    host: str = "127.0.0.1"
    zk_heap_mb: int = 512  # the benchmark raises it for a million partitions

    @property
    def zookeeper(self) -> ZooKeeperServer:
        return ZooKeeperServer(host=self.host, port=self.zk_port, base_dir=self.base_dir, heap_mb=self.zk_heap_mb)

    @property
    def redis(self) -> RedisServer:
        return RedisServer(host=self.host, port=self.redis_port, base_dir=self.base_dir)

    def up(self) -> None:
        self.zookeeper.start()
        self.redis.start()

    def down(self) -> None:
        self.redis.stop()
        self.zookeeper.stop()

    def status(self) -> list[str]:
        return [self.zookeeper.status_line(), self.redis.status_line()]


def default_service_set() -> ServiceSet:
    return ServiceSet(
        base_dir=Path(os.environ.get("SERVICES_DIR", DEFAULT_VAR / "services")),
        zk_port=int(os.environ.get("ZK_PORT", DEFAULT_ZK_PORT)),
        redis_port=int(os.environ.get("REDIS_PORT", DEFAULT_REDIS_PORT)),
    )


@contextlib.contextmanager
def temporary_services(base_dir: Path, zk_heap_mb: int = 512) -> Iterator[ServiceSet]:
    """Fresh ZooKeeper and Redis on free ports for the length of a ``with`` block."""
    services = ServiceSet(base_dir=base_dir, zk_port=free_port(), redis_port=free_port(), zk_heap_mb=zk_heap_mb)
    try:
        services.up()
        yield services
    finally:
        services.down()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/services",
        description="Private ZooKeeper and Redis on loopback ports, data and logs under var/services.",
    )
    parser.add_argument("action", choices=["up", "down", "status", "env"])
    parser.add_argument("--no-install", action="store_true", help="fail instead of installing packages")
    args = parser.parse_args(argv)
    services = default_service_set()
    try:
        if args.action == "up":
            missing = missing_debian_packages()
            if missing and args.no_install:
                raise ServiceError("missing: " + ", ".join(missing))
            install_debian_packages(missing)
            services.up()
            print("\n".join(services.status()))
        elif args.action == "down":
            services.down()
            print("\n".join(services.status()))
        elif args.action == "status":
            print("\n".join(services.status()))
            return 0 if services.zookeeper.running() and services.redis.running() else 3
        else:  # env: lines a shell can eval
            print(f"export ZOOKEEPER_CONNECT={services.zookeeper.connect_string}")
            print(f"export REDIS_URL={services.redis.url}")
    except (ServiceError, subprocess.CalledProcessError) as exc:
        print(f"services: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
