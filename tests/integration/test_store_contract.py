"""One contract for the partition-state store: every test runs against the in-memory fake
(``scripts.support.fakes.FakePartitionStateStore``, what the state machines' unit tests use) and the real
``ZkStore`` on a real ZooKeeper, so the fake cannot be kinder than the store it stands for.

The faults are the ones fencing exists for: a fencing version of -1, a fence that fails after some
multis have landed, a session that expires between multis or with one in flight, a reply lost once
(replayed) or twice. On the real store they are injected at its multi boundary (``_commit``: the
store is built with one op per multi and one multi in flight, so "after n ops" is exact) with real
ZooKeeper actions: a bumped ``/controller_epoch``, a real server-side session expiry, a multi that
was applied and whose reply is then dropped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, Protocol

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from controller_core.errors import ControllerMovedError, ZkOperationError
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.ports import LeaderAndIsrWrite, PartitionStateStore, ZkCode
from controller_core.zk import paths
from controller_core.zk.store import ZkStore
from scripts.support.fakes import FakePartitionStateStore
from tests.support.zk import expire_session, started_client, wait_for

pytestmark = pytest.mark.integration

TP = TopicPartition
EPOCH = 1  # both backends: the controller holds epoch 1 at /controller_epoch version 1
VERSION = 1


class Backend(Protocol):
    store: PartitionStateStore

    def seed(self, topic: str, partitions: int) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]: ...
    def prepare_topic(self, topic: str, partitions: int) -> None: ...
    def read(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None: ...
    def elect_other_controller(self) -> None: ...
    def elect_other_controller_after(self, ops: int) -> None: ...
    def expire_session_after(self, ops: int, in_flight: int = 0) -> None: ...
    def lose_reply(self, tp: TopicPartition, times: int) -> None: ...


class FakeBackend:
    def __init__(self) -> None:
        self.fake = FakePartitionStateStore(controller_epoch=EPOCH, controller_epoch_zk_version=VERSION)
        self.store: PartitionStateStore = self.fake

    def seed(self, topic: str, partitions: int) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        return {
            TP(topic, p): self.fake.seed_state(TP(topic, p), 1, (1, 2, 3), controller_epoch=EPOCH)
            for p in range(partitions)
        }

    def prepare_topic(self, topic: str, partitions: int) -> None:
        self.fake.add_topic(topic)

    def read(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        return self.fake.state(tp)

    def elect_other_controller(self) -> None:
        self.fake.elect_other_controller()

    def elect_other_controller_after(self, ops: int) -> None:
        self.fake.elect_other_controller_after(ops)

    def expire_session_after(self, ops: int, in_flight: int = 0) -> None:
        self.fake.expire_session_after(ops, in_flight)

    def lose_reply(self, tp: TopicPartition, times: int) -> None:
        self.fake.lose_reply(tp, times)


class _LostReply:
    """What kazoo hands back for a request whose connection dropped before the reply came."""

    def get(self, timeout: float | None = None) -> Any:
        raise ConnectionLoss()


class RealBackend:
    """``ZkStore`` with one op per multi, one multi in flight, and faults injected between multis."""

    def __init__(self, zk: KazooClient, hosts: str) -> None:
        self.zk = zk
        self.hosts = hosts
        self.real = ZkStore(zk, max_ops_per_multi=1, max_in_flight=1)
        self.real.ensure_persistent_paths()
        assert tuple(self.real.register_controller_and_increment_epoch(1)) == (EPOCH, VERSION)
        self.store: PartitionStateStore = self.real
        self._elect_after: int | None = None
        self._expire_after: int | None = None
        self._in_flight = 0
        self._lost: dict[bytes, int] = {}
        self._applied: dict[bytes, bool] = {}
        commit = self.real._commit

        def faulty_commit(encoded: Sequence[bytes], indices: Sequence[int], expected: int) -> Any:
            # One multi at a time: every earlier multi of the call has completed when this is called.
            if self._elect_after is not None:
                if self._elect_after <= 0:
                    self._elect_after = None
                    self.elect_other_controller()
                else:
                    self._elect_after -= len(indices)
            if self._expire_after is not None:
                if self._expire_after > 0:
                    self._expire_after -= len(indices)
                elif self._in_flight > 0:  # applied, then the session goes with the reply
                    self._in_flight -= 1
                    commit(encoded, indices, expected).get(timeout=10)
                    self._expire()
                    return _LostReply()
                else:
                    self._expire()
            data = b"".join(encoded[i] for i in indices)
            lost = next((key for key in self._lost if key in data), None)
            if lost is not None:
                self._lost[lost] -= 1
                if self._lost[lost] <= 0:
                    del self._lost[lost]
                if not self._applied.get(lost):
                    commit(encoded, indices, expected).get(timeout=10)  # applied; the reply is lost
                    self._applied[lost] = True
                return _LostReply()
            return commit(encoded, indices, expected)

        self.real._commit = faulty_commit  # type: ignore[method-assign]

    def _expire(self) -> None:
        self._expire_after = None
        if self.zk.connected:
            expire_session(self.zk, self.hosts)

    def _connected(self) -> KazooClient:
        wait_for(lambda: self.zk.connected, timeout=15, what="the store's client back in a new session")
        return self.zk

    def seed(self, topic: str, partitions: int) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        self.prepare_topic(topic, partitions)
        states = {
            TP(topic, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 0, (1, 2, 3)), EPOCH) for p in range(partitions)
        }
        assert set(self.real.create_partition_states(states, VERSION).values()) == {ZkCode.OK}
        return states

    def prepare_topic(self, topic: str, partitions: int) -> None:
        """The topic znode and its partition directories, so a state create is one op per partition."""
        self.real.create_topic(topic, {p: [1, 2, 3] for p in range(partitions)})
        for p in range(partitions):
            self.zk.ensure_path(paths.partition_path(TP(topic, p)))

    def read(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        read = ZkStore(self._connected()).get_partition_states([tp])[tp]
        return read.state

    def elect_other_controller(self) -> None:
        self._connected().set(paths.CONTROLLER_EPOCH_PATH, str(EPOCH + 1).encode())

    def elect_other_controller_after(self, ops: int) -> None:
        self._elect_after = ops

    def expire_session_after(self, ops: int, in_flight: int = 0) -> None:
        self._expire_after = ops
        self._in_flight = in_flight

    def lose_reply(self, tp: TopicPartition, times: int) -> None:
        self._lost[f"/{tp.topic}/partitions/{tp.partition}/state".encode()] = times


@pytest.fixture(params=["fake", "zookeeper"])
def backend(request: pytest.FixtureRequest) -> Iterator[Backend]:
    if request.param == "fake":
        yield FakeBackend()
    else:
        zk_chroot: str = request.getfixturevalue("zk_chroot")
        with started_client(zk_chroot) as client:
            yield RealBackend(client, zk_chroot)


def _bumps(states: dict[TopicPartition, LeaderIsrAndControllerEpoch]) -> dict[TopicPartition, LeaderAndIsr]:
    """A new leader epoch for each partition, conditional on the version read (0)."""
    return {tp: s.leader_and_isr.new_epoch() for tp, s in states.items()}


def _written(tp: TopicPartition, asked: LeaderAndIsr) -> LeaderIsrAndControllerEpoch:
    """What a state znode holds once ``asked`` has been written once by this controller."""
    return LeaderIsrAndControllerEpoch(asked.with_zk_version(asked.zk_version + 1), EPOCH)


def _drain(stream: Iterator[LeaderAndIsrWrite]) -> tuple[list[LeaderAndIsrWrite], BaseException | None]:
    """Every outcome a write stream yields, and what it raised after them (if anything)."""
    out: list[LeaderAndIsrWrite] = []
    try:
        for item in stream:
            out.append(item)
    except ControllerMovedError as exc:
        return out, exc
    return out, None


def _unchanged(backend: Backend, states: dict[TopicPartition, LeaderIsrAndControllerEpoch]) -> bool:
    return all(backend.read(tp) == state for tp, state in states.items())


# -- the fence --------------------------------------------------------------------------------------
@pytest.mark.parametrize("version", [-1, -2])
def test_a_fencing_version_below_zero_is_refused_and_writes_nothing(backend: Backend, version: int) -> None:
    states = backend.seed("orders", 3)
    with pytest.raises(ValueError, match=">= 0"):
        list(backend.store.update_leader_and_isr_iter(_bumps(states), EPOCH, version))
    backend.prepare_topic("fresh", 1)
    with pytest.raises(ValueError, match=">= 0"):
        backend.store.create_partition_states({TP("fresh", 0): states[TP("orders", 0)]}, version)
    assert _unchanged(backend, states)
    assert backend.read(TP("fresh", 0)) is None


def test_a_write_stream_does_nothing_until_it_is_iterated(backend: Backend) -> None:
    states = backend.seed("orders", 2)
    stream = backend.store.update_leader_and_isr_iter(_bumps(states), EPOCH, -1)  # not even refused yet
    unchecked = backend.store.update_leader_and_isr_iter(_bumps(states), EPOCH, VERSION)
    assert _unchanged(backend, states)
    with pytest.raises(ValueError):
        next(stream)
    assert [tp for tp, _ in unchecked] == list(states)


def test_a_fence_that_fails_before_the_first_op_writes_nothing(backend: Backend) -> None:
    states = backend.seed("orders", 3)
    backend.prepare_topic("fresh", 1)
    backend.elect_other_controller()
    outcomes, raised = _drain(backend.store.update_leader_and_isr_iter(_bumps(states), EPOCH, VERSION))
    assert outcomes == [] and isinstance(raised, ControllerMovedError)
    with pytest.raises(ControllerMovedError):
        backend.store.create_partition_states({TP("fresh", 0): states[TP("orders", 0)]}, VERSION)
    assert _unchanged(backend, states)
    assert backend.read(TP("fresh", 0)) is None


@pytest.mark.parametrize("landed", [1, 3])
def test_a_fence_that_fails_mid_batch_yields_exactly_what_landed_then_raises(backend: Backend, landed: int) -> None:
    states = backend.seed("orders", 5)
    asked = _bumps(states)
    order = list(asked)
    backend.elect_other_controller_after(landed)

    outcomes, raised = _drain(backend.store.update_leader_and_isr_iter(asked, EPOCH, VERSION))

    assert isinstance(raised, ControllerMovedError)
    assert outcomes == [(tp, asked[tp].with_zk_version(1)) for tp in order[:landed]]
    for tp in order[:landed]:
        assert backend.read(tp) == _written(tp, asked[tp])
    assert _unchanged(backend, {tp: states[tp] for tp in order[landed:]})


def test_a_create_whose_fence_fails_mid_batch_raises_with_the_first_creates_made(backend: Backend) -> None:
    backend.prepare_topic("fresh", 4)
    new = {TP("fresh", p): LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (2, 3)), EPOCH) for p in range(4)}
    backend.elect_other_controller_after(2)
    with pytest.raises(ControllerMovedError):
        backend.store.create_partition_states(new, VERSION)
    assert [backend.read(TP("fresh", p)) for p in range(4)] == [new[TP("fresh", 0)], new[TP("fresh", 1)], None, None]


# -- conditional writes and creates -----------------------------------------------------------------
def test_stale_versions_missing_znodes_and_existing_creates_are_per_partition(backend: Backend) -> None:
    states = backend.seed("orders", 3)
    asked = _bumps(states)
    asked[TP("orders", 1)] = asked[TP("orders", 1)].with_zk_version(7)  # a stale (wrong) version
    asked[TP("orders", 9)] = LeaderAndIsr(1, 1, (1,), 0)  # no such state znode

    outcomes = dict(backend.store.update_leader_and_isr_iter(asked, EPOCH, VERSION))

    assert outcomes[TP("orders", 0)] == asked[TP("orders", 0)].with_zk_version(1)
    assert outcomes[TP("orders", 1)] is None  # BADVERSION: re-read and retry
    missing = outcomes[TP("orders", 9)]
    assert isinstance(missing, ZkOperationError) and missing.code == ZkCode.NO_NODE
    assert outcomes[TP("orders", 2)] == asked[TP("orders", 2)].with_zk_version(1)
    assert backend.read(TP("orders", 1)) == states[TP("orders", 1)]

    codes = backend.store.create_partition_states(
        {TP("orders", 0): states[TP("orders", 0)], TP("ghost", 0): states[TP("orders", 0)]}, VERSION
    )
    assert codes == {TP("orders", 0): ZkCode.NODE_EXISTS, TP("ghost", 0): ZkCode.NO_NODE}


def test_reads_give_each_state_with_its_version_and_nonode_for_a_missing_one(backend: Backend) -> None:
    states = backend.seed("orders", 2)
    reads = backend.store.get_partition_states([*states, TP("orders", 5)])
    assert {tp: (r.code, r.state) for tp, r in reads.items()} == {
        **{tp: (ZkCode.OK, s) for tp, s in states.items()},
        TP("orders", 5): (ZkCode.NO_NODE, None),
    }


# -- session expiry -----------------------------------------------------------------------------------
def _ok_or_expired(
    backend: Backend,
    tp: TopicPartition,
    outcome: LeaderAndIsr | Exception | None,
    asked: LeaderAndIsr,
    before: LeaderIsrAndControllerEpoch,
    landed: bool,
) -> str:
    """After the expiry an op answers SESSIONEXPIRED or, once kazoo runs a new session, is made
    normally; ``landed``: an op that was in flight when the session went was applied either way."""
    if isinstance(outcome, ZkOperationError) and outcome.code == ZkCode.SESSION_EXPIRED:
        assert backend.read(tp) == (_written(tp, asked) if landed else before), tp
        return "expired"
    assert outcome == asked.with_zk_version(1), tp
    assert backend.read(tp) == _written(tp, asked)
    return "ok"


@pytest.mark.parametrize("in_flight", [0, 1])
def test_a_session_expiry_mid_batch_answers_session_expired_and_raises_nothing(
    backend: Backend, in_flight: int
) -> None:
    states = backend.seed("orders", 3)
    asked = _bumps(states)
    order = list(asked)
    backend.expire_session_after(1, in_flight=in_flight)

    outcomes, raised = _drain(backend.store.update_leader_and_isr_iter(asked, EPOCH, VERSION))

    assert raised is None and [tp for tp, _ in outcomes] == order
    assert outcomes[0] == (order[0], asked[order[0]].with_zk_version(1))
    assert backend.read(order[0]) == _written(order[0], asked[order[0]])
    seen = [
        _ok_or_expired(backend, tp, o, asked[tp], states[tp], landed=i <= in_flight)
        for i, (tp, o) in enumerate(outcomes[1:], start=1)
    ]
    assert seen[0] == "expired"  # the op right after the expiry (or the one in flight) saw it


def test_the_next_call_after_an_expiry_runs_in_the_new_session(backend: Backend) -> None:
    states = backend.seed("orders", 2)
    asked = _bumps(states)
    backend.expire_session_after(0)
    first = dict(backend.store.update_leader_and_isr_iter({TP("orders", 0): asked[TP("orders", 0)]}, EPOCH, VERSION))
    assert isinstance(first[TP("orders", 0)], ZkOperationError)
    if isinstance(backend, RealBackend):
        backend._connected()
    again = dict(backend.store.update_leader_and_isr_iter(asked, EPOCH, VERSION))
    assert again == {tp: lai.with_zk_version(1) for tp, lai in asked.items()}


# -- lost replies and replays --------------------------------------------------------------------------
def test_a_write_whose_reply_was_lost_once_is_replayed_and_confirmed_not_redone(backend: Backend) -> None:
    states = backend.seed("orders", 3)
    asked = _bumps(states)
    backend.lose_reply(TP("orders", 1), times=1)

    outcomes = dict(backend.store.update_leader_and_isr_iter(asked, EPOCH, VERSION))

    assert outcomes == {tp: lai.with_zk_version(1) for tp, lai in asked.items()}
    for tp in asked:
        assert backend.read(tp) == _written(tp, asked[tp])  # version 1: written once, not twice


def test_a_write_whose_reply_was_lost_twice_is_reported_unknown_though_it_landed(backend: Backend) -> None:
    states = backend.seed("orders", 2)
    asked = _bumps(states)
    backend.lose_reply(TP("orders", 0), times=2)

    outcomes = dict(backend.store.update_leader_and_isr_iter(asked, EPOCH, VERSION))

    unknown = outcomes[TP("orders", 0)]
    assert isinstance(unknown, ZkOperationError) and unknown.code == ZkCode.CONNECTION_LOSS
    assert backend.read(TP("orders", 0)) == _written(TP("orders", 0), asked[TP("orders", 0)])
    assert outcomes[TP("orders", 1)] == asked[TP("orders", 1)].with_zk_version(1)


def test_both_backends_satisfy_the_port() -> None:
    """mypy checks the signatures; ``Callable`` checks the methods are there at runtime too."""
    for cls in (FakePartitionStateStore, ZkStore):
        for name in ("get_partition_states", "create_partition_states", "update_leader_and_isr_iter"):
            assert isinstance(getattr(cls, name), Callable), (cls, name)  # type: ignore[arg-type]
