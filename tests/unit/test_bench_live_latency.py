"""How scripts/bench_live.py turns the page's render trace into a latency per committed batch."""

from __future__ import annotations

from scripts.bench_live import first_seen, latencies

OFFLINE = "p:OfflinePartition"
# The page rendered 10 offline partitions at t=100 ms, then none at t=150 ms.
TRACE = [{"t": 100.0, OFFLINE: 10}, {"t": 150.0, OFFLINE: 0}]


def test_the_first_render_showing_the_target_after_the_commit_is_when_it_was_seen() -> None:
    assert first_seen(TRACE, 120.0, OFFLINE, 0, rising=False) == 150.0
    assert latencies([120.0], 4, TRACE, OFFLINE, 10, -10) == [30.0] * 4


def test_a_page_already_showing_the_target_when_the_commit_returned_saw_it_at_the_commit() -> None:
    # Observed mode: the mirror read the change before the loaded writer recorded its commit time,
    # and no render came after it. This was counted as never seen (an infinite latency).
    assert first_seen(TRACE, 200.0, OFFLINE, 0, rising=False) == 200.0
    assert latencies([200.0], 2, TRACE, OFFLINE, 10, -10) == [0.0, 0.0]


def test_a_target_the_page_never_showed_stays_unseen() -> None:
    assert first_seen(TRACE[:1], 120.0, OFFLINE, 0, rising=False) is None
    # shown once but no longer shown at the commit: not seen for that commit
    assert first_seen(TRACE, 200.0, OFFLINE, 10, rising=True) is None
    assert latencies([200.0], 1, TRACE, OFFLINE, 0, 10) == [float("inf")]
