"""The history checker catches each invariant's violation (hand-made histories) and passes clean ones."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from scripts.reliability.checker import (
    ActionOutcome,
    FinalState,
    PartitionSnapshot,
    check,
    check_liveness,
    check_s1,
    check_s2,
    check_s3,
    check_s4,
    check_s5,
    check_s6,
    load_histories,
)

pytestmark = pytest.mark.unit

STATE = "/brokers/topics/t/partitions/0/state"


def elect(pid: int, epoch: int, version: int, mzxid: int) -> dict[str, Any]:
    return {
        "op": "elect",
        "role": "controller",
        "pid": pid,
        "controller_epoch": epoch,
        "epoch_zk_version": version,
        "mzxid": mzxid,
        "result": "OK",
    }


def write(
    pid: int,
    version: int,
    mzxid: int | None,
    *,
    leader: int = 1,
    leader_epoch: int = 0,
    isr: list[int] | None = None,
    zk_version: int = 1,
    epoch: int = 1,
    op: str = "set",
    result: str = "OK",
) -> dict[str, Any]:
    state = {
        "controller_epoch": epoch,
        "leader": leader,
        "version": 1,
        "leader_epoch": leader_epoch,
        "isr": isr if isr is not None else [1, 2, 3],
    }
    return {
        "op": op,
        "role": "controller",
        "pid": pid,
        "path": STATE,
        "epoch_zk_version": version,
        "version": -1,
        "result": result,
        "mzxid": mzxid,
        "new_version": zk_version,
        "data": json.dumps(state),
    }


def request(
    t_mono: float,
    controller_epoch: int,
    *,
    kind: str = "LeaderAndIsr",
    decision: str = "accepted",
    broker_epoch: int = 5,
) -> dict[str, Any]:
    """Broker 3 (pid 30, broker epoch 5) took or refused a controller request."""
    return {
        "op": "request",
        "role": "broker",
        "node": 3,
        "pid": 30,
        "kind": kind,
        "decision": decision,
        "controller_epoch": controller_epoch,
        "broker_epoch": broker_epoch,
        "my_broker_epoch": 5,
        "t_mono": t_mono,
    }


def applied(t_mono: float, controller_epoch: int, leader: int, leader_epoch: int, *, node: int = 3) -> dict[str, Any]:
    """Broker ``node`` (3: pid 30, 2: pid 31) applied LeaderAndIsr for t-0."""
    return {
        "op": "leader_and_isr",
        "role": "broker",
        "node": node,
        "pid": 30 if node == 3 else 31,
        "controller_epoch": controller_epoch,
        "partitions": [["t", 0, leader, leader_epoch, "NONE"]],
        "t_mono": t_mono,
    }


def observe(t_mono: float, controller_epoch: int, zk_version: int, leader: int, isr: list[int]) -> dict[str, Any]:
    """Reader r1 (the mirror) saw t-0's state."""
    return {
        "op": "observe",
        "reader": "r1",
        "partition": "t-0",
        "controller_epoch": controller_epoch,
        "zk_version": zk_version,
        "leader": leader,
        "isr": isr,
        "t_mono": t_mono,
    }


def clean_history() -> list[dict[str, Any]]:
    return [
        elect(10, 1, 1, 100),
        write(10, 1, None, op="create", zk_version=0),
        write(10, 1, 110, leader=2, leader_epoch=1, isr=[2, 3], zk_version=1),
        elect(20, 2, 2, 200),
        write(20, 2, 210, leader=3, leader_epoch=2, isr=[3], zk_version=2, epoch=2),
        request(1.0, 1),
        applied(1.1, 1, 2, 1),
        request(3.0, 1, decision="rejected"),
        request(2.0, 2),
        applied(2.1, 2, 3, 2),
        observe(1.5, 1, 1, 2, [2, 3]),
        observe(2.5, 2, 2, 3, [3]),
    ]


def good_final() -> FinalState:
    state = PartitionSnapshot(leader=3, leader_epoch=2, isr=(3,), zk_version=2)
    return FinalState(
        controller_id=20,
        active_controllers=[20],
        live_brokers=frozenset({1, 2, 3}),
        assignments={"t-0": [1, 2, 3]},
        partitions={"t-0": state},
        mirror={"t-0": state},
        broker_caches={3: {"t-0": (3, 2)}},
        actions=[ActionOutcome("a1", True, "completed", effects=1), ActionOutcome("a2", True, "failed", "offline")],
    )


def test_a_clean_history_and_final_state_pass() -> None:
    assert check(clean_history(), good_final()) == []


def test_s1_two_winners_of_one_epoch() -> None:
    found = check_s1([*clean_history(), elect(30, 2, 2, 200)])
    assert any("epoch 2 was won by 2" in v.detail for v in found)


def test_s1_write_with_a_version_the_writer_never_won() -> None:
    found = check_s1([*clean_history(), write(10, 2, 220, zk_version=3, epoch=2)])
    assert [v.invariant for v in found] == ["S1"] and "never won" in found[0].detail


def test_s1_zombie_write_landing_after_the_next_election() -> None:
    found = check_s1([*clean_history(), write(10, 1, 250, leader=1, leader_epoch=3, zk_version=3)])
    assert any("landed after the next election" in v.detail for v in found)


def test_s1_state_stamped_with_another_epoch() -> None:
    found = check_s1([*clean_history(), write(20, 2, 230, leader=3, leader_epoch=3, isr=[3], zk_version=3, epoch=1)])
    assert any("controller_epoch 1" in v.detail for v in found)


