"""The controller's collector policy: paused during events, young survivors frozen after big ones."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from controller_core.gc_policy import EventGcPolicy, gc_paused


@pytest.fixture(autouse=True)
def _restore_gc() -> Iterator[None]:
    was_enabled = gc.isenabled()
    gc.enable()
    try:
        yield
    finally:
        gc.unfreeze()
        if not was_enabled:
            gc.disable()


def test_the_collector_is_paused_during_an_event_and_restored_after() -> None:
    policy = EventGcPolicy()
    with policy.around_event():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_a_big_event_is_followed_by_one_collection_and_a_freeze() -> None:
    now = [0.0]
    policy = EventGcPolicy(young_limit=1000, full_every_s=3600, clock=lambda: now[0])
    frozen_before = gc.get_freeze_count()
    with policy.around_event():
        kept = [[i] for i in range(5000)]  # 5,000 tracked objects
    # Deferred (the event manager collects at its next look at the queue): still paused until then.
    assert policy.collection_pending and not gc.isenabled() and policy.collections == 0
    policy.collect_pending()
    assert not policy.collection_pending and gc.isenabled()
    assert policy.collections == 1
    assert gc.get_freeze_count() >= frozen_before + len(kept)
    assert gc.get_count()[0] < 1000


def test_small_events_leave_the_collector_alone_until_the_periodic_full_collection() -> None:
    now = [0.0]
    policy = EventGcPolicy(young_limit=10**9, full_every_s=60, clock=lambda: now[0])
    policy.after_event(queue_empty=True)
    assert (policy.collections, policy.full_collections) == (0, 0)
    now[0] = 61.0
    policy.after_event(queue_empty=False)  # busy: not now
    assert policy.full_collections == 0
    policy.after_event(queue_empty=True)
    assert policy.full_collections == 1


def test_a_disabled_collector_is_left_to_whoever_disabled_it() -> None:
    policy = EventGcPolicy(young_limit=0, full_every_s=0)
    gc.disable()
    try:
        with policy.around_event():
            kept = [[i] for i in range(100)]
        policy.after_event(queue_empty=True)
        assert (policy.collections, policy.full_collections, len(kept)) == (0, 0, 100)
    finally:
        gc.enable()


def test_a_bigger_event_than_one_pass_may_scan_is_frozen_without_a_collection() -> None:
    """A collection holds the interpreter lock: past the scan limit kazoo's heartbeats would starve."""
    policy = EventGcPolicy(young_limit=1000, max_scan_objects=2000)
    frozen_before = gc.get_freeze_count()
    collected_before = gc.get_stats()[0]["collections"]
    with policy.around_event():
        kept = [[i] for i in range(5000)]
    policy.collect_pending()
    assert (policy.collections, policy.freezes_without_collection) == (0, 1)
    assert gc.get_stats()[0]["collections"] == collected_before  # no pass over the 5,000
    assert gc.get_freeze_count() >= frozen_before + len(kept)


def test_the_periodic_full_collection_leaves_a_frozen_set_too_big_to_scan_frozen() -> None:
    now = [0.0]
    policy = EventGcPolicy(young_limit=1000, full_every_s=60, clock=lambda: now[0], max_scan_objects=3000)
    with policy.around_event():
        kept = [[i] for i in range(2500)]  # scanned and frozen
    with policy.around_event():  # collects the first event's objects before it starts
        kept += [[i] for i in range(2500)]  # frozen too: now more than 3,000 frozen
    policy.collect_pending()
    frozen = gc.get_freeze_count()
    assert frozen > 3000
    now[0] = 61.0
    policy.after_event(queue_empty=True)
    assert (policy.full_collections, policy.skipped_full_collections) == (0, 1)
    assert gc.get_freeze_count() >= frozen  # nothing was unfrozen for a full pass
    assert len(kept) == 5000


def test_a_pending_collection_runs_before_the_next_event_and_holds_back_the_periodic_one() -> None:
    now = [0.0]
    policy = EventGcPolicy(young_limit=1000, full_every_s=60, clock=lambda: now[0])
    with policy.around_event():
        kept = [[i] for i in range(5000)]
    now[0] = 61.0
    policy.after_event(queue_empty=True)  # paused for the pending collection: no full pass now
    assert (policy.full_collections, policy.collection_pending) == (0, True)
    with policy.around_event():
        assert not policy.collection_pending and policy.collections == 1
        assert not gc.isenabled()  # the event's own pause
    assert gc.isenabled() and len(kept) == 5000
    policy.after_event(queue_empty=True)
    assert policy.full_collections == 1


def test_the_collector_pause_nests_and_restores_the_previous_setting() -> None:
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
