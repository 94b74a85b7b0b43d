"""Replication between real broker agents: fetching, HW, ISR shrink/expand via AlterIsr, catch-up."""

from __future__ import annotations

import signal

from controller_core.model import TopicPartition
from controller_core.protocol.messages import ErrorCode
from tests.integration import test_broker_harness as harness
from tests.integration.test_broker_harness import FakeController, leader_and_isr, partition_state
from tests.support.broker_agents import AgentProcess, Agents
from tests.support.zk import wait_for

controller = harness.controller

TP = TopicPartition("orders", 0)
FAST_ISR = ("--replica-lag-time-max-ms", "1000")


def assign(
    states: list[tuple[AgentProcess, int, int, list[int], list[int]]], leaders: list[AgentProcess], **kwargs: object
) -> None:
    """Send each broker its LeaderAndIsr for TP: (broker, leader, leader_epoch, isr, replicas)."""
    for broker, leader, epoch, isr, replicas in states:
        request = leader_and_isr(broker, [partition_state(TP, leader, epoch, isr, replicas, **kwargs)], leaders)  # type: ignore[arg-type]
        response = broker.send(request)
        assert response.error_code == ErrorCode.NONE
        assert set(response.errors_by_partition().values()) == {ErrorCode.NONE}  # type: ignore[union-attr]


def test_a_follower_copies_the_leaders_log_and_follows_its_high_watermark(
    agents: Agents, controller: FakeController
) -> None:
    leader = agents.start(1, "--produce-rate", "200")
    follower = agents.start(2)
    assign([(leader, 1, 1, [1, 2], [1, 2]), (follower, 1, 1, [1, 2], [1, 2])], [leader])
    wait_for(lambda: follower.replica(TP)["high_watermark"] >= 100, timeout=20, interval=0.1, what="replication")
    lead, follow = leader.replica(TP), follower.replica(TP)
    assert lead["role"] == "leader" and follow["role"] == "follower"
    assert follow["epochs"][0] == [1, 0] == lead["epochs"][0]
    assert lead["high_watermark"] >= follow["high_watermark"]
    assert lead["followers"][0]["broker_id"] == 2 and lead["followers"][0]["in_sync"]
    assert follower.state(partitions="0")["fetchers"][0]["leader_id"] == 1


def test_a_follower_that_stops_fetching_leaves_the_isr_and_rejoins_when_it_resumes(
    agents: Agents, controller: FakeController
) -> None:
    leader = agents.start(1, "--produce-rate", "100", *FAST_ISR)
    follower = agents.start(2, "--zookeeper-session-timeout-ms", "15000")
    assign([(leader, 1, 1, [1, 2], [1, 2]), (follower, 1, 1, [1, 2], [1, 2])], [leader])
    wait_for(lambda: follower.replica(TP)["log_end_offset"] > 20, timeout=20, interval=0.1, what="replication")

    follower.signal(signal.SIGSTOP)
    try:
        wait_for(lambda: (1,) in controller.proposed_isrs(TP), timeout=20, interval=0.1, what="an ISR shrink proposal")
        wait_for(lambda: leader.replica(TP)["isr"] == [1], timeout=10, interval=0.1, what="the shrink committed")
        shrink = next(r for r in controller.alter_isr_requests if any(p.new_isr == (1,) for p in r.partitions))
        assert (shrink.broker_id, shrink.broker_epoch) == (1, leader.epoch)
        assert shrink.partitions[0].leader_epoch == 1
        assert shrink.partitions[0].current_isr_version == 0
        assert leader.replica(TP)["zk_version"] == 1
    finally:
        follower.signal(signal.SIGCONT)

    wait_for(
        lambda: controller.proposed_isrs(TP)[-1] == (1, 2), timeout=20, interval=0.1, what="an ISR expand proposal"
    )
    wait_for(lambda: leader.replica(TP)["isr"] == [1, 2], timeout=10, interval=0.1, what="the expansion committed")
    replica = leader.replica(TP)
    assert (replica["isr_shrinks"], replica["isr_expands"]) == (1, 1)
    assert replica["zk_version"] == 2


def test_a_new_replica_starts_empty_and_copies_the_log_before_joining_the_isr(
    agents: Agents, controller: FakeController
) -> None:
    leader = agents.start(1, "--produce-rate", "500", "--message-size", "1000")
    assign([(leader, 1, 1, [1], [1])], [leader])
    wait_for(lambda: leader.replica(TP)["log_end_offset"] >= 1000, timeout=20, interval=0.1, what="a log to copy")
    newcomer = agents.start(3, "--replica-fetch-max-bytes", "50000")  # 50 messages per fetch
    assign(
        [(leader, 1, 2, [1], [1, 3]), (newcomer, 1, 2, [1], [1, 3])],
        [leader],
        is_new=True,
    )
    backlog = leader.replica(TP)["log_end_offset"]
    wait_for(lambda: (1, 3) in controller.proposed_isrs(TP), timeout=30, interval=0.1, what="the newcomer to join")
    fetcher = newcomer.state(partitions="0")["fetchers"][0]
    assert fetcher["fetches"] >= backlog // 50  # it had to copy the log, 50 messages at a time
    assert fetcher["records"] >= backlog
    wait_for(lambda: leader.replica(TP)["isr"] == [1, 3], timeout=10, interval=0.1, what="the expansion committed")


def test_a_new_leader_starts_its_epoch_at_its_log_end_and_the_old_one_follows_it(
    agents: Agents, controller: FakeController
) -> None:
    first = agents.start(1, "--produce-rate", "200")
    second = agents.start(2, "--produce-rate", "200")
    assign([(first, 1, 1, [1, 2], [1, 2]), (second, 1, 1, [1, 2], [1, 2])], [first])
    wait_for(lambda: second.replica(TP)["high_watermark"] >= 50, timeout=20, interval=0.1, what="replication")
    assign([(second, 2, 2, [1, 2], [1, 2]), (first, 2, 2, [1, 2], [1, 2])], [second])
    now_leading = second.replica(TP)
    start = now_leading["leader_epoch_start_offset"]
    assert now_leading["role"] == "leader"
    assert [2, start] in now_leading["epochs"]
    wait_for(
        lambda: first.replica(TP)["log_end_offset"] > start + 50,
        timeout=20,
        interval=0.1,
        what="the old leader following",
    )
    followed = first.replica(TP)
    assert (followed["role"], followed["leader"], followed["leader_epoch"]) == ("follower", 2, 2)
    assert [2, start] in followed["epochs"]


def test_acks_all_is_refused_while_the_isr_is_below_min_insync_replicas(
    agents: Agents, controller: FakeController
) -> None:
    leader = agents.start(1, "--produce-rate", "50", "--acks", "all", "--min-insync-replicas", "2")
    assign([(leader, 1, 1, [1], [1, 2])], [leader])
    wait_for(
        lambda: leader.state(partitions="0")["not_enough_replicas"] >= 3, timeout=20, interval=0.1, what="refusals"
    )
    state = leader.state()
    assert state["producer"]["requests"]["not_enough_replicas"] >= 3
    assert state["producer"]["requests"]["appended"] == 0
    assert state["counts"]["under_min_isr"] == 1
    replica = state["replicas"][0]
    assert replica["log_end_offset"] == 0
    assert replica["not_enough_replicas"] >= 3
