"""Per-partition progress of a reassignment (``dashboard.actions.reassign_progress``): states,
catch-up from the agents' offsets, rate and ETA from two samples, and the final status."""

from __future__ import annotations

from typing import Any

from controller_core.model import LeaderAndIsr, ReplicaAssignment
from controller_core.model import TopicPartition as TP
from dashboard.actions.reassign_progress import compute, final_status

T0, T1, T2 = TP("t", 0), TP("t", 1), TP("t", 2)
REQUESTED = {T0: (2, 3), T1: (3, 1), T2: (1, 3)}
ORIGIN = {T0: (1, 2), T1: (1, 2), T2: (1, 2)}


def agents(leo_3: int, leader_leo: int) -> dict[int, Any]:
    return {
        1: {T0: {"log_end_offset": leader_leo, "role": "leader"}},
        3: {T0: {"log_end_offset": leo_3, "role": "follower"}},
    }


def test_states_lag_rate_and_eta() -> None:
    assignments = {
        T0: ReplicaAssignment.of([2, 3, 1], adding=[3], removing=[1]),  # copying to 3
        T1: ReplicaAssignment.of([3, 1]),  # done
        T2: ReplicaAssignment.of([1, 2]),  # back on the origin, not requested any more: reverted
    }
    leaders = {T0: LeaderAndIsr(1, 1, (1, 2)), T1: LeaderAndIsr(3, 3, (3, 1)), T2: LeaderAndIsr(1, 0, (1, 2))}
    first = compute(REQUESTED, ORIGIN, assignments, leaders, {T0: (2, 3)}, agents(100, 1100), now=10.0)
    rows = {r["partition"]: r for r in first["partitions"]}
    assert [rows[p]["state"] for p in (0, 1, 2)] == ["copying", "complete", "reverted"]
    (new,) = rows[0]["new_replicas"]
    assert new == {
        "broker": 3,
        "in_isr": False,
        "log_end_offset": 100,
        "leader_log_end_offset": 1100,
        "lag": 1000,
        "rate": None,
        "eta_s": None,
        "copied_bytes": None,
        "copy_rate_bytes_s": None,
    }  # fmt: skip  (agents here report no size)
    assert first["done"] is False and first["eta_s"] is None
    # two seconds later the lag shrank by 400: 200 messages/s, 600 left -> 3 s
    second = compute(REQUESTED, ORIGIN, assignments, leaders, {T0: (2, 3)}, agents(600, 1200), 12.0, first)
    (new,) = second["partitions"][0]["new_replicas"]
    assert new["lag"] == 600 and new["rate"] == 200.0 and new["eta_s"] == 3.0
    assert second["eta_s"] == 3.0
    # the agent of the new replica is gone: its leader's view of the follower is used
    lead_only = {1: {T0: {"log_end_offset": 1300, "followers": [{"broker_id": 3, "log_end_offset": 1000}]}}}
    third = compute(REQUESTED, ORIGIN, assignments, leaders, {T0: (2, 3)}, lead_only, 13.0, second)
    assert third["partitions"][0]["new_replicas"][0]["lag"] == 300
    # no agent at all: unknown, not zero
    blind = compute(REQUESTED, ORIGIN, assignments, leaders, {T0: (2, 3)}, {}, 14.0, third)
    assert blind["partitions"][0]["new_replicas"][0]["lag"] is None


def test_waiting_then_done_and_the_final_status() -> None:
    untouched = {tp: ReplicaAssignment.of(ORIGIN[tp]) for tp in REQUESTED}
    waiting = compute(REQUESTED, ORIGIN, untouched, {}, REQUESTED, {}, 1.0)
    assert waiting["counts"] == {"waiting": 3} and not waiting["done"]
    done = {tp: ReplicaAssignment.of(REQUESTED[tp]) for tp in REQUESTED}
    finished = compute(REQUESTED, ORIGIN, done, {}, None, {}, 2.0)
    assert finished["done"] and final_status(finished) == ("succeeded", "")
    mixed = compute(REQUESTED, ORIGIN, {**done, T2: ReplicaAssignment.of([1, 2])}, {}, None, {}, 3.0)
    assert final_status(mixed) == ("partial", "not moved to their target: t-2 reverted")
    other = compute(REQUESTED, ORIGIN, {tp: ReplicaAssignment.of([4, 5]) for tp in REQUESTED}, {}, None, {}, 4.0)
    assert other["counts"] == {"superseded": 3} and final_status(other)[0] == "failed"


def test_bytes_copied_and_the_copy_rate_measured_over_the_copy() -> None:
    assignments = {T0: ReplicaAssignment.of([2, 3, 1], adding=[3], removing=[1])}
    leaders = {T0: LeaderAndIsr(1, 1, (1, 2))}

    def sized(leo_3: int) -> dict[int, Any]:
        return {
            1: {T0: {"log_end_offset": 5000, "log_start_offset": 0, "message_size_bytes": 100}},
            3: {T0: {"log_end_offset": leo_3, "log_start_offset": 0, "message_size_bytes": 100}},
        }

    one = {T0: (2, 3)}
    first = compute(one, {T0: (1, 2)}, assignments, leaders, one, sized(100), now=10.0)
    (new,) = first["partitions"][0]["new_replicas"]
    assert new["copied_bytes"] == 10_000 and new["copy_rate_bytes_s"] is None  # one sample: no rate yet
    second = compute(one, {T0: (1, 2)}, assignments, leaders, one, sized(150), 12.0, first)
    third = compute(one, {T0: (1, 2)}, assignments, leaders, one, sized(300), 14.0, second)
    (new,) = third["partitions"][0]["new_replicas"]
    # 200 messages of 100 bytes in 4 s, averaged over the copy (not the last 2 s, which were faster)
    assert new["copied_bytes"] == 30_000 and new["copy_rate_bytes_s"] == 5000
    assert third["copy_rate_by_broker"] == {"3": 5000}


def test_the_eta_comes_from_the_rate_over_a_window_not_between_two_samples() -> None:
    """A throttle grants whole messages in bursts: between two one-second samples the lag jumps up
    and down, but over the window it shrinks steadily, so the ETA stays known."""
    assignments = {T0: ReplicaAssignment.of([2, 3, 1], adding=[3], removing=[1])}
    leaders = {T0: LeaderAndIsr(1, 1, (1, 2))}
    one = {T0: (2, 3)}
    lags = [1000, 1040, 900, 940, 800, 840, 700]  # +40 a second produced, -180 every other second copied
    progress = None
    for second, lag in enumerate(lags):
        progress = compute(one, {T0: (1, 2)}, assignments, leaders, one, agents(5000 - lag, 5000), 100.0 + second,
                           progress)  # fmt: skip
        (new,) = progress["partitions"][0]["new_replicas"]
        if second >= 1:
            assert new["eta_s"] is not None or new["rate"] < 0, (second, new)
    assert progress is not None
    (new,) = progress["partitions"][0]["new_replicas"]
    assert new["rate"] == 50.0 and new["eta_s"] == 14.0  # (1000 - 700) / 6 s; 700 left
    # samples older than the window are forgotten: the rate follows a change of the throttle
    later = compute(one, {T0: (1, 2)}, assignments, leaders, one, agents(5000 - 100, 5000), 115.0, progress)
    assert later["partitions"][0]["new_replicas"][0]["rate"] == 74.0  # (840 at 105 s - 100) / 10 s
