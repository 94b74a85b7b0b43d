"""A controlled shutdown writes its two rounds in one pipeline: the ISR removals of the partitions the
broker follows are decided on the cache first and carried behind the leader moves of those it leads
(``TrailingWrites``), so ZooKeeper applies them without waiting for the first round's results. Only
the writes overlap: what the brokers are sent (and in which order), what is recorded, cached and
which states the partitions and replicas end in must be what the two rounds one after the other give,
when a write conflicts or fails, and when the controller is fenced in either round (in the second
while the first round's results are still being taken)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from controller_core.controlled_shutdown import move_off_broker, partitions_to_move
from controller_core.errors import ControllerMovedError, ZkOperationError
from controller_core.model import LeaderAndIsr, PartitionAndReplica, TopicPartition
from controller_core.ports import LeaderAndIsrWrite, ZkCode
from controller_core.replica_state_machine import ReplicaStateMachine
from controller_core.state_machine_parts import TrailingWrites
from scripts.support.fakes import Harness
from tests.support.clusters import random_cluster, what_happened

pytestmark = pytest.mark.unit

SHUTTING_DOWN = 5


def _cluster(seed: int, decide_from_cache: bool = True) -> Harness:
    """300 partitions over 5 brokers, random replica lists and ISRs, decisions on the cache (or, as
    Kafka decides, on states read first)."""
    h = random_cluster(seed, partitions=300, topics=7, in_sync=0.85)
    h.psm.decide_from_cache = h.rsm.decide_from_cache = decide_from_cache
    return h


@contextmanager
def _not_planned(self: ReplicaStateMachine, broker_id: int, ids: Sequence[int]) -> Iterator[TrailingWrites | None]:
    """``offline_planned`` that plans nothing: the ISR removals are decided and written after the leader
    moves, as two rounds one after the other."""
    yield None


def _shutdown(h: Harness, marks: list[int]) -> None:
    """The shutdown's moves; where ``send_held`` was called is marked in ``marks`` (requests sent by then)."""
    h.ctx.add_shutting_down_broker(SHUTTING_DOWN)
    move_off_broker(h.ctx, h.psm, h.rsm, h.partition_batch, lambda: marks.append(len(h.transport.sent)), SHUTTING_DOWN)


def _what_happened(h: Harness, marks: list[int]) -> tuple[Any, ...]:
    """``what_happened``, where ``send_held`` was called, the shutting-down broker's replica states and
    the state znodes."""
    ctx = h.ctx
    replica_states = {tp: ctx.replica_state(PartitionAndReplica(tp, SHUTTING_DOWN)) for tp in ctx.all_partitions()}
    znodes = {tp: h.store.state(tp) for tp in ctx.all_partitions()}
    return (*what_happened(h), marks, replica_states, znodes)


def _run(
    monkeypatch: pytest.MonkeyPatch,
    pipelined: bool,
    seed: int,
    faults: Callable[[Harness], None],
    decide_from_cache: bool = True,
) -> tuple[tuple[Any, ...], list[int], type[Exception] | None]:
    h = _cluster(seed, decide_from_cache)
    faults(h)
    raised: type[Exception] | None = None
    with monkeypatch.context() as m:
        if not pipelined:
            m.setattr(ReplicaStateMachine, "offline_planned", _not_planned)
        marks: list[int] = []
        try:
            _shutdown(h, marks)
        except ControllerMovedError as e:
            raised = type(e)
    return _what_happened(h, marks), [len(call) for call in h.store.update_calls], raised


def _led_and_followed(h: Harness) -> tuple[list[TopicPartition], list[TopicPartition]]:
    led, followed = partitions_to_move(h.ctx, SHUTTING_DOWN)
    return h.ctx.partitions_of(led), h.ctx.partitions_of(followed)


def _nothing(h: Harness) -> None:
    """No fault."""


def _conflicts(h: Harness) -> None:
    """Partitions of both rounds changed behind the cache (BADVERSION, re-read and retried)."""
    led, followed = _led_and_followed(h)
    for tp in [*led[:3], *followed[::9]]:
        h.store.concurrent_isr_change(tp, h.store.znodes[tp].isr)


def _failures(h: Harness) -> None:
    """A write of each round fails outright, and a reply of the second round is lost twice."""
    led, followed = _led_and_followed(h)
    h.store.write_errors[led[1]] = ZkCode.OTHER
    h.store.write_errors[followed[2]] = ZkCode.OTHER
    h.store.lose_reply(followed[5], times=2)


def _fenced_in_first_round(h: Harness) -> None:
    h.store.elect_other_controller_after(7)


def _fenced_in_second_round(h: Harness) -> None:
    """Another controller wins after a few of the ISR removals' writes: in the pipeline, while the
    leader moves' results are still being taken (the fake store applies the ops lazily, in order)."""
    led, _ = _led_and_followed(h)
    h.store.elect_other_controller_after(len(led) + 11)


