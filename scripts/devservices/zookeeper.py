"""A private ZooKeeper, run straight from its jars (Debian's ``/usr/share/java`` or ``ZK_HOME``)."""

from __future__ import annotations

import os
import shlex
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

from scripts.devservices.process import ManagedProcess, ServiceError, java_binary

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


@dataclass(kw_only=True)
class ZooKeeperServer(ManagedProcess):
    """A standalone ZooKeeper 3.6+ server (multi-read needs 3.6) on a loopback port."""

    name: str = "zookeeper"
    tick_ms: int = 500
    heap_mb: int = 512
    #: More options for the JVM (split like a shell would), none by default: the test suite's servers
    #: run C1 only (tests/conftest.py), the product and the benchmarks keep Java's full JIT.
    java_options: str = ""

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
            *shlex.split(self.java_options),
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