def test_s2_controller_epoch_going_back() -> None:
    found = check_s2([*clean_history(), elect(30, 1, 3, 300)])
    assert any("controller epoch went" in v.detail for v in found)


def test_s2_leader_change_without_new_leader_epoch() -> None:
    found = check_s2([*clean_history(), write(20, 2, 230, leader=2, leader_epoch=2, isr=[2, 3], zk_version=3, epoch=2)])
    assert any("without a new leader epoch" in v.detail for v in found)


def test_s2_leader_epoch_going_back() -> None:
    found = check_s2([*clean_history(), write(20, 2, 230, leader=3, leader_epoch=1, isr=[3], zk_version=3, epoch=2)])
    assert any("leader epoch went 2 -> 1" in v.detail for v in found)


def test_s2_zk_version_going_back() -> None:
    found = check_s2([*clean_history(), write(20, 2, 230, leader=3, leader_epoch=2, isr=[3], zk_version=1, epoch=2)])
    assert any("zkVersion went" in v.detail for v in found)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"leader": 4, "leader_epoch": 3, "isr": [3]}, "not in ISR"),
        ({"leader": -1, "leader_epoch": 3, "isr": []}, "empty ISR"),
        ({"leader": 3, "leader_epoch": 2, "isr": [3, 9]}, "outside the replicas"),
        ({"leader": 1, "leader_epoch": 3, "isr": [1]}, "unclean election"),
    ],
)
def test_s3_invalid_partition_states(kwargs: dict[str, Any], message: str) -> None:
    bad = write(20, 2, 230, zk_version=3, epoch=2, **kwargs)
    found = check_s3([*clean_history(), bad], {"t-0": [1, 2, 3]})
    assert any(message in v.detail for v in found), found


def test_s3_unclean_election_allowed_when_enabled() -> None:
    bad = write(20, 2, 230, leader=1, leader_epoch=3, isr=[1], zk_version=3, epoch=2)
    assert check_s3([*clean_history(), bad], {"t-0": [1, 2, 3]}, unclean_allowed=True) == []


def test_s3_broker_in_controlled_shutdown_elected() -> None:
    found = check_s3(clean_history(), {"t-0": [1, 2, 3]}, shutting_down={3: 205})
    assert any("controlled shutdown" in v.detail for v in found)


def test_s4_stale_controller_epoch_applied() -> None:
    stale = request(2.5, 1, kind="UpdateMetadata")
    found = check_s4([*clean_history(), stale])
    assert any("after seeing 2" in v.detail for v in found)


def test_s4_stale_broker_epoch_applied() -> None:
    stale = request(2.6, 2, broker_epoch=4)
    assert any("stale broker epoch" in v.detail for v in check_s4([*clean_history(), stale]))


def test_s4_leader_epoch_applied_twice_and_two_leaders_for_one_epoch() -> None:
    again = applied(2.7, 2, 3, 2)
    other = applied(2.2, 2, 2, 2, node=2)
    found = check_s4([*clean_history(), again, other])
    assert any("after 2" in v.detail for v in found)
    assert any("named leaders [2, 3]" in v.detail for v in found)


def test_s5_stuck_lost_and_duplicated_actions() -> None:
    found = check_s5(
        [
            ActionOutcome("stuck", True, "in_progress"),
            ActionOutcome("twice", True, "completed", effects=2),
            ActionOutcome("silent", True, "failed"),
            ActionOutcome("rejected", False, "rejected", effects=1),
        ]
    )
    assert sorted(v.detail.split()[1] for v in found) == ["rejected", "silent", "stuck", "twice"]


def test_s6_mirror_showing_a_state_zk_never_had_and_going_back() -> None:
    invented = observe(2.6, 2, 2, 1, [1])
    back = observe(2.7, 1, 1, 2, [2, 3])
    found = check_s6([*clean_history(), invented, back])
    assert any("never in ZK" in v.detail for v in found)
    assert any("go back" in v.detail for v in found)


@pytest.mark.parametrize(
    ("change", "invariant"),
    [
        ({"active_controllers": [10, 20]}, "L1"),
        ({"active_controllers": []}, "L1"),
        ({"controller_id": None}, "L1"),
        (
            {"partitions": {"t-0": PartitionSnapshot(-1, 3, (3,))}, "mirror": None, "broker_caches": {}},
            "L2",
        ),
        ({"admin_paths_present": ["/admin/reassign_partitions"]}, "L3"),
        ({"mirror": {"t-0": PartitionSnapshot(2, 1, (2, 3))}}, "L4"),
        ({"mirror": {}}, "L4"),
        ({"broker_caches": {3: {"t-0": (2, 1)}}}, "L5"),
    ],
)
def test_liveness_violations(change: dict[str, Any], invariant: str) -> None:
    final = good_final()
    for key, value in change.items():
        setattr(final, key, value)
    assert [v.invariant for v in check_liveness(final)] == [invariant]


def test_offline_partition_whose_whole_isr_died_is_not_an_l2_violation() -> None:
    final = good_final()
    final.partitions = {"t-0": PartitionSnapshot(-1, 3, (3,))}
    final.live_brokers = frozenset({1, 2})
    final.mirror = None
    final.broker_caches = {}
    assert check_liveness(final) == []


def test_load_histories_skips_a_torn_last_line(tmp_path: Path) -> None:
    (tmp_path / "controller-1-10.jsonl").write_text(json.dumps(elect(10, 1, 1, 100)) + '\n{"op": "se')
    records = load_histories(tmp_path)
    assert len(records) == 1 and records[0]["file"] == "controller-1-10.jsonl"
