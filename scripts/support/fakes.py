"""In-memory stand-ins for the controller's ports, keeping the invariants the real ones enforce.

* ``FakePartitionStateStore`` behaves like the ZooKeeper-backed store: every state znode has a
  data version bumped on every write, conditional writes with a stale version fail with
  BADVERSION, missing znodes are NONODE, creating an existing one is NODEEXISTS, and every write
  is fenced by the version of a fake ``/controller_epoch``: a mismatch raises
  ``ControllerMovedError`` and changes nothing.
* ``RecordingTransport`` records what the controller sends to each broker and can answer.
* ``Harness`` wires a context, a store, a transport, a memory sink and both state machines, with
  helpers to seed partitions consistently in the context and the store.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller_core.context import ControllerContext
from controller_core.errors import ControllerMovedError, ZkOperationError
from controller_core.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.partition_state_machine import PartitionStateMachine
from controller_core.ports import LeaderAndIsrWrite, PartitionStateRead, ZkCode
from controller_core.protocol.messages import empty_response_for
from controller_core.replica_state_machine import ReplicaStateMachine
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.state_change_log import MemorySink, StateChangeLogger
from controller_core.states import PartitionState, ReplicaState


@dataclass
class _StateZnode:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    version: int
    corrupt: bool = False


class FakePartitionStateStore:
    """A ``PartitionStateStore`` over dicts, with ZooKeeper's version and fencing rules.

    Held to the real store's contract by ``tests/integration/test_store_contract.py`` (the same
    tests run against this and ``ZkStore`` on a real ZooKeeper): a fencing version below 0 is refused
    with ``ValueError``; the fence is checked per op as the real store checks it per multi, so a fence
    that fails after some ops landed raises ``ControllerMovedError`` after yielding exactly those, and
    the rest stay unwritten; ``update_leader_and_isr_iter`` is a generator (nothing happens until it
    is iterated); a session expiry makes the ops after it SESSIONEXPIRED (those in flight landed all
    the same); a reply lost once is replayed and confirmed (OK), lost twice is CONNECTIONLOSS with
    the write made.

    Fault injection:

    * ``read_errors[tp] = ZkCode.X``: reads of that znode return X.
    * ``fail_next_read = exc``: the next ``get_partition_states`` raises ``exc``.
    * ``write_errors[tp] = ZkCode.X``: conditional writes of that znode fail with X (not BADVERSION).
    * ``create_errors[tp] = ZkCode.X``: creating that state znode fails with X.
    * ``topics``: the topics whose ``/brokers/topics/<t>`` znode exists (``add_topic``; seeding a state
      or a harness partition adds it): creating a state under any other is NONODE, as in ZooKeeper.
    * ``concurrent_isr_change(tp, isr, times)``: between the controller's read and its next write(s),
      the leader rewrites the ISR (version +1, no epoch bump), so the write hits BADVERSION.
    * ``unreadable_topic_configs``: topics whose config read fails.
    * ``elect_other_controller()``: another controller bumps ``/controller_epoch``; our writes fence.
    * ``elect_other_controller_after(n)``: the same, once ``n`` more write ops have been made.
    * ``expire_session_after(n, in_flight)``: the session expires once ``n`` more write ops have been
      made; the next ``in_flight`` ops land but answer SESSIONEXPIRED, the rest of that call answers
      SESSIONEXPIRED unwritten. The next call runs in a new session, as kazoo reconnects.
    * ``lose_reply(tp, times)``: the write of ``tp`` lands but its reply is lost ``times`` times.
    """

    def __init__(self, controller_epoch: int = 1, controller_epoch_zk_version: int = 1) -> None:
        self.controller_epoch = controller_epoch
        self.controller_epoch_zk_version = controller_epoch_zk_version
        self.znodes: dict[TopicPartition, _StateZnode] = {}
        self.paths: set[str] = set()
        self.topics: set[str] = set()
        self.topic_configs: dict[str, dict[str, str]] = {}
        self.unreadable_topic_configs: set[str] = set()
        self.read_errors: dict[TopicPartition, ZkCode] = {}
        self.write_errors: dict[TopicPartition, ZkCode] = {}
        self.create_errors: dict[TopicPartition, ZkCode] = {}
        self.fail_next_read: Exception | None = None
        self._pending_isr_changes: dict[TopicPartition, list[tuple[int, ...]]] = {}
        self._elect_after: int | None = None
        self._expire_after: int | None = None
        self._expire_in_flight = 0
        self._lost_replies: dict[TopicPartition, int] = {}
        self.read_calls: list[list[TopicPartition]] = []
        self.update_calls: list[dict[TopicPartition, LeaderAndIsr]] = []
        self.create_calls: list[dict[TopicPartition, LeaderIsrAndControllerEpoch]] = []
        self.config_calls: list[set[str]] = []

    # -- seeding and inspection ------------------------------------------------------------------

    def seed_state(
        self,
        tp: TopicPartition,
        leader: int,
        isr: Iterable[int],
        *,
        leader_epoch: int = 0,
        controller_epoch: int = 1,
        version: int = 0,
    ) -> LeaderIsrAndControllerEpoch:
        """Put a state znode as if it had been written before; return it as read."""
        self.topics.add(tp.topic)
        self.paths.add(f"/brokers/topics/{tp.topic}/partitions")
        self.paths.add(f"/brokers/topics/{tp.topic}/partitions/{tp.partition}")
        self.znodes[tp] = _StateZnode(leader, leader_epoch, tuple(isr), controller_epoch, version)
        state = self.state(tp)
        assert state is not None
        return state

    def corrupt(self, tp: TopicPartition) -> None:
        """Make the znode's data undecodable (read OK, no state); a write, so the version moves."""
        self.znodes[tp].corrupt = True
        self.znodes[tp].version += 1

    def add_topic(self, topic: str) -> None:
        """The topic's znode exists (an admin created the topic)."""
        self.topics.add(topic)

    def delete_state(self, tp: TopicPartition) -> None:
        self.znodes.pop(tp, None)

    def state(self, tp: TopicPartition) -> LeaderIsrAndControllerEpoch | None:
        znode = self.znodes.get(tp)
        if znode is None or znode.corrupt:
            return None
        return LeaderIsrAndControllerEpoch(
            LeaderAndIsr(znode.leader, znode.leader_epoch, znode.isr, znode.version), znode.controller_epoch
        )

    def version(self, tp: TopicPartition) -> int:
        return self.znodes[tp].version

    def leader_isr_change(self, tp: TopicPartition, isr: Iterable[int]) -> None:
        """A leader-driven ISR write (pre-AlterIsr): new ISR, version +1, leader epoch unchanged."""
        znode = self.znodes[tp]
        znode.isr = tuple(isr)
        znode.version += 1

    def concurrent_isr_change(self, tp: TopicPartition, isr: Iterable[int], times: int = 1) -> None:
        """Before each of the next ``times`` writes touching ``tp``, the leader changes its ISR."""
        self._pending_isr_changes.setdefault(tp, []).extend([tuple(isr)] * times)

    def overwrite_by_newer_controller(self, tp: TopicPartition, controller_epoch: int) -> None:
        """A newer controller wrote this znode (its epoch is now in the JSON)."""
        znode = self.znodes[tp]
        znode.controller_epoch = controller_epoch
        znode.leader_epoch += 1
        znode.version += 1

    def elect_other_controller(self) -> None:
        """Another controller won: ``/controller_epoch`` changes, fencing every write of ours."""
        self.controller_epoch += 1
        self.controller_epoch_zk_version += 1

    def elect_other_controller_after(self, ops: int) -> None:
        """Another controller wins once ``ops`` more write ops have been made (landed or not)."""
        self._elect_after = ops

    def expire_session_after(self, ops: int, in_flight: int = 0) -> None:
        """The session expires once ``ops`` more write ops have been made (see the class docstring)."""
        self._expire_after = ops
        self._expire_in_flight = in_flight

    def lose_reply(self, tp: TopicPartition, times: int = 1) -> None:
        """The next write of ``tp`` lands, and its reply is lost ``times`` times (1: replayed, 2: unknown)."""
        self._lost_replies[tp] = times

    # -- PartitionStateStore ----------------------------------------------------------------------

    def _check_fence(self, expected_controller_epoch_zk_version: int) -> None:
        expected = expected_controller_epoch_zk_version
        if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
            raise ValueError(f"expected controller epoch zk version must be >= 0, got {expected!r}")
        if expected != self.controller_epoch_zk_version:
            raise ControllerMovedError(f"Controller epoch zkVersion check fails. Expected zkVersion = {expected}")

    def _op_session(self) -> tuple[bool, bool]:
        """Before each write op: run the armed faults; ``(expired, lands)`` for this op."""
        if self._elect_after is not None:
            if self._elect_after <= 0:
                self._elect_after = None
                self.elect_other_controller()
            else:
                self._elect_after -= 1
        if self._expire_after is None:
            return False, True
        if self._expire_after > 0:
            self._expire_after -= 1
            return False, True
        if self._expire_in_flight > 0:
            self._expire_in_flight -= 1
            return True, True
        return True, False

    def _end_of_call(self) -> None:
        """A call's ops are done: an expired session is replaced by a new one for the next call."""
        if self._expire_after == 0 and self._expire_in_flight == 0:
            self._expire_after = None

    def get_partition_states(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, PartitionStateRead]:
        self.read_calls.append(list(partitions))
        if self.fail_next_read is not None:
            error, self.fail_next_read = self.fail_next_read, None
            raise error
        result: dict[TopicPartition, PartitionStateRead] = {}
        for tp in partitions:
            code = self.read_errors.get(tp)
            if code is not None:
                result[tp] = PartitionStateRead(code)
            elif tp not in self.znodes:
                result[tp] = PartitionStateRead(ZkCode.NO_NODE)
            else:
                result[tp] = PartitionStateRead(ZkCode.OK, self.state(tp))
        return result

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, ZkCode]:
        """Like the real store: fenced per op, so a fence failing midway raises with the first creates made."""
        if not states:
            return {}
        self._check_fence(expected_controller_epoch_zk_version)
        self.create_calls.append(dict(states))
        codes: dict[TopicPartition, ZkCode] = {}
        try:
            for tp, info in states.items():
                expired, lands = self._op_session()
                if not lands:
                    codes[tp] = ZkCode.SESSION_EXPIRED
                    continue
                if not expired:
                    self._check_fence(expected_controller_epoch_zk_version)
                code = self._create(tp, info)
                codes[tp] = ZkCode.SESSION_EXPIRED if expired else code
        finally:
            self._end_of_call()
        return codes

    def _create(self, tp: TopicPartition, info: LeaderIsrAndControllerEpoch) -> ZkCode:
        if tp.topic not in self.topics:
            return ZkCode.NO_NODE
        self.paths.add(f"/brokers/topics/{tp.topic}/partitions")
        self.paths.add(f"/brokers/topics/{tp.topic}/partitions/{tp.partition}")
        code = self.create_errors.get(tp)
        if code is not None:
            return code
        if tp in self.znodes:
            return ZkCode.NODE_EXISTS
        lai = info.leader_and_isr
        self.znodes[tp] = _StateZnode(lai.leader, lai.leader_epoch, lai.isr, info.controller_epoch, 0)
        return ZkCode.OK

    def update_leader_and_isr_iter(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> Iterator[LeaderAndIsrWrite]:
        """Like the real store: a generator whose fence is checked per op (the real one: per multi)
        as it goes, so ``ControllerMovedError`` comes after the outcomes of the ops that landed."""
        self._check_fence(expected_controller_epoch_zk_version)
        self.update_calls.append(dict(states))
        if self._pending_isr_changes:
            for tp in states:
                pending = self._pending_isr_changes.get(tp)
                if pending:
                    self.leader_isr_change(tp, pending.pop(0))
        # Benchmarks write 10,000 states per call through here: what every op needs is inlined and the
        # armed faults are looked at only when one is armed (each is checked before every op).
        try:
            for tp, lai in states.items():
                expired = False
                if self._elect_after is not None or self._expire_after is not None:
                    expired, lands = self._op_session()
                    if not lands:
                        yield tp, ZkOperationError(ZkCode.SESSION_EXPIRED, _state_path(tp))
                        continue
                if not expired and expected_controller_epoch_zk_version != self.controller_epoch_zk_version:
                    self._check_fence(expected_controller_epoch_zk_version)
                outcome = self._set(tp, lai, controller_epoch)
                lost = self._lost_replies.pop(tp, 0) if self._lost_replies and isinstance(outcome, LeaderAndIsr) else 0
                if expired:
                    yield tp, ZkOperationError(ZkCode.SESSION_EXPIRED, _state_path(tp))
                elif lost >= 2:  # replayed, and the replay's reply lost too: outcome unknown
                    yield tp, ZkOperationError(ZkCode.CONNECTION_LOSS, _state_path(tp))
                else:  # lost once: the replay conflicts with our own write, which the store confirms
                    yield tp, outcome
        finally:
            self._end_of_call()

    def _set(self, tp: TopicPartition, lai: LeaderAndIsr, controller_epoch: int) -> LeaderAndIsr | Exception | None:
        if self.write_errors:
            code = self.write_errors.get(tp)
            if code is not None:
                return ZkOperationError(code, _state_path(tp))
        znode = self.znodes.get(tp)
        if znode is None:
            return ZkOperationError(ZkCode.NO_NODE, _state_path(tp))
        if znode.version != lai.zk_version:
            return None
        znode.leader, znode.leader_epoch, znode.isr = lai.leader, lai.leader_epoch, lai.isr
        znode.controller_epoch = controller_epoch
        znode.corrupt = False
        version = znode.version = znode.version + 1
        return LeaderAndIsr(lai.leader, lai.leader_epoch, lai.isr, version)

    def get_topic_configs(self, topics: Collection[str]) -> dict[str, Mapping[str, str]]:
        self.config_calls.append(set(topics))
        return {t: dict(self.topic_configs.get(t, {})) for t in topics if t not in self.unreadable_topic_configs}


@dataclass
class SentRequest:
    broker_id: int
    request: Any
    callback: Callable[[Any], None] | None

    @property
    def kind(self) -> str:
        return str(self.request.kind)


class RecordingTransport:
    """A ``RequestTransport`` that records every request, in order.

    With ``auto_respond`` every request that has a callback is answered at once with
    ``responder(broker_id, request)`` (default: a response with NONE everywhere). Otherwise
    ``respond(sent, response)`` answers one later, as a broker would.
    """

    def __init__(
        self,
        auto_respond: bool = False,
        responder: Callable[[int, Any], Any] | None = None,
    ) -> None:
        self.auto_respond = auto_respond
        self.responder = responder or (lambda _broker_id, request: empty_response_for(request))
        self.sent: list[SentRequest] = []

    def send(self, broker_id: int, request: Any, callback: Callable[[Any], None] | None = None) -> None:
        sent = SentRequest(broker_id, request, callback)
        self.sent.append(sent)
        if self.auto_respond and callback is not None:
            callback(self.responder(broker_id, request))

    def respond(self, sent: SentRequest, response: Any) -> None:
        assert sent.callback is not None, "request was sent without a callback"
        sent.callback(response)

    def of_kind(self, kind: str) -> list[SentRequest]:
        return [s for s in self.sent if s.kind == kind]

    def to_broker(self, broker_id: int, kind: str | None = None) -> list[SentRequest]:
        return [s for s in self.sent if s.broker_id == broker_id and (kind is None or s.kind == kind)]

    def order(self) -> list[tuple[str, int]]:
        return [(s.kind, s.broker_id) for s in self.sent]

    def leader_and_isr_partitions(self, broker_id: int) -> dict[TopicPartition, Any]:
        """Every LeaderAndIsr partition state sent to ``broker_id`` (last one wins)."""
        return {
            TopicPartition(p.topic, p.partition): p
            for s in self.to_broker(broker_id, "LeaderAndIsr")
            for p in s.request.partition_states
        }

    def stop_replica_partitions(self, broker_id: int) -> dict[TopicPartition, Any]:
        return {
            TopicPartition(p.topic, p.partition): p
            for s in self.to_broker(broker_id, "StopReplica")
            for p in s.request.partitions
        }

    def clear(self) -> None:
        self.sent.clear()


def broker(broker_id: int, epoch: int | None = None, rack: str | None = None) -> BrokerRegistration:
    """A registered broker with PLAINTEXT and CONTROL listeners and a deterministic epoch."""
    return BrokerRegistration(
        broker_id,
        (
            EndPoint("PLAINTEXT", f"broker{broker_id}", 9092),
            EndPoint("CONTROL", f"broker{broker_id}", 9093),
        ),
        epoch=100 + broker_id if epoch is None else epoch,
        rack=rack,
    )


@dataclass
class Harness:
    """A controller's core parts wired together over fakes, as the controller wires the real ones."""

    ctx: ControllerContext
    store: FakePartitionStateStore
    transport: RecordingTransport
    sink: MemorySink
    log: StateChangeLogger
    partition_batch: ControllerBrokerRequestBatch
    replica_batch: ControllerBrokerRequestBatch
    psm: PartitionStateMachine
    rsm: ReplicaStateMachine
    now: list[float] = field(default_factory=lambda: [1_700_000_000.0])

    def seed_partition(
        self,
        tp: TopicPartition,
        replicas: Sequence[int],
        *,
        leader: int | None = None,
        isr: Sequence[int] | None = None,
        leader_epoch: int = 0,
        controller_epoch: int | None = None,
        partition_state: PartitionState | None = None,
        replica_state: ReplicaState | None = None,
        adding: Sequence[int] = (),
        removing: Sequence[int] = (),
    ) -> None:
        """Create a partition in the context and, when ``leader`` is given, its state in ZooKeeper and the cache."""
        self.ctx.add_topics([tp.topic])
        self.store.add_topic(tp.topic)
        self.ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of(replicas, adding, removing))
        if leader is not None:
            state = self.store.seed_state(
                tp,
                leader,
                replicas if isr is None else isr,
                leader_epoch=leader_epoch,
                controller_epoch=self.ctx.epoch if controller_epoch is None else controller_epoch,
            )
            self.ctx.put_partition_leadership_info(tp, state)
        if partition_state is not None:
            self.ctx.put_partition_state(tp, partition_state)
        if replica_state is not None:
            for replica in replicas:
                self.ctx.put_replica_state(PartitionAndReplica(tp, replica), replica_state)

    def replica(self, tp: TopicPartition, broker_id: int) -> PartitionAndReplica:
        return PartitionAndReplica(tp, broker_id)


