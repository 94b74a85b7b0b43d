"""A ZooKeeper ensemble on loopback (3 ``QuorumPeerMain`` processes from the Debian jars), for the soak tier.

Each server has its own client, peer and election ports (all free loopback ports), ``tickTime=500``
and session timeouts between 1 s and 10 s as the plan asks, and the ``srvr``/``dump`` four-letter
words the harness uses to find the leader and list sessions. Servers are processes of our own: they
can be SIGKILLed, SIGSTOPped and restarted on the same data directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from scripts.devservices import ZooKeeperServer, four_letter_word, free_port


@dataclass(kw_only=True)
class QuorumPeer(ZooKeeperServer):
    """One member of an ensemble; ``peers`` is ``[(server id, peer port, election port, client port)]``."""

    server_id: int
    peers: list[tuple[int, int, int, int]] = field(default_factory=list)
    heap_mb: int = 160

    def prepare(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "myid").write_text(f"{self.server_id}\n")
        lines = [
            f"tickTime={self.tick_ms}",
            "initLimit=10",
            "syncLimit=5",
            f"dataDir={self.data_dir}",
            f"clientPort={self.port}",
            f"clientPortAddress={self.host}",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,dump,cons",
            "minSessionTimeout=1000",
            "maxSessionTimeout=10000",
            "maxClientCnxns=0",
            "jute.maxbuffer=4194304",
            "autopurge.snapRetainCount=3",
            "autopurge.purgeInterval=1",
        ]
        lines += [f"server.{sid}=127.0.0.1:{peer}:{election}" for sid, peer, election, _client in self.peers]
        self.config_file.write_text("\n".join(lines) + "\n")

    def ready(self) -> bool:
        """Serving: a quorum member, or the one server of a one-node ensemble (``srvr`` says standalone)."""
        return self.mode() in ("leader", "follower", "standalone")

    def mode(self) -> str | None:
        """``leader``, ``follower``, ``standalone`` or None (not serving), from ``srvr``."""
        answer = four_letter_word(self.host, self.port, "srvr", timeout=1.0)
        for line in answer.splitlines():
            if line.startswith("Mode:"):
                return line.split(":", 1)[1].strip()
        return None

    def signal(self, sig: int) -> None:
        pid = self.recorded_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)


class ZkEnsemble:
    """``size`` servers (1 or 3) under ``base_dir``; ``connect_string`` lists every client port."""

    def __init__(self, base_dir: Path, size: int = 3) -> None:
        if size < 1:
            raise ValueError("an ensemble needs at least one server")
        spec = [(sid, free_port(), free_port(), free_port()) for sid in range(1, size + 1)]
        self.servers = [
            QuorumPeer(
                name=f"zk{sid}",
                host="127.0.0.1",
                port=client,
                base_dir=base_dir,
                server_id=sid,
                peers=spec if size > 1 else [],
            )
            for sid, _peer, _election, client in spec
        ]

    @property
    def connect_string(self) -> str:
        return ",".join(s.connect_string for s in self.servers)

    @property
    def addresses(self) -> list[tuple[str, int]]:
        return [(s.host, s.port) for s in self.servers]

    def start(self, timeout: float = 60.0) -> None:
        for s in self.servers:  # start all first: none is ready until a quorum is up
            s.spawn()
        for s in self.servers:
            s.wait_ready(timeout)

    def leader(self) -> QuorumPeer | None:
        return next((s for s in self.servers if s.mode() in ("leader", "standalone")), None)

    def restart(self, server: QuorumPeer, timeout: float = 60.0) -> None:
        server.start(timeout=timeout)

    def wait_quorum(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.leader() is not None:
                return
            time.sleep(0.1)
        raise TimeoutError("the ensemble has no leader")

    def stop(self) -> None:
        for s in self.servers:
            s.signal(signal.SIGCONT)
            s.stop(timeout=10)
