"""The mirror's collector policy: paused in a storm while work is queued, back when idle or capped; the
idle full collection never taken while anyone in the process holds the collector paused."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from controller_core.gc_policy import gc_paused
from workers.mirror.gc_policy import IdleCollector, StormPause


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


def test_the_idle_collection_waits_while_another_mirror_holds_the_collector_paused(collector_on: None) -> None:
    """One worker, two mirrors: the small one's idle full pass in the middle of the big one's sync
    stalled the small one's heartbeats (test_hosting_workers). It waits for the pause to end."""
    idle = IdleCollector(interval_s=300.0)
    with gc_paused():  # the big mirror's full sync, or a storm
        idle.maybe_collect(10.0, idle=True)
        assert idle.collections == 0
    idle.maybe_collect(10.5, idle=True)  # the next heartbeat
    assert idle.collections == 1
    idle.maybe_collect(11.0, idle=True)
    assert idle.collections == 1  # then one interval until the next


def test_a_sync_postpones_the_idle_collection_by_an_interval(collector_on: None) -> None:
    idle = IdleCollector(interval_s=300.0)
    idle.synced(100.0)  # the sync scanned what it built a moment ago
    idle.maybe_collect(101.0, idle=True)
    idle.maybe_collect(399.0, idle=True)
    assert idle.collections == 0
    idle.maybe_collect(400.0, idle=False)  # busy: not now
    assert idle.collections == 0
    idle.maybe_collect(400.5, idle=True)
    assert idle.collections == 1