def make_harness(
    brokers: Iterable[int] = (1, 2, 3),
    controller_id: int = 1,
    epoch: int = 5,
    epoch_zk_version: int = 5,
    auto_respond: bool = False,
    decide_from_cache: bool = False,
    defer_records: int = 0,
) -> Harness:
    """A harness whose controller holds ``epoch`` with fencing version ``epoch_zk_version``.

    The state machines read before they write, as Kafka does, unless ``decide_from_cache`` (the
    controller's default, tested on its own) is set. ``defer_records`` is the logger's ``defer``
    (the controller's: ``DEFERRED_RECORDS``; records are then built on ``log.flush()``).
    """
    ctx = ControllerContext(controller_id)
    ctx.epoch = epoch
    ctx.epoch_zk_version = epoch_zk_version
    ctx.set_live_brokers(broker(b) for b in brokers)
    store = FakePartitionStateStore(controller_epoch=epoch, controller_epoch_zk_version=epoch_zk_version)
    transport = RecordingTransport(auto_respond=auto_respond)
    sink = MemorySink()
    now = [1_700_000_000.0]
    log = StateChangeLogger(sink, controller_id, lambda: ctx.epoch, clock=lambda: now[0], defer=defer_records)
    partition_batch = ControllerBrokerRequestBatch(ctx, transport, log)
    replica_batch = ControllerBrokerRequestBatch(ctx, transport, log)
    return Harness(
        ctx=ctx,
        store=store,
        transport=transport,
        sink=sink,
        log=log,
        partition_batch=partition_batch,
        replica_batch=replica_batch,
        psm=PartitionStateMachine(ctx, store, partition_batch, log, decide_from_cache=decide_from_cache),
        rsm=ReplicaStateMachine(ctx, store, replica_batch, log, decide_from_cache=decide_from_cache),
        now=now,
    )


def _state_path(tp: TopicPartition) -> str:
    return f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state"
