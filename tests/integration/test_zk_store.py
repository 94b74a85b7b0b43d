"""ZkStore against a real ZooKeeper: Kafka's layout, epoch fencing, batching and per-partition results."""

from __future__ import annotations

import inspect
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionLoss

from controller_core.errors import ControllerMovedError, ZkOperationError
from controller_core.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.ports import LeaderAndIsrWrite, PartitionStateStore, ZkCode
from controller_core.zk import codecs, paths
from controller_core.zk.codecs import FeatureZNode, TopicAssignment
from controller_core.zk.history import HistoryRecorder
from controller_core.zk.multiread import MultiReader
from controller_core.zk.store import ControllerEpoch, ZkStore
from scripts.devservices import ZooKeeperServer, free_port
from scripts.reliability.faultproxy import FaultProxy
from tests.support.zk import expire_session, wait_for

pytestmark = pytest.mark.integration

TP = TopicPartition


@pytest.fixture
def store(zk: KazooClient) -> ZkStore:
    s = ZkStore(zk)
    s.ensure_persistent_paths()
    return s


@pytest.fixture
def controller(store: ZkStore) -> ControllerEpoch:
    return store.register_controller_and_increment_epoch(1)


def _client(hosts: str, timeout: float = 10.0) -> KazooClient:
    client = KazooClient(hosts=hosts, timeout=timeout)
    client.start(timeout=15)
    return client


def _topic_with_states(
    store: ZkStore, controller: ControllerEpoch, topic: str, partitions: int
) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
    store.create_topic(topic, {p: [1, 2, 3] for p in range(partitions)})
    states = {
        TP(topic, p): LeaderIsrAndControllerEpoch(LeaderAndIsr(1 + p % 3, 0, (1, 2, 3)), controller.epoch)
        for p in range(partitions)
    }
    assert set(store.create_partition_states(states, controller.epoch_zk_version).values()) == {ZkCode.OK}
    return states


# -- contract ----------------------------------------------------------------------------------------
def test_it_implements_the_partition_state_store_port(store: ZkStore) -> None:
    """Every method of the port, with the port's parameters; the behaviour behind them is the
    contract suite's (tests/integration/test_store_contract.py, the same tests as the fake)."""
    port: PartitionStateStore = store  # mypy checks the signatures statically
    methods = [name for name in vars(PartitionStateStore) if not name.startswith("_")]
    assert sorted(methods) == [
        "create_partition_states", "get_partition_states", "get_topic_configs", "update_leader_and_isr_iter",
    ]  # fmt: skip
    for name in methods:
        wanted = inspect.signature(getattr(PartitionStateStore, name))
        have = inspect.signature(getattr(type(port), name))
        assert list(have.parameters) == list(wanted.parameters), name
    # A generator: the port promises outcomes as they come, nothing done before the first is asked for.
    assert inspect.isgeneratorfunction(ZkStore.update_leader_and_isr_iter)


def test_it_creates_kafkas_persistent_paths(zk: KazooClient, store: ZkStore) -> None:
    for path in paths.PERSISTENT_PATHS:
        assert zk.exists(path) is not None, path
    store.ensure_persistent_paths()  # idempotent
    zk.delete(paths.ISR_CHANGE_NOTIFICATION_PATH)
    store.ensure_persistent_paths()  # only what is missing is created again
    assert zk.exists(paths.ISR_CHANGE_NOTIFICATION_PATH) is not None


# -- election ----------------------------------------------------------------------------------------
def test_the_first_controller_gets_epoch_1_at_zk_version_1(zk: KazooClient, store: ZkStore) -> None:
    won = store.register_controller_and_increment_epoch(3, {"endpoint": "http://127.0.0.1:9000"})
    assert won == ControllerEpoch(1, 1)
    data, stat = zk.get(paths.CONTROLLER_PATH)
    assert stat.ephemeralOwner == zk.client_id[0]
    body = json.loads(data)
    assert body["brokerid"] == 3 and body["version"] == 1 and body["endpoint"] == "http://127.0.0.1:9000"
    assert isinstance(body["timestamp"], str)
    assert zk.get(paths.CONTROLLER_EPOCH_PATH)[0] == b"1"
    assert store.get_controller_id() == 3
    assert store.get_controller_epoch() == ControllerEpoch(1, 1)


def test_a_second_candidate_fails_while_the_first_holds_controller_then_wins_epoch_2(zk_chroot: str) -> None:
    """The store half of ``Controller._elect`` (the controller half: test_controller_zk.py)."""
    first, second = _client(zk_chroot, timeout=4.0), _client(zk_chroot)
    try:
        one, two = ZkStore(first), ZkStore(second)
        assert one.register_controller_and_increment_epoch(1, {"endpoint": "http://one:9000"}) == ControllerEpoch(1, 1)
        with pytest.raises(ControllerMovedError, match="names broker 1"):
            two.register_controller_and_increment_epoch(2, {"endpoint": "http://two:9000"})
        assert two.get_controller_epoch() == ControllerEpoch(1, 1)  # the failed multi changed nothing
        assert two.get_controller_id() == 1

        expire_session(first, zk_chroot)
        wait_for(lambda: two.get_controller_id() is None, what="/controller to go with the session")
        assert two.register_controller_and_increment_epoch(2, {"endpoint": "http://two:9000"}) == ControllerEpoch(2, 2)
        current = two.get_controller()
        assert current is not None and current.broker_id == 2 and current.extra == {"endpoint": "http://two:9000"}
    finally:
        first.stop()
        second.stop()


