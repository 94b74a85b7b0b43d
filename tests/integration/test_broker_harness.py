"""The broker-agent test harness, and the tests of the harness itself.

The other ``test_broker_*`` integration modules import from here:

* ``AgentProcess`` runs a real broker agent (``python -m controller_core.broker.main``) against
  the test's ZooKeeper chroot, and talks to it over its real HTTP endpoint;
* ``FakeController`` serves the controller's API (AlterIsr, ControlledShutdown) on a real port and
  registers it in ``/controller`` the way the active controller does, recording every request and
  answering as a test scripts it;
* request builders play the controller's part for LeaderAndIsr / StopReplica / UpdateMetadata.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from controller_core.protocol.client import JsonConnection
from controller_core.protocol.messages import (
    ALTER_ISR_PATH,
    CONTROLLED_SHUTDOWN_PATH,
    AlterIsrPartitionResult,
    AlterIsrRequest,
    AlterIsrResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ControlRequest,
    ControlResponse,
    ErrorCode,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveLeader,
    control_request_path,
    decode,
    decode_control_response,
    encode,
    encode_control_request,
)
from controller_core.protocol.server import JsonHttpServer
from controller_core.zk import codecs, paths
from scripts.devservices import REPO_ROOT, free_port
from tests.support.zk import wait_for

CONTROLLER_ID = 100


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

    def close(self) -> None:
        for agent in self.started:
            agent.close()


@pytest.fixture
def agents(zk_chroot: str, tmp_path: Path) -> Iterator[Agents]:
    group = Agents(zk_chroot, tmp_path)
    try:
        yield group
    finally:
        group.close()


class FakeController:
    """The controller's broker-facing API, scripted by the test and registered in ``/controller``.

    AlterIsr proposals are accepted (the ISR version goes up by one) unless ``alter_isr_error`` is
    set; ControlledShutdown answers come from ``shutdown_answers`` in turn, then success.
    """

    def __init__(self, zk: KazooClient, controller_id: int = CONTROLLER_ID) -> None:
        self.zk = zk
        self.controller_id = controller_id
        self.alter_isr_requests: list[AlterIsrRequest] = []
        self.shutdown_requests: list[ControlledShutdownRequest] = []
        self.shutdown_answers: list[ControlledShutdownResponse] = []
        self.alter_isr_error: ErrorCode | None = None
        self.isr: dict[TopicPartition, tuple[int, ...]] = {}
        self._lock = threading.Lock()
        self.server = JsonHttpServer(
            "127.0.0.1",
            0,
            post={ALTER_ISR_PATH: self._alter_isr, CONTROLLED_SHUTDOWN_PATH: self._controlled_shutdown},
            name="fake-controller",
        )
        self.server.start()

    def register(self) -> FakeController:
        extra = {"endpoint": self.server.url}
        self.zk.create(paths.CONTROLLER_PATH, codecs.encode_controller(self.controller_id, extra=extra), ephemeral=True)
        return self

    def _alter_isr(self, body: bytes) -> bytes:
        request = decode(body, AlterIsrRequest, "AlterIsr request")
        with self._lock:
            self.alter_isr_requests.append(request)
            results = []
            for p in request.partitions:
                if self.alter_isr_error is not None:
                    results.append(AlterIsrPartitionResult(p.topic, p.partition, self.alter_isr_error))
                    continue
                self.isr[p.topic_partition] = p.new_isr
                results.append(
                    AlterIsrPartitionResult(
                        p.topic,
                        p.partition,
                        ErrorCode.NONE,
                        request.broker_id,
                        p.leader_epoch,
                        p.new_isr,
                        p.current_isr_version + 1,
                    )
                )
        return encode(AlterIsrResponse(ErrorCode.NONE, tuple(results)))

    def _controlled_shutdown(self, body: bytes) -> bytes:
        request = decode(body, ControlledShutdownRequest, "ControlledShutdown request")
        with self._lock:
            self.shutdown_requests.append(request)
            answer = self.shutdown_answers.pop(0) if self.shutdown_answers else ControlledShutdownResponse()
        return encode(answer)

    def proposed_isrs(self, tp: TopicPartition) -> list[tuple[int, ...]]:
        with self._lock:
            return [p.new_isr for r in self.alter_isr_requests for p in r.partitions if p.topic_partition == tp]

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def controller(zk: KazooClient) -> Iterator[FakeController]:
    fake = FakeController(zk).register()
    try:
        yield fake
    finally:
        fake.close()


def partition_state(
    tp: TopicPartition,
    leader: int,
    leader_epoch: int,
    isr: Sequence[int],
    replicas: Sequence[int],
    *,
    controller_epoch: int = 1,
    zk_version: int = 0,
    is_new: bool = False,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        tp.topic,
        tp.partition,
        controller_epoch,
        leader,
        leader_epoch,
        tuple(isr),
        zk_version,
        tuple(replicas),
        is_new=is_new,
    )


def leader_and_isr(
    target: AgentProcess,
    states: Sequence[LeaderAndIsrPartitionState],
    leaders: Sequence[AgentProcess],
    *,
    controller_epoch: int = 1,
    broker_epoch: int | None = None,
) -> LeaderAndIsrRequest:
    """A LeaderAndIsr request for ``target``, as the controller would build it."""
    return LeaderAndIsrRequest(
        CONTROLLER_ID,
        controller_epoch,
        target.epoch if broker_epoch is None else broker_epoch,
        list(states),
        [leader.live_leader() for leader in leaders],
    )


# -- tests of the harness ---------------------------------------------------------------------------


def test_an_agent_registers_and_reports_healthy(agents: Agents) -> None:
    agent = agents.start(1)
    conn = JsonConnection("127.0.0.1", agent.port, timeout=5.0)
    try:
        health = json.loads(conn.get("/healthz"))
    finally:
        conn.close()
    assert health == {"broker_id": 1, "broker_epoch": agent.epoch, "registered": True, "zookeeper_connected": True}
    state = agent.state()
    assert (state["id"], state["epoch"], state["replicas"]) == (1, agent.epoch, [])


def test_the_fake_controller_is_found_through_the_controller_znode(zk: KazooClient, controller: FakeController) -> None:
    info = codecs.decode_controller(zk.get(paths.CONTROLLER_PATH)[0])
    assert info.broker_id == CONTROLLER_ID
    assert info.extra["endpoint"] == controller.server.url
    conn = JsonConnection("127.0.0.1", controller.server.port)
    try:
        body = conn.post(CONTROLLED_SHUTDOWN_PATH, b'{"broker_id":1,"broker_epoch":5}')
        answer = decode(body, ControlledShutdownResponse, "answer")
    finally:
        conn.close()
    assert answer.succeeded
    assert controller.shutdown_requests == [ControlledShutdownRequest(1, 5)]
