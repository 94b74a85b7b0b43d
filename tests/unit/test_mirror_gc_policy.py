"""The mirror's collector policy in a storm: paused while work is queued, back when idle or capped."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from workers.mirror.gc_policy import StormPause


@pytest.fixture
def collector_on() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        if not was_enabled:
            gc.disable()


def test_the_collector_is_paused_while_busy_and_resumes_when_idle(collector_on: None) -> None:
    pause = StormPause(max_pause_s=5.0)
    pause.update(0.0, busy=False)
    assert gc.isenabled() and not pause.paused
    pause.update(0.1, busy=True)
    assert not gc.isenabled() and pause.paused
    pause.update(1.0, busy=True)
    assert not gc.isenabled()
    pause.update(1.1, busy=False)
    assert gc.isenabled() and not pause.paused
    assert pause.pauses == 1


def test_a_storm_longer_than_the_cap_lets_the_collector_run_between_pauses(collector_on: None) -> None:
    pause = StormPause(max_pause_s=5.0)
    pause.update(0.0, busy=True)
    pause.update(4.9, busy=True)
    assert not gc.isenabled()
    pause.update(5.0, busy=True)  # capped: one turn with the collector on
    assert gc.isenabled() and not pause.paused
    pause.update(5.1, busy=True)
    assert not gc.isenabled() and pause.pauses == 2
    pause.release()  # the mirror stopping
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off(collector_on: None) -> None:
    gc.disable()
    pause = StormPause()
    pause.update(0.0, busy=True)
    pause.update(1.0, busy=False)
    assert not gc.isenabled()


def test_two_mirrors_in_one_process_resume_it_only_when_both_are_idle(collector_on: None) -> None:
    first, second = StormPause(), StormPause()
    first.update(0.0, busy=True)
    second.update(0.0, busy=True)
    first.update(1.0, busy=False)
    assert not gc.isenabled()  # the second is still in its storm
    second.update(1.0, busy=False)
    assert gc.isenabled()
