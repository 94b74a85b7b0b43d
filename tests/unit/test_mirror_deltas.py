"""DeltaBuilder: one sequence number per flush, a prev chain per scope, only watched scopes sent."""

from __future__ import annotations

from typing import Any

from controller_core.model import ReplicaAssignment, TopicPartition
from dashboard.live import groups, protocol
from workers.mirror.deltas import DeltaBuilder, watched_scopes
from workers.mirror.state import OBSERVED, MirrorState, StateRead

BROKERS = {b: {"id": b} for b in (1, 2)}


def state_with(topics: dict[str, int]) -> MirrorState:
    state = MirrorState("c", mode=OBSERVED)
    state.set_brokers(BROKERS)
    state.set_topic_names(list(topics))
    for topic, n in topics.items():
        state.set_topic(topic, None, {p: ReplicaAssignment.of([1, 2]) for p in range(n)})
        state.apply_state_reads({TopicPartition(topic, p): StateRead(1, 0, (1, 2), 1, 0, 5) for p in range(n)})
    state.mark_flushed_all()
    return state


def by_group(messages: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    return dict(messages)


def test_the_cluster_scope_always_gets_a_message_with_counts_and_edges() -> None:
    state = state_with({"a": 2})
    builder = DeltaBuilder("c")
    builder.reset("g1", 10)
    state.set_brokers({2: BROKERS[2]})
    messages = by_group(builder.build(state.take_changes(), 11, watched=set()))
    msg = messages[groups.cluster("c")]
    assert (msg["type"], msg["gen"], msg["seq"], msg["prev"], msg["scope"]) == (protocol.DELTA, "g1", 11, 10, "cluster")
    assert msg["data"]["counts"]["p:OfflinePartition"] == 2
    assert msg["data"]["edges"]["partition"] == {"OnlinePartition>OfflinePartition": 2}
    assert msg["data"]["removed_brokers"] == [1]
    assert groups.topic("c", "a") not in messages  # nobody watches topic a


def test_prev_chains_per_scope_and_advances_for_unwatched_scopes() -> None:
    state = state_with({"a": 1, "b": 1})
    builder = DeltaBuilder("c")
    builder.reset("g", 0)
    state.apply_state_reads({TopicPartition("a", 0): StateRead(2, 1, (2,), 1, 1, 6)})
    first = by_group(builder.build(state.take_changes(), 1, watched={"topic:b"}))
    assert groups.topic("c", "a") not in first
    state.apply_state_reads({TopicPartition("b", 0): StateRead(2, 1, (2,), 1, 1, 7)})
    second = by_group(builder.build(state.take_changes(), 2, watched={"topic:a", "topic:b"}))
    assert groups.topic("c", "a") not in second  # topic a did not change in flush 2
    assert second[groups.topic("c", "b")]["prev"] == 0
    state.apply_state_reads({TopicPartition("a", 0): StateRead(1, 2, (1, 2), 1, 2, 8)})
    third = by_group(builder.build(state.take_changes(), 3, watched={"topic:a"}))
    # Flush 1 touched topic a while nobody watched it: a viewer holding seq < 1 must see the gap.
    assert third[groups.topic("c", "a")]["prev"] == 1
    assert third[groups.cluster("c")]["prev"] == 2


def test_topic_messages_carry_rows_until_the_cap() -> None:
    state = state_with({"big": 5})
    builder = DeltaBuilder("c", row_cap=3)
    builder.reset("g", 0)
    state.set_brokers({2: BROKERS[2]})
    msg = by_group(builder.build(state.take_changes(), 1, watched={"topic:big", "broker:1"}))
    topic = msg[groups.topic("c", "big")]["data"]
    assert topic["rows_truncated"] is True and "rows" not in topic
    assert topic["counts"]["offline"] == 5
    broker = msg[groups.broker("c", 1)]["data"]
    assert broker["counts"]["r:OfflineReplica"] == 5 and broker["broker_gone"] is True


def test_topic_rows_are_sent_below_the_cap() -> None:
    state = state_with({"small": 2})
    builder = DeltaBuilder("c")
    builder.reset("g", 0)
    state.apply_state_reads({TopicPartition("small", 1): StateRead(2, 1, (2,), 1, 1, 9)})
    rows = by_group(builder.build(state.take_changes(), 1, watched={"topic:small"}))[groups.topic("c", "small")][
        "data"
    ]["rows"]
    assert [(r["name"], r["leader"], r["preferred_leader"]) for r in rows] == [("small-1", 2, False)]


def test_reset_starts_a_new_generation() -> None:
    builder = DeltaBuilder("c")
    builder.reset("g1", 5)
    state = state_with({"a": 1})
    state.set_brokers({2: BROKERS[2]})
    builder.build(state.take_changes(), 6, watched=set())
    builder.reset("g2", 20)
    state.set_brokers(BROKERS)
    msg = by_group(builder.build(state.take_changes(), 21, watched=set()))[groups.cluster("c")]
    assert (msg["gen"], msg["prev"]) == ("g2", 20)


def test_watched_scopes_ignores_malformed_entries() -> None:
    assert watched_scopes(["cluster|x", "topic:a|y", "nonsense|z", "broker:3|w", "topic:../x|v"]) == {
        "cluster", "topic:a", "broker:3",
    }  # fmt: skip


def test_group_names_fit_channels_limits() -> None:
    long_topic = "t" * 249
    name = groups.topic("cluster-name", long_topic)
    assert len(name) < 100 and name != groups.topic("cluster-name", "t" * 248)
    assert groups.topic("c", "orders") == "kcp.c.t.orders"
    import re

    assert re.fullmatch(r"[a-zA-Z0-9._-]+", name)