def test_a_retried_election_is_confirmed_by_the_verification_path(zk: KazooClient, store: ZkStore) -> None:
    won = store.register_controller_and_increment_epoch(1)
    # As if our multi had been applied and then retried after a connection loss (reference §1.3 step 4).
    assert store._verify_controller_registration(1, won.epoch) == won
    with pytest.raises(ControllerMovedError):
        store._verify_controller_registration(2, won.epoch)


def test_deleting_controller_is_fenced_by_the_epoch_version(zk: KazooClient, store: ZkStore) -> None:
    """The store half of a controller move (only our own ``/controller``: test_controller_zk.py)."""
    won = store.register_controller_and_increment_epoch(1)
    zk.set(paths.CONTROLLER_EPOCH_PATH, b"9")  # another controller moved the epoch
    with pytest.raises(ControllerMovedError):
        store.delete_controller(won.epoch_zk_version)
    assert zk.exists(paths.CONTROLLER_PATH) is not None
    assert store.delete_controller(won.epoch_zk_version + 1) is True
    assert zk.exists(paths.CONTROLLER_PATH) is None
    assert store.delete_controller(won.epoch_zk_version + 1) is False  # already gone


# -- fencing -----------------------------------------------------------------------------------------
def test_a_write_fenced_by_a_bumped_epoch_fails_and_leaves_every_znode_untouched(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    states = _topic_with_states(store, controller, "orders", 4)
    before = {tp: zk.get(paths.partition_state_path(tp)) for tp in states}
    topic_before = zk.get(paths.topic_path("orders"))
    zk.set(paths.CONTROLLER_EPOCH_PATH, b"2")  # a new controller was elected

    new = {tp: LeaderAndIsr(2, 1, (2,), 0) for tp in states}
    with pytest.raises(ControllerMovedError):
        store.update_leader_and_isr(new, controller.epoch, controller.epoch_zk_version)
    with pytest.raises(ControllerMovedError):
        store.create_partition_states({TP("orders", 9): next(iter(states.values()))}, controller.epoch_zk_version)
    with pytest.raises(ControllerMovedError):
        store.set_topic_assignment("orders", None, {0: ReplicaAssignment((9,))}, controller.epoch_zk_version)
    with pytest.raises(ControllerMovedError):
        store.delete_topic_recursively("orders", controller.epoch_zk_version)
    with pytest.raises(ControllerMovedError):
        store.delete_controller(controller.epoch_zk_version)

    assert {tp: zk.get(paths.partition_state_path(tp)) for tp in states} == before
    assert zk.get(paths.topic_path("orders")) == topic_before
    assert zk.exists(paths.partition_state_path(TP("orders", 9))) is None
    assert zk.exists(paths.CONTROLLER_PATH) is not None


def test_fenced_writes_reject_a_negative_epoch_version(store: ZkStore) -> None:
    with pytest.raises(ValueError, match=">= 0"):
        store.delete_controller(-1)


# -- partition states --------------------------------------------------------------------------------
def test_partition_states_round_trip_with_kafkas_json_and_versions(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    states = _topic_with_states(store, controller, "orders", 3)
    raw, stat = zk.get(paths.partition_state_path(TP("orders", 1)))
    assert json.loads(raw) == {"controller_epoch": 1, "leader": 2, "version": 1, "leader_epoch": 0, "isr": [1, 2, 3]}
    assert stat.version == 0

    reads = store.get_partition_states([*states, TP("orders", 7), TP("missing", 0)])
    for tp, state in states.items():
        assert reads[tp].code is ZkCode.OK and reads[tp].state == state
    assert reads[TP("orders", 7)].code is ZkCode.NO_NODE and reads[TP("orders", 7)].state is None
    assert reads[TP("missing", 0)].code is ZkCode.NO_NODE

    again = store.create_partition_states(states, controller.epoch_zk_version)
    assert set(again.values()) == {ZkCode.NODE_EXISTS}
    missing_topic = store.create_partition_states(
        {TP("ghost", 0): states[TP("orders", 0)]}, controller.epoch_zk_version
    )
    assert missing_topic == {TP("ghost", 0): ZkCode.NO_NODE}


def test_an_unreadable_state_znode_is_reported_per_partition(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    states = _topic_with_states(store, controller, "orders", 2)
    zk.set(paths.partition_state_path(TP("orders", 0)), b"garbage")
    reads = store.get_partition_states(list(states))
    assert reads[TP("orders", 0)].code is ZkCode.OTHER
    assert reads[TP("orders", 1)].code is ZkCode.OK


def test_the_leadership_read_of_a_failover_keeps_only_readable_states_with_their_versions(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    states = _topic_with_states(store, controller, "orders", 4)
    zk.set(paths.partition_state_path(TP("orders", 0)), b"garbage")
    bumped = states[TP("orders", 2)].leader_and_isr.new_leader(3)
    store.update_leader_and_isr({TP("orders", 2): bumped}, controller.epoch, controller.epoch_zk_version)

    leadership = store.get_partition_leadership([*states, TP("orders", 1), TP("orders", 9)])

    assert list(leadership) == [TP("orders", 1), TP("orders", 2), TP("orders", 3)]  # input order, no duplicates
    assert leadership[TP("orders", 1)] == states[TP("orders", 1)]
    assert leadership[TP("orders", 2)].leader_and_isr == LeaderAndIsr(3, 1, (1, 2, 3), 1)
    reads = store.get_partition_states(list(states))
    assert {tp: r.state for tp, r in reads.items() if r.state is not None} == leadership


def test_a_wrongly_typed_state_znode_is_left_out_in_any_decode_batch_and_named(
    zk: KazooClient,
    store: ZkStore,
    controller: ControllerEpoch,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # A decode batch is a multi-read: at ~180 reply bytes an op, 10 partitions take two or three.
    monkeypatch.setattr(store.reader, "max_batch_bytes", 1024)
    states = _topic_with_states(store, controller, "orders", 10)
    coerced = {
        TP("orders", 1): b'{"controller_epoch":1,"leader":"2","version":1,"leader_epoch":0,"isr":[2]}',
        TP("orders", 5): b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":4.9,"isr":[2]}',
        TP("orders", 7): b'{"controller_epoch":1,"leader":2,"version":1,"leader_epoch":0,"isr":[2,true]}',
    }
    for tp, raw in coerced.items():
        zk.set(paths.partition_state_path(tp), raw)
    zk.delete(paths.partition_state_path(TP("orders", 8)))

    before = store.reader.counters.requests
    with caplog.at_level("ERROR", logger="controller_core.zk.store"):
        leadership = store.get_partition_leadership(list(states))
    assert store.reader.counters.requests - before >= 2  # several decode batches
    readable = [tp for tp in states if tp not in coerced and tp != TP("orders", 8)]
    assert leadership == {tp: states[tp] for tp in readable}  # no default, no coercion
    named = {TP("orders", 1): "$.leader", TP("orders", 5): "$.leader_epoch", TP("orders", 7): "$.isr[1]"}
    for tp, field in named.items():
        assert any(str(tp) in r.getMessage() and field in r.getMessage() for r in caplog.records), (tp, caplog.text)
    reads = store.get_partition_states(list(states))
    assert {tp for tp, r in reads.items() if r.code is ZkCode.OTHER} == set(coerced)
    assert reads[TP("orders", 8)].code is ZkCode.NO_NODE
    assert all(reads[tp].state == states[tp] for tp in readable)


def test_a_stale_version_fails_only_its_own_partition_in_a_batched_write(
    zk: KazooClient, zk_chroot: str, controller: ControllerEpoch
) -> None:
    # Small multis so that the batch spans many of them and stale partitions land in several.
    store = ZkStore(zk, max_multi_bytes=20_000)
    states = _topic_with_states(store, controller, "orders", 600)
    stale = [TP("orders", p) for p in (0, 1, 150, 299, 300, 599)]
    for tp in stale:  # someone else (a leader, pre-AlterIsr) wrote these state znodes meanwhile
        zk.set(paths.partition_state_path(tp), zk.get(paths.partition_state_path(tp))[0])

    store.reset_counters()
    new = {tp: s.leader_and_isr.new_leader_and_isr(3, (3, 1)) for tp, s in states.items()}
    result = store.update_leader_and_isr(new, controller.epoch, controller.epoch_zk_version)

    assert sorted(result.needs_retry) == sorted(stale)
    assert len(result.finished) == 600 - len(stale)
    for tp, written in result.finished.items():
        assert written == LeaderAndIsr(3, 1, (3, 1), 1), tp
    counters = store.counters()
    assert counters.failed_ops == len(stale) and counters.multis > 10
    reads = store.get_partition_states(list(states))
    for tp in states:
        state = reads[tp].state
        assert state is not None
        if tp in stale:
            assert state.leader_and_isr == LeaderAndIsr(1 + tp.partition % 3, 0, (1, 2, 3), 1)
        else:
            assert state.leader_and_isr == LeaderAndIsr(3, 1, (3, 1), 1)

    # The retry with the versions read again succeeds.
    retry = {tp: reads[tp].state.leader_and_isr.new_leader(2) for tp in stale}  # type: ignore[union-attr]
    again = store.update_leader_and_isr(retry, controller.epoch, controller.epoch_zk_version)
    assert again.needs_retry == [] and all(isinstance(v, LeaderAndIsr) for v in again.finished.values())


def test_a_missing_state_znode_finishes_with_an_error_not_a_retry(store: ZkStore, controller: ControllerEpoch) -> None:
    _topic_with_states(store, controller, "orders", 1)
    result = store.update_leader_and_isr(
        {TP("orders", 0): LeaderAndIsr(1, 1, (1,), 0), TP("orders", 5): LeaderAndIsr(1, 1, (1,), 0)},
        controller.epoch,
        controller.epoch_zk_version,
    )
    assert result.needs_retry == []
    assert isinstance(result.finished[TP("orders", 0)], LeaderAndIsr)
    error = result.finished[TP("orders", 5)]
    assert isinstance(error, ZkOperationError) and error.code == ZkCode.NO_NODE


def test_a_connection_drop_in_the_middle_of_a_batch_loses_no_partition(
    zk_server: ZooKeeperServer,
    zk_chroot: str,
    store: ZkStore,
    controller: ControllerEpoch,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    states = _topic_with_states(store, controller, "orders", 3000)
    new = {tp: s.leader_and_isr.new_epoch() for tp, s in states.items()}
    # The batch's client reaches ZooKeeper through a fault proxy, so the cut is certain to catch
    # multis that were applied but whose replies were still held (a plain socket shutdown raced
    # kazoo's reader: on a loaded machine every reply had already arrived, or nothing was sent yet).
    proxy = FaultProxy(zk_server.host, zk_server.port).start()
    proxied = KazooClient(hosts=f"127.0.0.1:{proxy.port}{zk_chroot[zk_chroot.index('/') :]}", timeout=10.0)
    proxied.start(timeout=15)
    small = ZkStore(proxied, max_multi_bytes=8192, max_in_flight=4)  # ~70 multis
    commit = small._commit
    ops_sent: list[int] = []

    def applied() -> int:
        reads = store.get_partition_states(list(new))
        return sum(1 for r in reads.values() if r.state is not None and r.state.leader_and_isr.zk_version == 1)

    def commit_then_cut(encoded: Any, indices: Any, expected: int) -> Any:
        if len(ops_sent) == 9:
            proxy.set_mode("drop_s2c")  # from the 10th multi on, ZooKeeper applies but replies are held
        pending = commit(encoded, indices, expected)
        ops_sent.append(len(indices))
        if len(ops_sent) == 10:
            wait_for(lambda: applied() >= sum(ops_sent), timeout=30, what="the first ten multis applied")
            proxy.set_mode("reset")  # the connection dies with the 10th multi's reply unread
            proxy.set_mode("pass")
        return pending

    monkeypatch.setattr(small, "_commit", commit_then_cut)
    try:
        result = small.update_leader_and_isr(new, controller.epoch, controller.epoch_zk_version)
    finally:
        proxied.stop()
        proxied.close()
        proxy.stop()

    # A multi whose reply was lost is replayed; its first attempt was applied, so the replay's
    # BADVERSION is recognised as our own write: nothing needs a retry and nothing is written twice.
    assert small.counters().connection_retries >= 1
    assert result.needs_retry == [] and set(result.finished) == set(new)
    final = store.get_partition_states(list(new))
    for tp, wanted in new.items():
        state = final[tp].state
        assert state is not None
        outcome = result.finished[tp]
        if isinstance(outcome, LeaderAndIsr):
            assert outcome == state.leader_and_isr == LeaderAndIsr(wanted.leader, 1, (1, 2, 3), 1)
        else:  # lost twice: unknown outcome, reported as such
            assert isinstance(outcome, ZkOperationError) and outcome.code == ZkCode.CONNECTION_LOSS
            assert state.leader_and_isr.zk_version in (0, 1)


# -- streamed writes --------------------------------------------------------------------------------
def _state_versions(store: ZkStore, partitions: list[TopicPartition]) -> list[int]:
    reads = store.get_partition_states(partitions)
    return [r.state.leader_and_isr.zk_version for r in (reads[tp] for tp in partitions) if r.state is not None]


def _streamed_epoch_bumps(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch, recorder: HistoryRecorder | None = None
) -> tuple[list[TopicPartition], Iterator[LeaderAndIsrWrite]]:
    """600 partitions at version 0, and a stream writing each a new leader epoch, one multi in flight."""
    states = _topic_with_states(store, controller, "orders", 600)
    new = {tp: s.leader_and_isr.new_epoch() for tp, s in states.items()}
    # ~80 partitions per multi
    one_at_a_time = ZkStore(zk, max_multi_bytes=8192, max_in_flight=1, recorder=recorder)
    return list(states), one_at_a_time.update_leader_and_isr_iter(new, controller.epoch, controller.epoch_zk_version)


def test_a_streamed_write_hands_over_results_while_later_multis_are_still_unsent(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    order, stream = _streamed_epoch_bumps(zk, store, controller)

    first_tp, first = next(stream)
    # The first multi is back and the second in flight; the last partitions are not written yet.
    assert first_tp == order[0] and isinstance(first, LeaderAndIsr) and first.zk_version == 1
    assert _state_versions(store, order[-80:]) == [0] * 80

    rest = list(stream)
    assert [tp for tp, _ in rest] == order[1:]  # every partition once, in the order asked
    assert all(isinstance(o, LeaderAndIsr) and o.zk_version == 1 for _, o in rest)
    assert _state_versions(store, order) == [1] * len(order)


def test_with_the_reliability_history_on_a_write_hands_over_nothing_before_the_batch_is_complete(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch, tmp_path: Path
) -> None:
    """The fault-injection suite's history records every op of a batch when it completes; it keeps
    the whole-batch order (as test pause points do), so no result is used before it is recorded."""
    recorder = HistoryRecorder(tmp_path / "history.jsonl", role="controller", node=1)
    order, stream = _streamed_epoch_bumps(zk, store, controller, recorder)

    next(stream)
    assert _state_versions(store, order) == [1] * len(order)
    history = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert sum(1 for h in history if h.get("op") == "set" and h.get("result") == "OK") == len(order)
    assert len(list(stream)) == len(order) - 1


def test_an_epoch_bump_in_the_middle_of_a_streamed_write_keeps_what_was_already_written(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    order, stream = _streamed_epoch_bumps(zk, store, controller)
    yielded = [next(stream)]
    zk.set(paths.CONTROLLER_EPOCH_PATH, b"99")  # another controller is elected meanwhile

    with pytest.raises(ControllerMovedError):
        yielded.extend(stream)
    # What was handed over was written while the epoch was ours; the tail was fenced off.
    assert len(yielded) < len(order)
    assert _state_versions(store, [tp for tp, _ in yielded]) == [1] * len(yielded)
    assert _state_versions(store, order[-80:]) == [0] * 80


def test_a_write_too_big_for_any_multi_fails_the_call_before_anything_is_written(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    states = _topic_with_states(store, controller, "orders", 200)
    order = list(states)
    new = {tp: states[tp].leader_and_isr.new_epoch() for tp in order}
    new[order[-1]] = LeaderAndIsr(1, 1, tuple(range(1000, 3000)), 0)  # ~10 KB of JSON
    small = ZkStore(zk, max_multi_bytes=4096, max_in_flight=1)

    with pytest.raises(ValueError, match="cannot fit in one ZooKeeper request"):
        small.update_leader_and_isr(new, controller.epoch, controller.epoch_zk_version)
    assert _state_versions(store, order) == [0] * len(order)


def test_a_connection_loss_in_the_middle_of_a_streamed_state_read_resumes_where_it_stopped(
    zk: KazooClient,
    store: ZkStore,
    controller: ControllerEpoch,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    states = _topic_with_states(store, controller, "orders", 600)
    reader = MultiReader(zk, max_batch_bytes=4096, max_in_flight=2)  # ~30 states per request
    streamed = ZkStore(zk, reader=reader)
    receive = reader._receive
    answered: list[int] = []

    def lose_the_fourth_answer(*args: Any) -> Any:
        # What kazoo raises for a request whose answer the dropped connection took with it; a real
        # drop (drop_connection) races kazoo's resending of unsent requests, so it may lose nothing.
        answered.append(1)
        if len(answered) == 4:  # three batches already handed over and decoded
            raise ConnectionLoss()
        return receive(*args)

    monkeypatch.setattr(reader, "_receive", lose_the_fourth_answer)
    with caplog.at_level("INFO", logger="controller_core.zk.store"):
        read = streamed.get_partition_leadership(list(states))
    assert "retrying once" in caplog.text
    assert read == states  # every partition once, none lost or duplicated by the resumption
    assert len(answered) > 20


# -- batches bigger than ZooKeeper's 1 MB limit -------------------------------------------------------
@dataclass(kw_only=True)
class _KafkaDefaultZooKeeper(ZooKeeperServer):
    """A server with ZooKeeper's (and Kafka's) default 1 MB ``jute.maxbuffer``."""

    name: str = "zookeeper-1mb"

    def prepare(self) -> None:
        super().prepare()
        self.config_file.write_text(self.config_file.read_text().replace("jute.maxbuffer=4194304\n", ""))

    def command(self) -> list[str]:
        return [arg for arg in super().command() if not arg.startswith("-Djute.maxbuffer")]


@pytest.fixture(scope="module")
def small_buffer_zk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    server = _KafkaDefaultZooKeeper(host="127.0.0.1", port=free_port(), base_dir=Path(tmp_path_factory.mktemp("zk1mb")))
    server.start()
    try:
        yield server.connect_string
    finally:
        server.stop()


def test_batches_bigger_than_1mb_are_chunked_for_a_1mb_jute_maxbuffer_server(small_buffer_zk: str) -> None:
    client = _client(small_buffer_zk)
    try:
        raw = client.transaction()
        for i in range(2500):
            raw.create(f"/too-big-{i}", b"x" * 500)
        with pytest.raises(ConnectionLoss):  # proof that this server enforces 1 MB: it drops us
            raw.commit()
        wait_for(lambda: client.connected, what="reconnection")

        store = ZkStore(client)
        store.ensure_persistent_paths()
        controller = store.register_controller_and_increment_epoch(1)
        topic_states = {}
        for t in range(4):
            topic_states.update(_topic_with_states(store, controller, f"topic-{t}", 5000))
        c = store.counters()
        assert c.largest_multi_bytes <= 128_000 and c.multis >= 40  # 20k states + 20k parents: ~ 6 MB

        reads = store.get_partition_states(list(topic_states))
        assert all(r.code is ZkCode.OK for r in reads.values())
        assert store.reader.supported is True
        assert store.reader.counters.largest_response < 1_000_000
        assert store.reader.counters.requests >= 4

        new = {tp: r.state.leader_and_isr.new_epoch() for tp, r in reads.items() if r.state is not None}
        result = store.update_leader_and_isr(new, controller.epoch, controller.epoch_zk_version)
        assert len(result.finished) == 20_000 and not result.needs_retry
        store.delete_topics_recursively([f"topic-{t}" for t in range(4)], controller.epoch_zk_version)
        assert store.get_all_topics() == set()
    finally:
        client.stop()


# -- brokers -----------------------------------------------------------------------------------------
def _registration(broker_id: int, port: int = 9092) -> BrokerRegistration:
    return BrokerRegistration(
        id=broker_id,
        endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", port), EndPoint("CONTROL", "127.0.0.1", port + 1)),
        rack="r1",
        features={"f": (0, 1)},
    )


def test_broker_registration_uses_czxid_as_the_broker_epoch(zk: KazooClient, store: ZkStore) -> None:
    epoch = store.register_broker(_registration(1))
    _, stat = zk.get(paths.broker_id_path(1))
    assert epoch == stat.czxid and stat.ephemeralOwner == zk.client_id[0]
    store.register_broker(_registration(2, 9192))
    brokers = store.get_all_broker_registrations()
    assert sorted(brokers) == [1, 2]
    assert brokers[1].epoch == epoch and brokers[1].endpoint("control") == EndPoint("CONTROL", "127.0.0.1", 9093)
    assert brokers[2].rack == "r1" and brokers[2].features == {"f": (0, 1)}
    assert store.get_broker_registration(1) == brokers[1]
    assert store.get_broker_registration(7) is None
    assert store.get_broker_ids() == [1, 2]


def test_broker_registration_node_exists_semantics(zk_chroot: str) -> None:
    first, second = _client(zk_chroot, timeout=4.0), _client(zk_chroot)
    try:
        mine, theirs = ZkStore(first), ZkStore(second)
        mine.ensure_persistent_paths()
        epoch = mine.register_broker(_registration(1))
        assert mine.register_broker(_registration(1)) == epoch  # same session: fine, same epoch
        with pytest.raises(ZkOperationError, match="already registered by another session") as err:
            theirs.register_broker(_registration(1))
        assert err.value.code == ZkCode.NODE_EXISTS

        expire_session(first, zk_chroot)
        wait_for(lambda: second.exists(paths.broker_id_path(1)) is None, what="ephemeral gone")
        wait_for(lambda: first.connected, what="new session")
        new_epoch = mine.register_broker(_registration(1))  # re-registration after expiry: new epoch
        assert new_epoch > epoch
    finally:
        first.stop()
        second.stop()


# -- topics ------------------------------------------------------------------------------------------
def test_topics_round_trip_in_kafkas_format(zk: KazooClient, store: ZkStore, controller: ControllerEpoch) -> None:
    store.create_topic("orders", {0: [1, 2], 1: [2, 1]}, {"unclean.leader.election.enable": "true"})
    store.create_topic("audit", {0: [1, 2]}, topic_id="Vx3tYpc3QyKZ1nF2t4mHkQ")
    assert json.loads(zk.get(paths.topic_path("orders"))[0]) == {
        "version": 3,
        "partitions": {"0": [1, 2], "1": [2, 1]},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    assert store.get_all_topics() == {"orders", "audit"}
    assignments = store.get_replica_assignments(["orders", "audit", "ghost"])
    assert assignments == {
        "orders": TopicAssignment(None, {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))}),
        "audit": TopicAssignment("Vx3tYpc3QyKZ1nF2t4mHkQ", {0: ReplicaAssignment((1, 2))}),
    }
    assert store.get_topic_configs(["orders", "audit", "ghost"]) == {
        "orders": {"unclean.leader.election.enable": "true"},
        "audit": {},
        "ghost": {},
    }

    moving = {0: ReplicaAssignment((1, 2)).reassign_to((3, 1)), 1: ReplicaAssignment((2, 1))}
    store.set_topic_assignment("orders", "new-id", moving, controller.epoch_zk_version)
    assert store.get_replica_assignments(["orders"])["orders"] == TopicAssignment("new-id", moving)
    with pytest.raises(ZkOperationError) as err:
        store.set_topic_assignment("ghost", None, moving, controller.epoch_zk_version)
    assert err.value.code == ZkCode.NO_NODE


def test_assignments_stream_a_multi_read_at_a_time_in_the_order_asked(
    store: ZkStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``iter_replica_assignments`` (a cold failover loads each chunk while the next is read): the
    topics in the order asked, missing ones left out, chunk by chunk; together ``get_replica_assignments``."""
    names = [f"t{i:02d}" for i in range(12)]
    for i, name in enumerate(names):
        store.create_topic(name, {p: [1 + (p + i) % 3, 1 + (p + i + 1) % 3] for p in range(4)})
    monkeypatch.setattr(store.reader, "max_batch_bytes", 4096)  # ~2 KB of reply expected a topic
    asked = [*reversed(names), "ghost"]
    chunks = list(store.iter_replica_assignments(asked))
    assert len(chunks) >= 3
    assert [t for chunk in chunks for t in chunk] == asked[:-1]
    merged = {t: a for chunk in chunks for t, a in chunk.items()}
    assert merged == store.get_replica_assignments(asked) and merged["t03"].partitions[0] == ReplicaAssignment((1, 2))


def test_creating_a_topic_validates_and_refuses_duplicates(store: ZkStore) -> None:
    store.create_topic("orders", {0: [1, 2]})
    with pytest.raises(ZkOperationError, match="already exists"):
        store.create_topic("orders", {0: [1, 2]})
    for name, assignment, message in [
        ("bad name", {0: [1]}, "characters"),
        ("t", {}, "at least one partition"),
        ("t", {1: [1]}, "numbered 0..0"),
        ("t", {0: [1, 1]}, "duplicate"),
        ("t", {0: [1, 2], 1: [1]}, "same number of replicas"),
    ]:
        with pytest.raises(ValueError, match=message):
            store.create_topic(name, assignment)


def test_set_topic_config_writes_a_change_notification(zk: KazooClient, store: ZkStore) -> None:
    store.set_topic_config("orders", {"retention.ms": "1000"})
    assert store.get_topic_configs(["orders"]) == {"orders": {"retention.ms": "1000"}}
    (change,) = zk.get_children(paths.CONFIG_CHANGES_PATH)
    assert change.startswith("config_change_")
    assert json.loads(zk.get(f"{paths.CONFIG_CHANGES_PATH}/{change}")[0]) == {
        "version": 2,
        "entity_path": "topics/orders",
    }


def test_topic_deletion_removes_everything_children_first_and_fenced(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    _topic_with_states(store, controller, "orders", 3)
    _topic_with_states(store, controller, "kept", 1)
    store.mark_topic_for_deletion("orders")
    with pytest.raises(ZkOperationError, match="already marked"):
        store.mark_topic_for_deletion("orders")
    with pytest.raises(ZkOperationError, match="does not exist"):
        store.mark_topic_for_deletion("ghost")
    assert store.get_topic_deletions() == ["orders"]
    assert store.get_partition_znode_ids(["orders", "ghost"]) == {"orders": {0, 1, 2}, "ghost": set()}

    store.delete_topic_recursively("orders", controller.epoch_zk_version)
    store.delete_topic_configs(["orders", "ghost"], controller.epoch_zk_version)
    store.delete_topic_deletions(["orders"], controller.epoch_zk_version)
    assert zk.exists(paths.topic_path("orders")) is None
    assert zk.exists(paths.topic_config_path("orders")) is None
    assert store.get_topic_deletions() == []
    assert store.get_all_topics() == {"kept"}
    store.delete_topic_recursively("orders", controller.epoch_zk_version)  # already gone: fine


# -- admin znodes and notifications ------------------------------------------------------------------
def test_reassignment_request_round_trip_and_fenced_updates(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    assert store.get_partition_reassignment() is None
    store.create_partition_reassignment_request({TP("foo", 0): [1, 2], TP("foo", 1): [2, 3]})
    assert zk.get(paths.REASSIGN_PARTITIONS_PATH)[0] == (
        b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]},'
        b'{"topic":"foo","partition":1,"replicas":[2,3]}]}'
    )
    with pytest.raises(ZkOperationError, match="already pending"):
        store.create_partition_reassignment_request({TP("foo", 0): [1]})
    assert store.get_partition_reassignment() == {TP("foo", 0): (1, 2), TP("foo", 1): (2, 3)}

    store.set_partition_reassignment({TP("foo", 1): [2, 3]}, controller.epoch_zk_version)
    assert store.get_partition_reassignment() == {TP("foo", 1): (2, 3)}
    assert store.delete_partition_reassignment(controller.epoch_zk_version) is True
    assert store.delete_partition_reassignment(controller.epoch_zk_version) is False
    store.set_partition_reassignment({TP("foo", 2): [1]}, controller.epoch_zk_version)  # creates when absent
    assert store.get_partition_reassignment() == {TP("foo", 2): (1,)}

    zk.set(paths.REASSIGN_PARTITIONS_PATH, b"not json")
    assert store.get_partition_reassignment() == {}


def test_a_preferred_election_request_over_the_znode_limit_is_refused_before_writing(zk: KazooClient) -> None:
    """ZooKeeper would drop the connection (ConnectionLoss, no reason given); the store says why."""
    small = ZkStore(zk, max_znode_bytes=2_000)
    many = [TP("orders", p) for p in range(100)]  # ~3,600 bytes of JSON
    with pytest.raises(ValueError, match=r"100 partitions is [\d,]+ bytes, over the 2,000-byte limit"):
        small.create_preferred_replica_election_request(many)
    assert small.get_preferred_replica_election() is None
    small.create_preferred_replica_election_request(many[:40])
    assert small.get_preferred_replica_election() == set(many[:40])


def test_preferred_replica_election_request_round_trip(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    assert store.get_preferred_replica_election() is None
    assert store.get_preferred_replica_election_entries() is None
    store.create_preferred_replica_election_request([TP("t", 1), TP("t", 0)])
    with pytest.raises(ZkOperationError, match="already in progress"):
        store.create_preferred_replica_election_request([TP("t", 0)])
    assert store.get_preferred_replica_election() == {TP("t", 0), TP("t", 1)}
    assert store.get_preferred_replica_election_entries() == [TP("t", 1), TP("t", 0)]  # the request's order
    assert store.delete_preferred_replica_election(controller.epoch_zk_version) is True
    assert store.get_preferred_replica_election() is None
    assert store.delete_preferred_replica_election(controller.epoch_zk_version) is False

    zk.create(paths.PREFERRED_REPLICA_ELECTION_PATH, b"not json")  # read as an empty request, as Kafka does
    assert store.get_preferred_replica_election() == set()
    assert store.get_preferred_replica_election_entries() == []


def test_isr_change_and_log_dir_notifications_are_read_in_order_and_deleted_fenced(
    zk: KazooClient, store: ZkStore, controller: ControllerEpoch
) -> None:
    first = store.create_isr_change_notification([TP("a", 0), TP("b", 0)])
    second = store.create_isr_change_notification([TP("a", 0)])
    zk.create(f"{paths.ISR_CHANGE_NOTIFICATION_PATH}/isr_change_", b"junk", sequence=True)
    names = store.get_isr_change_notification_names()
    assert names[:2] == [first, second] and first == "isr_change_0000000000"
    assert store.get_isr_change_notifications([*names, "isr_change_0000000099"]) == {
        first: {TP("a", 0), TP("b", 0)},
        second: {TP("a", 0)},
    }
    store.delete_isr_change_notifications([*names, "isr_change_0000000099"], controller.epoch_zk_version)
    assert store.get_isr_change_notification_names() == []

    event = store.create_log_dir_event_notification(3)
    assert event.startswith("log_dir_event_")
    zk.create(f"{paths.LOG_DIR_EVENT_NOTIFICATION_PATH}/log_dir_event_", b"junk", sequence=True)  # skipped
    assert store.get_log_dir_event_broker_ids(store.get_log_dir_event_notification_names()) == {event: 3}
    store.delete_log_dir_event_notifications(store.get_log_dir_event_notification_names(), controller.epoch_zk_version)
    assert store.get_log_dir_event_notification_names() == []


def test_feature_and_cluster_id_znodes(store: ZkStore, controller: ControllerEpoch) -> None:
    assert store.get_feature_znode() is None
    store.set_feature_znode(FeatureZNode(True, {"f": (1, 2)}), controller.epoch_zk_version)
    store.set_feature_znode(FeatureZNode(True, {"f": (1, 3)}), controller.epoch_zk_version)
    assert store.get_feature_znode() == FeatureZNode(True, {"f": (1, 3)})
    cluster_id = store.get_or_create_cluster_id()
    assert store.get_or_create_cluster_id("other") == cluster_id
    assert codecs.decode_cluster_id(store.client.get(paths.CLUSTER_ID_PATH)[0]) == cluster_id


def test_unbatched_writes_send_one_fenced_multi_per_partition(
    zk: KazooClient, zk_chroot: str, controller: ControllerEpoch
) -> None:
    """``max_ops_per_multi=1`` is the benchmark's Kafka 1.1 baseline: same outcomes, one multi each."""
    store = ZkStore(zk, max_ops_per_multi=1, max_in_flight=100)
    states = _topic_with_states(store, controller, "orders", 50)
    stale = TP("orders", 7)
    zk.set(paths.partition_state_path(stale), zk.get(paths.partition_state_path(stale))[0])
    store.reset_counters()
    new = {tp: s.leader_and_isr.new_leader_and_isr(3, (3, 1)) for tp, s in states.items()}
    result = store.update_leader_and_isr(new, controller.epoch, controller.epoch_zk_version)
    assert result.needs_retry == [stale]
    assert len(result.finished) == 49
    counters = store.counters()
    assert (counters.multis, counters.write_ops, counters.failed_ops, counters.split_retries) == (50, 50, 1, 0)
