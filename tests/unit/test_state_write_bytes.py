"""The state writes' bulk encoding (``TopicZnodes._state_set_blobs``) sends the bytes of the generic path.

``update_leader_and_isr_iter`` encodes each set op of an election in one pass and hands the engine the
prepared bytes, which then only splits them into multis (``FencedMultiEngine._prepared_chunks``). The
wire must not change: here both paths write the same states through a kazoo client that records each
multi's payload and answers it at once (the engine's only use of the client), and the payloads, the
multi boundaries included, must be equal. The integration tests (``test_zk_store.py``,
``test_store_contract.py``) run the same writes against a real ZooKeeper.
"""

from __future__ import annotations

from typing import Any

import pytest
from kazoo.protocol.states import ZnodeStat

from controller_core.model import LeaderAndIsr, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.jute import PreparedRequest
from controller_core.zk.store import ZkStore
from controller_core.zk.store.wire import SET, Op

pytestmark = pytest.mark.unit

EPOCH = 7
EPOCH_ZK_VERSION = 3


class _Answered:
    def __init__(self) -> None:
        self.value: Any = None

    def get(self, timeout: float | None = None) -> Any:
        return self.value


class _Handler:
    timeout_exception = TimeoutError

    def async_result(self) -> _Answered:
        return _Answered()


class RecordingClient:
    """What the engine uses of a ``KazooClient``: each multi is recorded and succeeds at once."""

    default_acl = None

    def __init__(self, chroot: str) -> None:
        self.chroot = chroot
        self.handler = _Handler()
        self.payloads: list[bytes] = []

    def _call(self, request: PreparedRequest, pending: _Answered) -> None:
        self.payloads.append(request.serialize())
        stat = ZnodeStat(1, 2, 3, 4, 6, 0, 0, 0, 60, 0, 5)  # version 6
        pending.value = [True] + [stat] * (request.count - 1)


def _states(count: int) -> dict[TopicPartition, LeaderAndIsr]:
    return {
        TopicPartition(f"t{i // 7}-é" if i % 11 == 0 else f"t{i // 7}", i % 7 * 1000): LeaderAndIsr(
            i % 5, i, tuple(range(i % 4 + 1)), i % 13
        )
        for i in range(count)
    }


def _generic_ops(states: dict[TopicPartition, LeaderAndIsr]) -> list[Op]:
    """The ops as the state writes built them one by one before the bulk encoding."""
    return [
        Op(SET, paths.partition_state_path(tp), codecs.encode_leader_and_isr(lai, EPOCH), lai.zk_version)
        for tp, lai in states.items()
    ]


@pytest.mark.parametrize("chroot", ["", "/kafka/cluster-1"])
@pytest.mark.parametrize(("max_multi_bytes", "max_ops"), [(128_000, 0), (4096, 0), (128_000, 1), (128_000, 17)])
@pytest.mark.parametrize("count", [700, 5000])  # 5,000: encoded in blocks while the first multis leave
def test_bulk_encoded_state_writes_send_the_generic_paths_bytes(
    chroot: str, max_multi_bytes: int, max_ops: int, count: int
) -> None:
    states = _states(count)
    bulk_client, generic_client = RecordingClient(chroot), RecordingClient(chroot)
    bulk = ZkStore(bulk_client, max_multi_bytes=max_multi_bytes, max_ops_per_multi=max_ops)
    generic = ZkStore(generic_client, max_multi_bytes=max_multi_bytes, max_ops_per_multi=max_ops)

    outcomes = list(bulk.update_leader_and_isr_iter(states, EPOCH, EPOCH_ZK_VERSION))
    list(generic._fenced_write_iter(_generic_ops(states), EPOCH_ZK_VERSION))

    assert bulk_client.payloads == generic_client.payloads
    assert len(bulk_client.payloads) > (1 if max_multi_bytes < 128_000 or max_ops else 0)
    assert outcomes == [(tp, lai.with_zk_version(6)) for tp, lai in states.items()]


