"""The state machines against partly applied batches: the case fencing exists for.

The fake store is held to ``ZkStore``'s contract (``tests/integration/test_store_contract.py``): a
fence that fails after some ops landed raises ``ControllerMovedError`` after yielding exactly those;
a session expiry answers SESSIONEXPIRED for the ops after it (one in flight landed all the same).
Whatever the state machines cache or record must then be what landed in ZooKeeper, and nothing
may reach a broker from a batch whose epoch was fenced.
"""

from __future__ import annotations

import pytest

from controller_core.election import OfflineStrategy
from controller_core.errors import ControllerMovedError, ZkOperationError
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, PartitionAndReplica, TopicPartition
from controller_core.ports import ZkCode
from controller_core.states import PartitionState, ReplicaState
from scripts.support.fakes import Harness, make_harness

pytestmark = pytest.mark.unit

P = PartitionState
R = ReplicaState
EPOCH = 5
TPS = [TopicPartition("orders", p) for p in range(4)]


@pytest.fixture
def h() -> Harness:
    """Four partitions led by broker 1 (ISR 1, 2, 3) at leader epoch 10, state version 0."""
    harness = make_harness(brokers=(1, 2, 3), epoch=EPOCH)
    for tp in TPS:
        harness.seed_partition(
            tp,
            [1, 2, 3],
            leader=1,
            isr=[1, 2, 3],
            leader_epoch=10,
            partition_state=P.ONLINE,
            replica_state=R.ONLINE,
        )
    return harness


def _seeded() -> LeaderIsrAndControllerEpoch:
    return LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 10, (1, 2, 3), 0), EPOCH)


def _records(h: Harness, kind: str) -> list[str]:
    h.log.flush()
    return [r["entity"] for r in h.sink.of_kind(kind)]


# -- partition state machine: elections -----------------------------------------------------------------
def test_an_election_fenced_after_two_writes_caches_and_records_exactly_those_two(h: Harness) -> None:
    h.ctx.remove_live_brokers([1])
    for tp in TPS:
        h.ctx.put_partition_state(tp, P.OFFLINE)
    h.store.elect_other_controller_after(2)

    with pytest.raises(ControllerMovedError):
        h.psm.handle_state_changes(TPS, P.ONLINE, OfflineStrategy())

    landed, fenced = TPS[:2], TPS[2:]
    for tp in landed:  # written in ZooKeeper: leader 2, epoch 11, version 1; the cache has exactly that
        assert h.store.state(tp) == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 11, (2, 3), 1), EPOCH)
        assert h.ctx.partition_leadership_info(tp) == h.store.state(tp)
    for tp in fenced:  # neither written nor cached
        assert h.store.state(tp) == _seeded()
        assert h.ctx.partition_leadership_info(tp) == _seeded()
    assert _records(h, "election") == ["orders-0", "orders-1"]
    assert h.transport.sent == []  # nothing goes out under a fenced epoch


def test_an_election_whose_session_expires_mid_batch_caches_only_confirmed_writes(h: Harness) -> None:
    h.ctx.remove_live_brokers([1])
    for tp in TPS:
        h.ctx.put_partition_state(tp, P.OFFLINE)
    h.store.expire_session_after(2, in_flight=1)  # the third write lands but its answer is SESSIONEXPIRED

    results = h.psm.handle_state_changes(TPS, P.ONLINE, OfflineStrategy())

    written = LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 11, (2, 3), 1), EPOCH)
    for tp in TPS[:2]:
        assert results[tp] == written.leader_and_isr
        assert h.ctx.partition_leadership_info(tp) == h.store.state(tp) == written
        assert h.ctx.partition_state(tp) is P.ONLINE
    for tp in TPS[2:]:
        error = results[tp]
        assert isinstance(error, ZkOperationError) and error.code == ZkCode.SESSION_EXPIRED
        assert h.ctx.partition_leadership_info(tp) == _seeded()  # an unknown outcome is never cached
        assert h.ctx.partition_state(tp) is P.OFFLINE
    assert h.store.state(TPS[2]) == written  # it did land: the cache is behind, never ahead
    assert h.store.state(TPS[3]) == _seeded()
    assert _records(h, "election") == ["orders-0", "orders-1"]
    assert sorted(_records(h, "failed_change")) == ["orders-2", "orders-3"]
    sent = {tp for b in (2, 3) for tp in h.transport.leader_and_isr_partitions(b)}
    assert sent == set(TPS[:2])


def test_an_initialization_fenced_after_two_creates_caches_and_sends_nothing(h: Harness) -> None:
    new = [TopicPartition("fresh", p) for p in range(4)]
    for tp in new:
        h.seed_partition(tp, [1, 2, 3], partition_state=P.NEW)
    h.store.elect_other_controller_after(2)

    with pytest.raises(ControllerMovedError):
        h.psm.handle_state_changes(new, P.ONLINE)

    # As the real store: the first two creates landed, the call raised before any result came back.
    assert [h.store.state(tp) is not None for tp in new] == [True, True, False, False]
    assert all(h.ctx.partition_leadership_info(tp) is None for tp in new)
    assert all(h.ctx.partition_state(tp) is P.NEW for tp in new)
    assert _records(h, "partition_transition") == []
    assert h.transport.sent == []


# -- replica state machine: ISR removal -----------------------------------------------------------------
def test_an_isr_removal_fenced_after_two_writes_caches_and_records_exactly_those_two(h: Harness) -> None:
    replicas = [PartitionAndReplica(tp, 2) for tp in TPS]
    h.store.elect_other_controller_after(2)

    with pytest.raises(ControllerMovedError):
        h.rsm.handle_state_changes(replicas, R.OFFLINE)

    for tp in TPS[:2]:
        assert h.store.state(tp) == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 11, (1, 3), 1), EPOCH)
        assert h.ctx.partition_leadership_info(tp) == h.store.state(tp)
    for tp in TPS[2:]:
        assert h.store.state(tp) == _seeded()
        assert h.ctx.partition_leadership_info(tp) == _seeded()
    assert _records(h, "isr_change") == ["orders-0@2", "orders-1@2"]
    assert all(h.ctx.replica_state(r) is R.ONLINE for r in replicas)  # no transition was completed
    assert h.transport.sent == []


def test_an_isr_removal_whose_session_expires_mid_batch_moves_only_confirmed_replicas(h: Harness) -> None:
    replicas = [PartitionAndReplica(tp, 2) for tp in TPS]
    h.store.expire_session_after(1)

    h.rsm.handle_state_changes(replicas, R.OFFLINE)

    assert h.ctx.partition_leadership_info(TPS[0]) == h.store.state(TPS[0])
    assert h.store.state(TPS[0]).leader_and_isr.isr == (1, 3)  # type: ignore[union-attr]
    for tp in TPS[1:]:
        assert h.store.state(tp) == h.ctx.partition_leadership_info(tp) == _seeded()
    assert _records(h, "isr_change") == ["orders-0@2"]
    assert sorted(_records(h, "failed_change")) == ["orders-1@2", "orders-2@2", "orders-3@2"]
    assert h.ctx.replica_state(replicas[0]) is R.OFFLINE
    assert all(h.ctx.replica_state(r) is R.ONLINE for r in replicas[1:])
    assert set(h.transport.leader_and_isr_partitions(1)) == {TPS[0]}
