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
import hashlib
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
DEFAULT_SPARK_CONNECT_PORT = 15002
DEFAULT_PG_PORT = 25432

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
            f"{self.name:<13} {state:<18} {self.host}:{self.port}"
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


def pyspark_home() -> Path:
    """The installed pyspark package, which ships Spark itself (``bin/``, ``sbin/``, ``jars/``)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServiceError("pyspark is not installed in this Python: run scripts/bootstrap")
    return Path(spec.origin).parent


CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


@dataclass(kw_only=True)
class SparkConnectServer(ManagedProcess):
    """A warm Spark Connect server (the class Spark's ``sbin/start-connect-server.sh`` submits) on a loopback port.

    The analytics worker is a Connect client (``SPARK_REMOTE=sc://host:port``), so no JVM runs in a
    Celery child and the JIT and the session stay warm between runs. ``master`` is ``local[*]`` by
    default; the same client talks to a server in front of a real cluster (docs/deployment.md).
    """

    name: str = "spark-connect"
    master: str = "local[*]"
    driver_memory: str = "4g"

    @property
    def remote(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def command(self) -> list[str]:
        home = pyspark_home()
        env = [
            f"SPARK_HOME={home}",
            f"SPARK_LOG_DIR={self.base_dir}",
            f"SPARK_PID_DIR={self.base_dir}",
            f"SPARK_LOCAL_IP={self.host}",
            f"PYSPARK_PYTHON={sys.executable}",
        ]
        if os.environ.get("JAVA_HOME"):
            env.append(f"JAVA_HOME={os.environ['JAVA_HOME']}")
        confs = {
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
        }
        args = ["--master", self.master, "--driver-memory", self.driver_memory]
        for key, value in confs.items():
            args += ["--conf", f"{key}={value}"]
        # What sbin/start-connect-server.sh submits, without its daemon script: that one runs the
        # JVM as a child of a shell, so our pid file would hold the shell and a stop could leave the
        # JVM behind on the port. spark-submit execs spark-class, which execs java: the pid is the JVM.
        submit = [str(home / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS, "--name", "Spark Connect server"]
        return ["env", *env, *submit, *args]

    def ready(self) -> bool:
        return port_open(self.host, self.port, timeout=1.0)


def postgres_bin_dir() -> Path | None:
    """The newest PostgreSQL server's ``bin`` (Debian: ``/usr/lib/postgresql/<major>/bin``; ``PG_BIN`` overrides)."""
    configured = os.environ.get("PG_BIN")
    if configured:
        return Path(configured) if (Path(configured) / "postgres").exists() else None
    found = [d for d in Path("/usr/lib/postgresql").glob("*/bin") if (d / "postgres").exists()]
    found.sort(key=lambda d: int(d.parent.name) if d.parent.name.isdigit() else 0)
    return found[-1] if found else None


def _searchable_by(path: Path, user: str) -> bool:
    """Whether ``user`` may walk down to ``path`` (every existing ancestor searchable: mode bits only)."""
    import pwd

    entry = pwd.getpwnam(user)
    for part in [path.resolve(), *path.resolve().parents]:
        try:
            st = part.stat()
        except FileNotFoundError:
            continue
        if st.st_uid == entry.pw_uid:
            ok = bool(st.st_mode & 0o100)
        elif st.st_gid == entry.pw_gid:
            ok = bool(st.st_mode & 0o010)
        else:
            ok = bool(st.st_mode & 0o001)
        if not ok:
            return False
    return True


def unprivileged_user() -> str | None:
    """Who runs PostgreSQL when we are root (it refuses to run as root): ``postgres``, else ``nobody``."""
    if os.geteuid() != 0:
        return None
    import pwd

    for name in ("postgres", "nobody"):
        with contextlib.suppress(KeyError):
            pwd.getpwnam(name)
            return name
    raise ServiceError("running as root and neither a `postgres` nor a `nobody` user exists to run PostgreSQL")


@dataclass(kw_only=True)
class PostgresServer(ManagedProcess):
    """A private PostgreSQL cluster (Debian's package) on a loopback port, data under the services dir.

    Why its own cluster rather than the system's: like ZooKeeper and Redis, tests and the dev stack
    must never touch the machine's services. ``initdb`` makes a cluster whose superuser ``kcp`` has a
    random password (kept in ``postgresql.password``, mode 0600); only TCP on ``host`` is open (no
    Unix socket), with scram-sha-256 authentication. As root (CI), the cluster is owned and run by
    the ``postgres`` system user (which the Debian package creates), since PostgreSQL refuses to run
    as root: every directory above the data directory must then be searchable by that user.
    """

    name: str = "postgresql"
    user: str = "kcp"
    database: str = "kcp"

    @property
    def data_dir(self) -> Path:
        """``<services dir>/postgresql-data``; as root, when the server's user cannot reach the services
        dir (a checkout under a 0700 home, pytest's tmp dirs), a directory of this services dir's own
        under ``/var/tmp`` instead (named by a hash of its path, so each services dir keeps one)."""
        inside = self.base_dir / f"{self.name}-data"
        owner = unprivileged_user()
        if owner is None or _searchable_by(self.base_dir, owner):
            return inside
        digest = hashlib.sha256(str(self.base_dir.resolve()).encode()).hexdigest()[:12]
        return Path("/var/tmp") / f"kcp-{self.name}-{digest}"

    @property
    def password_file(self) -> Path:
        return self.base_dir / f"{self.name}.password"

    @property
    def url(self) -> str:
        return f"postgres://{self.user}:{self.password()}@{self.host}:{self.port}/{self.database}"

    def password(self) -> str:
        try:
            return self.password_file.read_text().strip()
        except FileNotFoundError:
            raise ServiceError(
                f"{self.name} is not initialised under {self.base_dir}: `scripts/services up postgresql`"
            ) from None

    def _bin(self, tool: str) -> str:
        bin_dir = postgres_bin_dir()
        if bin_dir is None:
            raise ServiceError(
                "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres). On Debian/Ubuntu: "
                "`scripts/services up postgresql` installs the `postgresql` package; elsewhere set PG_BIN."
            )
        return str(bin_dir / tool)

    def _as_owner(self, argv: list[str]) -> list[str]:
        """``argv`` run as the unprivileged owner when we are root (setpriv execs: the pid stays the server's)."""
        owner = unprivileged_user()
        if owner is None:
            return argv
        return ["setpriv", f"--reuid={owner}", f"--regid={owner}", "--init-groups", "--", *argv]

    def prepare(self) -> None:
        if (self.data_dir / "PG_VERSION").exists():
            return
        import secrets

        owner = unprivileged_user()
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not self.password_file.exists():
            self.password_file.write_text(secrets.token_urlsafe(24) + "\n")
            self.password_file.chmod(0o600)
        pwfile = self.data_dir.parent / f".{self.data_dir.name}.initpw"
        pwfile.write_text(self.password())
        try:
            if owner is not None:
                import pwd

                entry = pwd.getpwnam(owner)
                for path in (self.data_dir, pwfile):
                    os.chown(path, entry.pw_uid, entry.pw_gid)
                self.data_dir.chmod(0o700)
                self._check_reachable(owner)
            done = subprocess.run(
                self._as_owner(
                    [
                        self._bin("initdb"),
                        "-D",
                        str(self.data_dir),
                        "-U",
                        self.user,
                        f"--pwfile={pwfile}",
                        "--auth-host=scram-sha-256",
                        "--auth-local=scram-sha-256",
                        "-E",
                        "UTF8",
                        "--no-locale",
                        "--no-sync",
                    ]
                ),
                capture_output=True,
                text=True,
                check=False,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        if done.returncode != 0:
            shutil.rmtree(self.data_dir, ignore_errors=True)
            raise ServiceError(f"initdb failed ({done.returncode}):\n{(done.stdout + done.stderr)[-2000:]}")

    def _check_reachable(self, owner: str) -> None:
        probe = subprocess.run(
            [
                "setpriv",
                f"--reuid={owner}",
                f"--regid={owner}",
                "--init-groups",
                "--",
                "test",
                "-w",
                str(self.data_dir),
            ],
            check=False,
        )
        if probe.returncode != 0:
            raise ServiceError(
                f"{self.name}: user {owner!r} (PostgreSQL will not run as root) cannot reach {self.data_dir}; "
                "choose a SERVICES_DIR whose parent directories others may search (chmod o+x)"
            )

    def command(self) -> list[str]:
        return self._as_owner(
            [
                self._bin("postgres"),
                "-D",
                str(self.data_dir),
                "-c",
                f"listen_addresses={self.host}",
                "-c",
                f"port={self.port}",
                "-c",
                "unix_socket_directories=",
                # A test and development server: durability is not needed, speed is.
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ]
        )

    def ready(self) -> bool:
        if not port_open(self.host, self.port, timeout=0.5):
            return False
        probe = subprocess.run(
            [self._bin("pg_isready"), "-q", "-h", self.host, "-p", str(self.port), "-U", self.user, "-d", "postgres"],
            check=False,
        )
        return probe.returncode == 0

    def start(self, timeout: float = 60.0) -> None:
        super().start(timeout)
        self.ensure_database()

    def ensure_database(self) -> None:
        """Create the ``kcp`` database once (tests create their own ``test_kcp`` next to it)."""
        env = dict(os.environ, PGPASSWORD=self.password())
        common = ["-h", self.host, "-p", str(self.port), "-U", self.user]
        exists = subprocess.run(
            [
                self._bin("psql"),
                *common,
                "-d",
                "postgres",
                "-tAc",
                f"SELECT 1 FROM pg_database WHERE datname = '{self.database}'",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if exists.returncode != 0:
            raise ServiceError(f"{self.name}: cannot query the server: {exists.stderr.strip()}")
        if exists.stdout.strip() == "1":
            return
        made = subprocess.run(
            [self._bin("createdb"), *common, self.database], env=env, capture_output=True, text=True, check=False
        )
        if made.returncode != 0:
            raise ServiceError(f"{self.name}: createdb {self.database} failed: {made.stderr.strip()}")

    def stop(self, timeout: float = 30.0, sig: int = signal.SIGINT) -> bool:
        """Fast shutdown (SIGINT to the postmaster, which ends its own backends); SIGKILL after ``timeout``."""
        stopped = stop_recorded(self.pid_file, timeout, sig, group=False)
        if self.process is not None:
            with contextlib.suppress(Exception):
                self.process.wait(timeout=1)
            self.process = None
        return stopped


def missing_debian_packages(postgres: bool = False) -> list[str]:
    """Debian packages the stack needs that this machine lacks (``postgresql`` only when asked)."""
    missing = []
    if postgres and postgres_bin_dir() is None:
        missing.append("postgresql")
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
    """The services of one environment (dev stack, a test session, a benchmark).

    ZooKeeper and Redis always, the warm Spark Connect server when ``spark_port`` is set (the dev
    stack); PostgreSQL on demand (``up(postgres=True)``): SQLite stays the
    dashboard's embedded default, PostgreSQL is what CI runs the Django tests on."""

    base_dir: Path
    zk_port: int
    redis_port: int
    pg_port: int = DEFAULT_PG_PORT
    host: str = "127.0.0.1"
    zk_heap_mb: int = 512  # the benchmark raises it for a million partitions
    spark_port: int = 0  # a Spark Connect server too when non-zero (the dev stack; tests start their own)

    @property
    def zookeeper(self) -> ZooKeeperServer:
        return ZooKeeperServer(host=self.host, port=self.zk_port, base_dir=self.base_dir, heap_mb=self.zk_heap_mb)

    @property
    def redis(self) -> RedisServer:
        return RedisServer(host=self.host, port=self.redis_port, base_dir=self.base_dir)

    @property
    def spark(self) -> SparkConnectServer | None:
        if not self.spark_port:
            return None
        return SparkConnectServer(
            host=self.host,
            port=self.spark_port,
            base_dir=self.base_dir,
            master=os.environ.get("SPARK_CONNECT_MASTER", "local[*]"),
            driver_memory=os.environ.get("SPARK_CONNECT_MEMORY", "4g"),
        )

    @property
    def postgres(self) -> PostgresServer:
        return PostgresServer(host=self.host, port=self.pg_port, base_dir=self.base_dir)

    def up(self, *, postgres: bool = False, core: bool = True) -> None:
        if core:
            self.zookeeper.start()
            self.redis.start()
            if self.spark is not None:
                self.spark.start(timeout=120.0)  # a cold JVM on a busy 2-core machine takes 15-40 s
        if postgres:
            self.postgres.start()

    def down(self) -> None:
        if self.spark is not None:
            self.spark.stop()
        self.postgres.stop()  # only when this set started it (its pid file names a live process of ours)
        self.redis.stop()
        self.zookeeper.stop()

    def status(self) -> list[str]:
        lines = [self.zookeeper.status_line(), self.redis.status_line()]
        if self.spark is not None:
            lines.append(self.spark.status_line())
        if self.postgres.data_dir.exists():
            lines.append(self.postgres.status_line())
        return lines


def default_service_set() -> ServiceSet:
    return ServiceSet(
        base_dir=Path(os.environ.get("SERVICES_DIR", DEFAULT_VAR / "services")),
        zk_port=int(os.environ.get("ZK_PORT", DEFAULT_ZK_PORT)),
        redis_port=int(os.environ.get("REDIS_PORT", DEFAULT_REDIS_PORT)),
        spark_port=int(os.environ.get("SPARK_CONNECT_PORT", DEFAULT_SPARK_CONNECT_PORT)),
        pg_port=int(os.environ.get("PG_PORT", DEFAULT_PG_PORT)),
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


SERVICE_NAMES = ("zookeeper", "redis", "postgresql")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/services",
        description="Private ZooKeeper, Redis, the analytics' Spark Connect server (and on demand PostgreSQL)"
        " on loopback ports, data under var/services.",
    )
    parser.add_argument("action", choices=["up", "down", "status", "env"])
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="up/env: which of zookeeper, redis, postgresql (default: zookeeper redis; postgresql only when named)",
    )
    parser.add_argument("--no-install", action="store_true", help="fail instead of installing packages")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(SERVICE_NAMES))
    if unknown:
        parser.error(f"unknown service {', '.join(unknown)} (choose from {', '.join(SERVICE_NAMES)})")
    names = set(args.names or ("zookeeper", "redis"))
    core = bool(names & {"zookeeper", "redis"})
    services = default_service_set()
    try:
        if args.action == "up":
            missing = missing_debian_packages(postgres="postgresql" in names)
            if missing and args.no_install:
                raise ServiceError("missing: " + ", ".join(missing))
            install_debian_packages(missing)
            services.up(postgres="postgresql" in names, core=core)
            print("\n".join(services.status()))
        elif args.action == "down":
            services.down()
            print("\n".join(services.status()))
        elif args.action == "status":
            print("\n".join(services.status()))
            spark_ok = services.spark is None or services.spark.running()
            return 0 if services.zookeeper.running() and services.redis.running() and spark_ok else 3
        else:  # env: lines a shell can eval
            if core:
                print(f"export ZOOKEEPER_CONNECT={services.zookeeper.connect_string}")
                print(f"export REDIS_URL={services.redis.url}")
                if services.spark is not None:
                    print(f"export SPARK_REMOTE={services.spark.remote}")
            if "postgresql" in names:
                if not services.postgres.running():
                    raise ServiceError("postgresql is not running: `scripts/services up postgresql`")
                print(f"export DATABASE_URL={services.postgres.url}")
    except (ServiceError, subprocess.CalledProcessError) as exc:
        print(f"services: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