def test_the_ops_behind_the_bulk_bytes_are_the_generic_ops() -> None:
    """An error names the op's path, a replay's confirmation and the history read the ops: the lazy
    ``_StateSets`` view must give the ops the generic path built."""
    from controller_core.zk.store.topics import _StateSets

    states = _states(50)
    items = list(states.items())
    lazy = _StateSets(items, codecs.encode_leader_and_isr_many([lai for _, lai in items], EPOCH))
    assert len(lazy) == 50
    assert list(lazy) == _generic_ops(states)
    assert lazy[-1] == _generic_ops(states)[-1] and list(lazy[3:6]) == _generic_ops(states)[3:6]


@pytest.mark.parametrize("before", [1, 3000])  # 3,000: the big one is in a block encoded after the first
def test_a_state_write_too_big_for_a_multi_is_refused_before_anything_is_sent(before: int) -> None:
    client = RecordingClient("/kafka")
    store = ZkStore(client, max_multi_bytes=4096)
    states = {TopicPartition("small", i): LeaderAndIsr(1, 1, (1,), 0) for i in range(before)}
    states[TopicPartition("x" * 4000, 0)] = LeaderAndIsr(1, 1, (1,), 0)
    with pytest.raises(ValueError, match="cannot fit in one ZooKeeper request"):
        list(store.update_leader_and_isr_iter(states, EPOCH, EPOCH_ZK_VERSION))
    assert client.payloads == []


@pytest.mark.parametrize("before", [1, 3000])
def test_a_topic_name_that_is_no_path_is_refused_before_anything_is_sent(before: int) -> None:
    client = RecordingClient("")
    store = ZkStore(client)
    states = {TopicPartition("ok", i): LeaderAndIsr(1, 1, (1,), 0) for i in range(before)}
    states[TopicPartition("a/b", 0)] = LeaderAndIsr(1, 1, (1,), 0)
    with pytest.raises(ValueError, match="not a usable topic name"):
        list(store.update_leader_and_isr_iter(states, EPOCH, EPOCH_ZK_VERSION))
    assert client.payloads == []


def test_the_switch_interval_is_short_while_the_writes_stream_and_restored_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``CONTROLLER_WRITE_SWITCH_US``: kazoo's connection thread gets the interpreter lock within half
    a millisecond while the event thread works the results, and the process's interval comes back."""
    import sys

    from controller_core.zk.store import engine

    monkeypatch.setattr(engine, "WRITE_STREAM_SWITCH_S", 0.0005)
    before = sys.getswitchinterval()
    seen: list[float] = []
    store = ZkStore(RecordingClient(""), max_multi_bytes=4096)
    for _ in store.update_leader_and_isr_iter(_states(300), EPOCH, EPOCH_ZK_VERSION):
        seen.append(sys.getswitchinterval())
    assert before > 0.0005 and set(seen) == {0.0005}
    assert sys.getswitchinterval() == before
    monkeypatch.setattr(engine, "WRITE_STREAM_SWITCH_S", 0.0)  # 0: Python's own interval throughout
    assert {sys.getswitchinterval() for _ in store.update_leader_and_isr_iter(_states(30), EPOCH, 3)} == {before}


class FencingClient(RecordingClient):
    """Every multi's epoch check fails: another controller was elected."""

    def _call(self, request: PreparedRequest, pending: _Answered) -> None:
        from kazoo.exceptions import BadVersionError, RolledBackError

        self.payloads.append(request.serialize())
        pending.value = [BadVersionError()] + [RolledBackError()] * (request.count - 1)


def test_a_fence_with_the_reliability_history_on_records_every_op_of_a_batch_encoded_in_blocks(
    tmp_path: Any,
) -> None:
    """With the reliability history on, a fence in the middle of a large batch is still recorded and
    raised as the controller having moved (the history reads the batch's ops once it is fenced)."""
    from controller_core.errors import ControllerMovedError
    from controller_core.zk.history import HistoryRecorder

    recorder = HistoryRecorder(tmp_path / "history.jsonl", role="controller", node=1)
    store = ZkStore(FencingClient(""), recorder=recorder, max_in_flight=1)
    with pytest.raises(ControllerMovedError):
        list(store.update_leader_and_isr_iter(_states(5000), EPOCH, EPOCH_ZK_VERSION))
    assert (tmp_path / "history.jsonl").read_text().count('"FENCED"') > 0
