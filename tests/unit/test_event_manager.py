"""The controller's single event thread: order, preemption, metrics."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import field

import pytest

from controller_core.controller_state import ControllerState
from controller_core.event_manager import ControllerEventManager
from controller_core.events import BrokerChange, ControlledShutdown, ControllerEvent, Expire, TopicChange


class Gate(ControllerEvent):
    """Blocks the event thread until released, so tests can queue events behind it."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def seen() -> list[ControllerEvent]:
    return []


@pytest.fixture
def manager(seen: list[ControllerEvent]) -> Iterator[ControllerEventManager]:
    def handle(event: ControllerEvent) -> None:
        if isinstance(event, Gate):
            event.entered.set()
            event.release.wait(5)
        seen.append(event)

    m = ControllerEventManager(handle, name="test-events")
    m.start()
    yield m
    m.close(timeout=5)


def test_events_are_processed_in_order(manager: ControllerEventManager, seen: list[ControllerEvent]) -> None:
    events = [BrokerChange(), TopicChange(), BrokerChange()]
    for event in events:
        manager.put(event)
    gate = Gate()
    gate.release.set()
    manager.put(gate)
    assert gate.entered.wait(5)  # the gate runs only after every earlier event
    assert seen[:3] == events


def test_clear_and_put_preempts_queued_events_and_answers_their_callers(
    manager: ControllerEventManager, seen: list[ControllerEvent]
) -> None:
    gate = Gate()
    manager.put(gate)
    assert gate.entered.wait(5)
    answers: list[int] = []
    shutdown = ControlledShutdown(1, 5, lambda error, remaining: answers.append(error))
    manager.put(shutdown)
    manager.put(BrokerChange())
    expire = manager.clear_and_put(Expire())  # must not deadlock on its own lock
    gate.release.set()
    assert expire.await_processing(5)
    assert answers == [41]  # NOT_CONTROLLER
    assert shutdown not in seen


def test_queue_and_state_metrics(manager: ControllerEventManager) -> None:
    gate = Gate()
    manager.put(gate)
    assert gate.entered.wait(5)
    manager.put(BrokerChange())
    assert manager.queue_size == 1
    gate.release.set()
    last = manager.put(TopicChange())
    assert last.await_processing(5)
    for _ in range(100):
        if manager.metrics.per_state.get(ControllerState.TOPIC_CHANGE):
            break
        threading.Event().wait(0.01)
    assert manager.metrics.per_state[ControllerState.BROKER_CHANGE].count == 1
    assert manager.metrics.queue_time_count >= 3
    assert manager.metrics.events_processed >= 3


def test_state_timers_separate_the_event_threads_cpu_from_waiting() -> None:
    """A handler that waits (as for ZooKeeper) costs wall time, not CPU; one that computes costs both."""

    def handle(event: ControllerEvent) -> None:
        if isinstance(event, BrokerChange):
            time.sleep(0.3)
        elif isinstance(event, TopicChange):
            deadline = time.thread_time() + 0.2
            while time.thread_time() < deadline:
                pass

    m = ControllerEventManager(handle, name="test-cpu")
    m.start()
    try:
        m.put(BrokerChange())
        assert m.put(TopicChange()).await_processing(5)
        for _ in range(500):
            if ControllerState.TOPIC_CHANGE in m.metrics.per_state:
                break
            time.sleep(0.01)
    finally:
        m.close(timeout=5)
    waited = m.metrics.per_state[ControllerState.BROKER_CHANGE]
    computed = m.metrics.per_state[ControllerState.TOPIC_CHANGE]
    assert waited.total_ms >= 300 and waited.cpu_ms < 100
    assert computed.cpu_ms >= 200 and computed.total_ms >= computed.cpu_ms * 0.99
    assert m.metrics.per_event["TopicChange"].cpu_ms == computed.cpu_ms


def test_an_exception_in_a_handler_does_not_stop_the_thread() -> None:
    seen: list[ControllerEvent] = []

    def handle(event: ControllerEvent) -> None:
        if isinstance(event, BrokerChange):
            raise RuntimeError("boom")
        seen.append(event)

    m = ControllerEventManager(handle)
    m.start()
    try:
        m.put(BrokerChange())
        assert m.put(TopicChange()).await_processing(5)
    finally:
        m.close(timeout=5)


def test_an_answer_from_a_big_event_is_not_held_back_by_its_collection() -> None:
    """The thread an event wakes (the API thread with a shutdown's answer) runs before the collection."""
    woke = threading.Event()
    kept: list[object] = []
    seen_at_wake: list[tuple[int, bool]] = []

    def handle(event: ControllerEvent) -> None:
        if isinstance(event, BrokerChange):
            kept.append([[i] for i in range(60_000)])  # a big event: over the policy's young limit
            woke.set()

    m = ControllerEventManager(handle, name="test-gc-events")
    policy = m._gc

    def answer() -> None:
        woke.wait(5)
        seen_at_wake.append((policy.collections, policy.collection_pending))

    answering = threading.Thread(target=answer)
    answering.start()
    m.start()
    try:
        m.put(BrokerChange())
        answering.join(5)
        assert seen_at_wake == [(0, True)]  # woken before the collection ran
        deadline = time.monotonic() + 2
        while policy.collections == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert policy.collections == 1 and not policy.collection_pending  # then it ran, after defer_s
    finally:
        m.close(timeout=5)


def test_timer_names_follow_kafka() -> None:
    assert ControllerState.BROKER_CHANGE.timer_name == "LeaderElectionRateAndTimeMs"
    assert ControllerState.TOPIC_CHANGE.timer_name == "TopicChangeRateAndTimeMs"
    assert ControllerState.IDLE.timer_name is None
