"""The mirror's flush: changes inside one window become one transaction and one message per scope."""

from __future__ import annotations

from typing import Any

from controller_core.model import ReplicaAssignment, TopicPartition
from dashboard.live import groups
from workers.mirror.changes import ChangeSet
from workers.mirror.mirror import Mirror, MirrorConfig
from workers.mirror.publish import RecordingPublisher
from workers.mirror.state import StateRead


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeZk:
    """Just what ``Mirror.__init__`` touches; these tests never reach ZooKeeper."""

    connected = True
    chroot = ""

    def add_listener(self, fn: Any) -> None: ...

    def remove_listener(self, fn: Any) -> None: ...


class RecordingWriter:
    def __init__(self) -> None:
        self.writes: list[tuple[ChangeSet, dict[str, Any]]] = []

    def write_changes(
        self, ch: ChangeSet, meta: dict[str, Any], before_rows: Any = None, after_rows: Any = None
    ) -> None:
        self.writes.append((ch, dict(meta)))
        if before_rows is not None:
            before_rows()
        if after_rows is not None:
            after_rows()

    def meta_gen(self) -> str:
        return "gen"

    def watched_entries(self, now_ms: int) -> list[str]:
        return ["topic:orders|chan"]


def make_mirror() -> tuple[Mirror, FakeClock, RecordingWriter, RecordingPublisher]:
    clock = FakeClock()
    publisher = RecordingPublisher()
    mirror = Mirror(MirrorConfig("c", window_s=0.15), FakeZk(), None, publisher, clock=clock)  # type: ignore[arg-type]
    writer = RecordingWriter()
    mirror.writer = writer  # type: ignore[assignment]
    state = mirror.state
    state.set_brokers({1: {"id": 1}, 2: {"id": 2}})
    state.set_topic_names(["orders"])
    state.set_topic("orders", None, {p: ReplicaAssignment.of([1, 2]) for p in range(100)})
    state.apply_state_reads({TopicPartition("orders", p): StateRead(1, 0, (1, 2), 1, 0, 10) for p in range(100)})
    state.mark_flushed_all()
    mirror.builder.reset("gen", 7)
    mirror.gen = "gen"
    mirror.seq = 7
    return mirror, clock, writer, publisher


def test_a_storm_inside_one_window_is_one_flush() -> None:
    mirror, clock, writer, publisher = make_mirror()
    for step in range(10):  # ten bursts, 10 ms apart, each moving every partition
        leader = 2 if step % 2 == 1 else 1
        reads = {
            TopicPartition("orders", p): StateRead(leader, step + 1, (leader,), 1, step + 1, 100 + step)
            for p in range(100)
        }
        mirror.state.apply_state_reads(reads)
        mirror._note_change()
        clock.now += 0.01
        assert not mirror._flush_due()
    clock.now += 0.06
    assert mirror._flush_due()
    mirror.flush()
    assert len(writer.writes) == 1
    changes, meta = writer.writes[0]
    assert len(changes.rows) == 100 and meta["seq"] == 8 and mirror.seq == 8
    assert changes.rows["orders/000042"].leader == 2  # the last burst wins
    cluster = [m for g, m in publisher.messages if g == groups.cluster("c")]
    topic = [m for g, m in publisher.messages if g == groups.topic("c", "orders")]
    assert len(cluster) == 1 and len(topic) == 1
    assert cluster[0]["seq"] == 8 and cluster[0]["prev"] == 7
    assert topic[0]["data"]["counts"]["nonpref"] == 100
    assert 150 <= meta["lag_ms"] <= 200


def test_nothing_changed_means_no_flush_and_no_sequence_number() -> None:
    mirror, _clock, writer, publisher = make_mirror()
    mirror._note_change()
    assert not mirror._flush_due()
    mirror.flush()
    assert writer.writes == [] and publisher.messages == [] and mirror.seq == 7


def test_sequence_numbers_increase_by_one_per_flush() -> None:
    mirror, clock, writer, _publisher = make_mirror()
    for step in range(3):
        mirror.state.apply_state_reads(
            {TopicPartition("orders", 0): StateRead(2, step + 1, (2,), 1, step + 1, 200 + step)}
        )
        mirror._note_change()
        clock.now += 0.2
        mirror.flush()
    assert [meta["seq"] for _ch, meta in writer.writes] == [8, 9, 10]
