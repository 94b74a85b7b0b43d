"""AlterIsrManager: batching, one request in flight, retries, answers routed to their proposals."""

from __future__ import annotations

import threading
from collections.abc import Callable

from controller_core.broker.alter_isr import AlterIsrManager
from controller_core.broker.controller_client import ControllerUnavailableError
from controller_core.broker.partition import IsrProposal, IsrState
from controller_core.model import TopicPartition
from controller_core.protocol.messages import AlterIsrPartitionResult, AlterIsrRequest, AlterIsrResponse, ErrorCode
from tests.support.zk import wait_for

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def proposal(tp: TopicPartition, isr: tuple[int, ...] = (1, 2)) -> IsrProposal:
    return IsrProposal(tp, 3, isr, 7, IsrState((1, 2, 3), isr), expand=False)


def accepted(request: AlterIsrRequest) -> AlterIsrResponse:
    return AlterIsrResponse(
        ErrorCode.NONE,
        tuple(
            AlterIsrPartitionResult(
                p.topic, p.partition, ErrorCode.NONE, 1, p.leader_epoch, p.new_isr, p.current_isr_version + 1
            )
            for p in request.partitions
        ),
    )


class ScriptedController:
    """Answers each AlterIsr with the next scripted behaviour (then accepts everything)."""

    def __init__(self, *script: Callable[[AlterIsrRequest], AlterIsrResponse]) -> None:
        self.script = list(script)
        self.requests: list[AlterIsrRequest] = []
        self.refreshes = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()

    @property
    def controller_id(self) -> int | None:
        return 100

    def alter_isr(self, request: AlterIsrRequest) -> AlterIsrResponse:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.requests.append(request)
            behaviour = self.script.pop(0) if self.script else accepted
        try:
            return behaviour(request)
        finally:
            with self._lock:
                self.in_flight -= 1

    def refresh(self) -> str | None:
        self.refreshes += 1
        return None


def unreachable(request: AlterIsrRequest) -> AlterIsrResponse:
    raise ControllerUnavailableError("connection refused")


def not_controller(request: AlterIsrRequest) -> AlterIsrResponse:
    return AlterIsrResponse(ErrorCode.NOT_CONTROLLER)


def start(
    controller: ScriptedController, results: list[tuple[IsrProposal, AlterIsrPartitionResult]], **kwargs: object
) -> AlterIsrManager:
    manager = AlterIsrManager(
        1,
        lambda: 42,
        controller,
        lambda p, r: results.append((p, r)),
        retry_backoff_s=0.01,
        linger_s=0.02,
        **kwargs,  # type: ignore[arg-type]
    )
    manager.start()
    return manager


def test_proposals_travel_together_and_answers_reach_them() -> None:
    controller = ScriptedController()
    results: list[tuple[IsrProposal, AlterIsrPartitionResult]] = []
    manager = AlterIsrManager(1, lambda: 42, controller, lambda p, r: results.append((p, r)), linger_s=0.05)
    first, second = proposal(T0), proposal(T1)
    assert manager.submit(first) and manager.submit(second)
    manager.start()
    try:
        wait_for(lambda: len(results) == 2, timeout=5, what="both answers")
        assert len(controller.requests) == 1
        request = controller.requests[0]
        assert (request.broker_id, request.broker_epoch) == (1, 42)
        assert {p.topic_partition for p in request.partitions} == {T0, T1}
        assert {(p.topic_partition, r.zk_version) for p, r in results} == {(T0, 8), (T1, 8)}
    finally:
        manager.stop()


def test_a_second_proposal_for_a_waiting_partition_is_refused() -> None:
    manager = AlterIsrManager(1, lambda: 42, ScriptedController(), lambda p, r: None)
    assert manager.submit(proposal(T0))
    assert not manager.submit(proposal(T0, (1,)))
    assert manager.pending() == 1


def test_failed_requests_are_retried_with_the_controller_re_read() -> None:
    controller = ScriptedController(unreachable, not_controller)
    results: list[tuple[IsrProposal, AlterIsrPartitionResult]] = []
    manager = start(controller, results)
    try:
        manager.submit(proposal(T0))
        wait_for(lambda: len(results) == 1, timeout=5, what="the answer after two failures")
        assert len(controller.requests) == 3
        assert controller.refreshes >= 1
        assert manager.failures == 2
        assert controller.max_in_flight == 1
    finally:
        manager.stop()


def test_partitions_missing_from_an_answer_are_sent_again() -> None:
    def only_first(request: AlterIsrRequest) -> AlterIsrResponse:
        full = accepted(request)
        return AlterIsrResponse(ErrorCode.NONE, full.partitions[:1])

    controller = ScriptedController(only_first)
    results: list[tuple[IsrProposal, AlterIsrPartitionResult]] = []
    manager = AlterIsrManager(1, lambda: 42, controller, lambda p, r: results.append((p, r)), retry_backoff_s=0.01)
    manager.submit(proposal(T0))
    manager.submit(proposal(T1))
    manager.start()
    try:
        wait_for(lambda: len(results) == 2, timeout=5, what="both answers")
        assert len(controller.requests) == 2
        assert len(controller.requests[1].partitions) == 1
    finally:
        manager.stop()


def test_proposals_no_longer_current_are_not_resent() -> None:
    controller = ScriptedController(unreachable)
    results: list[tuple[IsrProposal, AlterIsrPartitionResult]] = []
    stale = proposal(T0)
    manager = start(controller, results, is_current=lambda p: p is not stale)
    try:
        manager.submit(stale)
        wait_for(lambda: len(controller.requests) == 1, timeout=5, what="the first attempt")
        wait_for(lambda: manager.failures == 1, timeout=5, what="the failure")
        assert manager.pending() == 0
        assert results == []
    finally:
        manager.stop()