@pytest.mark.parametrize("decide_from_cache", [True, False], ids=["on_cache", "read_first"])
@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize(
    "faults",
    [_nothing, _conflicts, _failures, _fenced_in_first_round, _fenced_in_second_round],
    ids=lambda f: f.__name__,
)
def test_the_pipelined_rounds_do_what_two_rounds_do(
    monkeypatch: pytest.MonkeyPatch, seed: int, faults: Callable[[Harness], None], decide_from_cache: bool
) -> None:
    pipelined, pipelined_calls, pipelined_raised = _run(monkeypatch, True, seed, faults, decide_from_cache)
    two_rounds, two_rounds_calls, two_rounds_raised = _run(monkeypatch, False, seed, faults, decide_from_cache)
    assert pipelined_raised is two_rounds_raised
    for name, a, b in zip(
        ("requests", "records", "cache", "states", "send_held", "replica states", "znodes"),
        pipelined,
        two_rounds,
        strict=True,
    ):
        assert a == b, f"{name} differ"
    if faults in (_nothing, _conflicts, _failures, _fenced_in_second_round):
        # The rounds' first writes went out as one call of the store: the leader moves', then the removals'.
        assert len(pipelined_calls) == len(two_rounds_calls) - 1
    if faults is _fenced_in_second_round:
        assert pipelined_raised is ControllerMovedError
        assert pipelined[4], "the new leaders' requests were handed over before the fence was seen"


def test_without_leaders_to_move_the_removals_are_written_alone() -> None:
    h = _cluster(3)
    for tp in _led_and_followed(h)[0]:  # another replica leads each partition the broker led
        znode = h.store.znodes[tp]
        znode.leader = next(r for r in h.ctx.partition_replica_assignment(tp) if r != SHUTTING_DOWN)
        state = h.store.state(tp)
        assert state is not None
        h.ctx.put_partition_leadership_info(tp, state)
    led, followed = _led_and_followed(h)
    assert not led and followed
    _shutdown(h, [])
    assert len(h.store.update_calls) == 1
    for tp in followed:
        info = h.ctx.partition_leadership_info(tp)
        assert info is not None
        assert SHUTTING_DOWN not in info.leader_and_isr.isr or info.leader_and_isr.isr == (SHUTTING_DOWN,)


# -- TrailingWrites on its own -----------------------------------------------------------------------


def _states(*partitions: int) -> dict[TopicPartition, LeaderAndIsr]:
    return {TopicPartition("t", p): LeaderAndIsr(1, 1, (1, 2), 0) for p in partitions}


class _Stream:
    """A store's write: each partition's outcome in order; raises ``error`` after ``fail_after`` of them."""

    def __init__(self, fail_after: int | None = None, error: Exception | None = None) -> None:
        self.calls: list[list[TopicPartition]] = []
        self.fail_after, self.error = fail_after, error

    def __call__(self, states: Mapping[TopicPartition, LeaderAndIsr]) -> Iterator[LeaderAndIsrWrite]:
        self.calls.append(list(states))
        for i, (tp, lai) in enumerate(states.items()):
            if i == self.fail_after:
                assert self.error is not None
                raise self.error
            yield tp, lai.with_zk_version(lai.zk_version + 1)


def test_carried_writes_follow_the_leading_ones_in_one_stream() -> None:
    write = _Stream()
    trailing = TrailingWrites(_states(3, 4))
    assert trailing.outcomes() is None  # nothing carried them yet
    leading = list(trailing.carry(_states(1, 2), write))
    assert write.calls == [[TopicPartition("t", p) for p in (1, 2, 3, 4)]]
    assert [tp.partition for tp, _ in leading] == [1, 2]
    carried = trailing.outcomes()
    assert carried is not None
    assert [tp.partition for tp, _ in carried] == [3, 4]


def test_leading_outcomes_left_untaken_are_skipped() -> None:
    trailing = TrailingWrites(_states(3, 4))
    leading = trailing.carry(_states(1, 2), _Stream())
    next(leading)
    del leading  # the first machine failed while taking its results
    carried = trailing.outcomes()
    assert carried is not None
    assert [tp.partition for tp, _ in carried] == [3, 4]


@pytest.mark.parametrize(
    "error", [ControllerMovedError("fenced"), ZkOperationError(ZkCode.NO_NODE, "/controller_epoch")]
)
def test_a_stream_that_fails_in_the_leading_writes_fails_the_carried_ones(error: Exception) -> None:
    trailing = TrailingWrites(_states(3, 4))
    leading = trailing.carry(_states(1, 2), _Stream(fail_after=1, error=error))
    with pytest.raises(type(error)):
        list(leading)
    with pytest.raises(type(error)):
        trailing.outcomes()


def test_a_fence_in_the_carried_writes_comes_where_they_are_taken() -> None:
    trailing = TrailingWrites(_states(3, 4))
    leading = list(trailing.carry(_states(1, 2), _Stream(fail_after=3, error=ControllerMovedError("fenced"))))
    assert len(leading) == 2
    carried = trailing.outcomes()
    assert carried is not None
    assert next(carried)[0] == TopicPartition("t", 3)
    with pytest.raises(ControllerMovedError):
        next(carried)


def test_partitions_in_both_are_not_carried() -> None:
    write = _Stream()
    trailing = TrailingWrites(_states(2, 3))
    assert len(list(trailing.carry(_states(1, 2), write))) == 2
    assert write.calls == [[TopicPartition("t", 1), TopicPartition("t", 2)]]
    assert trailing.outcomes() is None
