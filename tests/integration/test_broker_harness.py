"""The broker-agent test harness, and the tests of the harness itself.

The other ``test_broker_*`` integration modules import from here (real broker agents are
``tests.support.broker_agents``, and the ``agents`` fixture comes from the integration conftest):

* ``FakeController`` serves the controller's API (AlterIsr, ControlledShutdown) on a real port and
  registers it in ``/controller`` the way the active controller does, recording every request and
  answering as a test scripts it;
* request builders play the controller's part for LeaderAndIsr / StopReplica / UpdateMetadata.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence

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
    ErrorCode,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    decode,
    encode,
)
from controller_core.protocol.server import JsonHttpServer
from controller_core.zk import codecs, paths
from tests.support.broker_agents import AgentProcess, Agents

CONTROLLER_ID = 100


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
