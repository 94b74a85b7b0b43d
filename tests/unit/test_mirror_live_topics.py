"""What the topics list and a failover's refresh queue get from the mirror (issue #6 follow-ups)."""

from __future__ import annotations

from controller_core.model import ReplicaAssignment, TopicPartition
from dashboard.live import groups
from workers.mirror.deltas import DeltaBuilder
from workers.mirror.state import MANAGED, OBSERVED, MirrorState, StateRead

BROKERS = {b: {"id": b} for b in (1, 2, 3)}


def _state(mode: str, topics: dict[str, int]) -> MirrorState:
    state = MirrorState("c", mode=mode)
    state.set_brokers(BROKERS)
    state.set_topic_names(list(topics))
    for topic, n in topics.items():
        state.set_topic(topic, None, {p: ReplicaAssignment.of([1 + p % 3, 1 + (p + 1) % 3]) for p in range(n)})
        state.apply_state_reads(
            {TopicPartition(topic, p): StateRead(1 + p % 3, 0, (1 + p % 3, 1 + (p + 1) % 3), 1, 0, 5) for p in range(n)}
        )
    state.mark_flushed_all()
    return state


def test_cluster_deltas_count_the_topics_whose_summary_changed_without_naming_them() -> None:
    state = _state(OBSERVED, {"a": 3, "b": 3, "c": 3})
    builder = DeltaBuilder("c")
    builder.reset("g", 1)
    state.set_brokers({2: BROKERS[2], 3: BROKERS[3]})  # broker 1 leads a-0, b-0, c-0
    cluster = dict(builder.build(state.take_changes(), 2, watched=set()))[groups.cluster("c")]
    assert cluster["data"]["topics_changed"] == 3
    assert cluster["data"]["counts"]["offline"] == 3
    state.set_controller(5, 2)  # nothing about topics
    cluster = dict(builder.build(state.take_changes(), 3, watched=set()))[groups.cluster("c")]
    assert "topics_changed" not in cluster["data"]


def test_a_topic_summary_and_its_counters_agree_after_a_failover() -> None:
    state = _state(MANAGED, {"a": 6})
    state.set_brokers({2: BROKERS[2], 3: BROKERS[3]})
    ch = state.take_changes()
    summary = state.topic_summary("a")
    assert ch.topics["a"] == summary
    assert ch.topic_counts["a"]["offline"] == 2 == state.topic_count("a")["offline"]
