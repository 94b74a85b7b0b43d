"""Real broker agents for integration tests: ``AgentProcess`` runs one, ``Agents`` a test's set.

Why here: the controller, broker, reassignment, ACL, election and browser tests all start real
agents (``python -m controller_core.broker.main``) against the test's ZooKeeper chroot and talk to
them over their real HTTP endpoint; the ``agents`` fixture (tests/integration/controller_fixtures.py)
kills every one a test started.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller_core.model import TopicPartition
from controller_core.protocol.client import JsonConnection
from controller_core.protocol.messages import (
    ControlRequest,
    ControlResponse,
    LiveLeader,
    control_request_path,
    decode_control_response,
    encode_control_request,
)
from scripts.devservices import REPO_ROOT, free_port
from tests.support.zk import wait_for


@dataclass
class AgentProcess:
    """One broker agent process (start it with ``start()``; ``close()`` always kills it)."""

    broker_id: int
    zookeeper: str
    work_dir: Path
    extra_args: Sequence[str] = ()
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def ready_file(self) -> Path:
        return self.work_dir / f"broker-{self.broker_id}.ready"

    @property
    def log_file(self) -> Path:
        return self.work_dir / f"broker-{self.broker_id}.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def epoch(self) -> int:
        return int(self.info["epoch"])

    def live_leader(self) -> LiveLeader:
        return LiveLeader(self.broker_id, "127.0.0.1", self.port)

    def start(self, wait: bool = True) -> AgentProcess:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.ready_file.unlink(missing_ok=True)
        argv = [
            sys.executable,
            "-m",
            "controller_core.broker.main",
            "--id",
            str(self.broker_id),
            "--zookeeper",
            self.zookeeper,
            "--port",
            str(self.port),
            "--ready-file",
            str(self.ready_file),
            "--zookeeper-session-timeout-ms",
            "4000",
            "--replica-fetch-wait-ms",
            "20",
            "--replica-fetch-backoff-ms",
            "100",
            "--controlled-shutdown-retry-backoff-ms",
            "100",
            "--alter-isr-retry-backoff-ms",
            "100",
            "--request-timeout-ms",
            "5000",
            *self.extra_args,
        ]
        with open(self.log_file, "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=REPO_ROOT)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 30.0) -> dict[str, Any]:
        def ready() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"broker {self.broker_id} exited with {self.process.returncode}:\n{self.log()}")
            return self.ready_file.exists()

        wait_for(ready, timeout=timeout, what=f"broker {self.broker_id} to register")
        self.info = json.loads(self.ready_file.read_text())
        return self.info

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-6000:]
        except FileNotFoundError:
            return "(no log)"

    def state(self, **query: str) -> dict[str, Any]:
        conn = JsonConnection("127.0.0.1", self.port, timeout=10.0)
        try:
            suffix = "?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else ""
            state: dict[str, Any] = json.loads(conn.get("/v1/state" + suffix))
            return state
        finally:
            conn.close()

    def hosted_replica(self, tp: TopicPartition) -> dict[str, Any] | None:
        """The broker's view of its replica of ``tp``; None while it does not host it (yet)."""
        for entry in self.state(topic=tp.topic)["replicas"]:
            if entry["partition"] == tp.partition:
                return dict(entry)
        return None

    def replica(self, tp: TopicPartition) -> dict[str, Any]:
        entry = self.hosted_replica(tp)
        if entry is None:
            raise AssertionError(f"broker {self.broker_id} does not host {tp}")
        return entry

    def send(self, request: ControlRequest) -> ControlResponse:
        conn = JsonConnection("127.0.0.1", self.port, timeout=30.0)
        try:
            return decode_control_response(
                request.kind, conn.post(control_request_path(request), encode_control_request(request))
            )
        finally:
            conn.close()

    def signal(self, sig: signal.Signals) -> None:
        assert self.process is not None
        os.kill(self.process.pid, sig)

    def wait_exit(self, timeout: float = 30.0) -> int:
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"broker {self.broker_id} still runs after {timeout}s:\n{self.log()}") from None

    def close(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGCONT)
                os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)


class Agents:
    """Creates agents for one test and kills every one of them afterwards."""

    def __init__(self, zookeeper: str, work_dir: Path) -> None:
        self.zookeeper = zookeeper
        self.work_dir = work_dir
        self.started: list[AgentProcess] = []

    def start(self, broker_id: int, *extra_args: str, wait: bool = True) -> AgentProcess:
        agent = AgentProcess(broker_id, self.zookeeper, self.work_dir, extra_args)
        self.started.append(agent)
        return agent.start(wait=wait)

    def start_all(
        self, broker_ids: Iterable[int], *extra_args: str, per_broker: Mapping[int, Sequence[str]] | None = None
    ) -> dict[int, AgentProcess]:
        """Start several agents at once and wait until every one has registered; id -> agent.

        Why: an agent's start-up is mostly its interpreter importing (most of a second, more under
        load); launched together, their start-ups overlap instead of adding up. Registration order
        is then any order, so use it where the agents are up before anything reacts to them (no
        controller yet, or one that must cope with brokers arriving in any order, as in production).
        ``per_broker`` adds arguments for one broker (its rack, say) after ``extra_args``.
        """
        launched: dict[int, AgentProcess] = {}
        for b in broker_ids:
            args = (*extra_args, *(per_broker or {}).get(b, ()))
            launched[b] = self.start(b, *args, wait=False)
        for agent in launched.values():
            agent.wait_ready()
        return launched

    def close(self) -> None:
        for agent in self.started:
            agent.close()
