"""Windowed queue-time percentiles of the controller's event loop (F20: p99 during a Redis pause)."""

from __future__ import annotations

import threading
import time
from dataclasses import field

import pytest

from controller_core.event_manager import ControllerEventManager, QueueTimeSamples, percentile
from controller_core.events import BrokerChange, ControllerEvent

pytestmark = pytest.mark.unit


class Gate(ControllerEvent):
    """Blocks the event thread until released, so events queue behind it."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)


def _handle(event: ControllerEvent) -> None:
    if isinstance(event, Gate):
        event.entered.set()
        event.release.wait(5)


def test_nearest_rank_percentile() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 99) == 99.0
    assert percentile(values, 50) == 50.0
    assert percentile(values, 100) == 100.0
    assert percentile([7.0], 99) == 7.0
    assert percentile([], 99) is None


def test_samples_are_bounded_and_selected_by_time() -> None:
    samples = QueueTimeSamples(capacity=3)
    for at, ms in [(1.0, 10.0), (2.0, 20.0), (3.0, 30.0), (4.0, 40.0)]:
        samples.add(at, ms)
    assert len(samples) == 3  # the oldest fell off
    assert sorted(samples.between(0.0)) == [20.0, 30.0, 40.0]
    assert sorted(samples.between(2.5, 3.5)) == [30.0]
    assert samples.between(5.0) == []


def test_p99_over_a_window_ignores_samples_outside_it() -> None:
    manager = ControllerEventManager(_handle, name="p99-test")  # not started: samples fed by hand
    manager.metrics.observe_queue_time(5_000.0, at=50.0)  # a slow event long before the window
    for i in range(100):
        manager.metrics.observe_queue_time(5.0, at=100.0 + i * 0.01)
    assert manager.queue_time_percentile(99, since=100.0, until=102.0) == 5.0
    assert manager.queue_time_percentile(99, since=0.0, until=102.0) == 5.0  # 1 of 101: above p99
    assert manager.queue_time_percentile(100, since=0.0, until=102.0) == 5_000.0
    assert manager.queue_time_percentile(99, since=200.0, until=300.0) is None


def test_an_open_window_counts_events_still_waiting_behind_a_blocked_loop() -> None:
    manager = ControllerEventManager(_handle, name="p99-blocked")
    manager.start()
    gate = Gate()
    try:
        manager.put(gate)
        assert gate.entered.wait(5)
        since = time.monotonic()
        manager.put(BrokerChange())  # queued behind the blocked gate: not yet taken
        time.sleep(0.3)
        p99 = manager.queue_time_percentile(99, since=since)
        assert p99 is not None and p99 >= 250.0
        assert manager.recent_queue_time_figures()["event_queue_time_ms_p99_10s"] >= 250.0
    finally:
        gate.release.set()
        manager.close(timeout=5)


def test_status_p99s_reflect_recent_queue_times() -> None:
    manager = ControllerEventManager(_handle, name="p99-status")
    manager.start()
    try:
        gate = Gate()
        manager.put(gate)
        assert gate.entered.wait(5)
        manager.put(BrokerChange())
        time.sleep(0.2)
        gate.release.set()
        done = Gate()
        done.release.set()
        manager.put(done)
        assert done.entered.wait(5)
        p99s = manager.recent_queue_time_figures()
        assert set(p99s) == {
            "event_queue_time_ms_p99_10s",
            "event_queue_time_ms_p99_30s",
            "event_queue_time_ms_p99_60s",
            "event_queue_time_ms_p50",
        }
        assert p99s["event_queue_time_ms_p99_10s"] >= 150.0  # the event that waited behind the gate
    finally:
        manager.close(timeout=5)
