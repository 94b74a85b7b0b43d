"""The warm standby's kept controller context, in memory: changed path by path it stays equal to a
cold failover's load of the same cluster (with the state machines' initial states), and a failover's
start-up run on it (the partition state machine's without deriving again) does exactly what it does
on a cold load (same requests, writes, records and context after).
The same comparison against a real ZooKeeper: tests/integration/test_standby_follower.py."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest
from kazoo.exceptions import NoNodeError

from controller_core.context import ControllerContext
from controller_core.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.protocol.messages import PartedList, encode, encode_control_request, encode_control_request_parts
from controller_core.standby.kept_requests import KeptRequests
from controller_core.standby.view import ClusterView, Kind, Target, classify
from controller_core.standby.warm_context import (
    IDENTITY_FIELDS,
    WarmContext,
    adopt,
    start_partition_state_machine,
    start_replica_state_machine,
)
from controller_core.zk import codecs
from controller_core.zk.codecs import TopicAssignment
from scripts.support.fakes import make_harness
from tests.support.contexts import cold_loaded_context, context_fields, load_brokers_topics_and_assignments

BROKERS = (1, 2, 3, 4, 5)
TOPICS = ("a", "b", "c", "d")


@dataclass
class _Stat:
    version: int
    czxid: int
    mzxid: int
    mtime: int = 0


@dataclass
class _Read:
    """A multi-read's result for one path, as the follower hands it to the view."""

    data: bytes | None
    stat: _Stat | None
    error: Exception | None = None


class _ViewStore:
    """The four failover reads answered from a view (the oracle's input in memory)."""

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def get_all_broker_registrations(self) -> dict[int, BrokerRegistration]:
        return dict(self.view.brokers)

    def get_all_topics(self) -> set[str]:
        return set(self.view.topics)

    def get_replica_assignments(self, topics: Any) -> dict[str, TopicAssignment]:
        return self.view.assignments_for(topics)

    def get_partition_leadership(self, partitions: Any) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        return self.view.leadership_for(partitions)


class _Cluster:
    """Random changes to a cluster, each handed to the view as the follower would (a re-read)."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.zxid = 10
        self.versions: dict[TopicPartition, int] = {}

    def _stat(self, version: int = 0) -> _Stat:
        self.zxid += 1
        return _Stat(version, self.zxid, self.zxid)

    def change(self) -> tuple[Target, _Read]:
        rng = self.rng
        kind = rng.choice(["broker", "broker", "topic", "state", "state", "state", "state"])
        if kind == "broker":
            b = rng.choice(BROKERS)
            if rng.random() < 0.5:
                return Target(Kind.BROKER, b), _Read(None, None, NoNodeError())
            reg = BrokerRegistration(b, (EndPoint("PLAINTEXT", "h", 9000 + b),))
            return Target(Kind.BROKER, b), _Read(codecs.encode_broker_registration(reg), self._stat())
        topic = rng.choice(TOPICS)
        if kind == "topic":
            if rng.random() < 0.2:
                return Target(Kind.TOPIC, topic), _Read(None, None, NoNodeError())
            partitions = {}
            for p in range(rng.randint(1, 4)):
                replicas = rng.sample(BROKERS, rng.randint(1, 3))
                adding = [r for r in replicas[:1] if rng.random() < 0.2]
                partitions[p] = ReplicaAssignment.of(replicas, adding)
            data = codecs.encode_topic_assignment(partitions, f"id-{topic}")
            return Target(Kind.TOPIC, topic), _Read(data, self._stat())
        tp = TopicPartition(topic, rng.randint(0, 4))
        if rng.random() < 0.1:
            return Target(Kind.STATE, tp), _Read(None, None, NoNodeError())
        version = self.versions[tp] = self.versions.get(tp, -1) + 1
        leader = rng.choice((-1, *BROKERS))
        isr = tuple(rng.sample(BROKERS, rng.randint(1, 3)))
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr(leader, version, isr, version), rng.randint(1, 3))
        return Target(Kind.STATE, tp), _Read(codecs.encode_partition_state(state), self._stat(version))


def _assert_same(mine: dict[str, Any], expected: dict[str, Any]) -> None:
    for name, value in expected.items():
        assert mine[name] == value, name


def _startup_requests(ctx: ControllerContext) -> dict[str, Any]:
    """What ``ReplicaStateMachine.startup``'s step 2 adds to its batch on ``ctx`` (the product's cold
    path, the oracle): LeaderAndIsr states per broker and UpdateMetadata states, partition-keyed."""
    h = make_harness(brokers=())
    adopt(h.ctx, ctx)
    h.replica_batch.new_batch()
    h.rsm._initialize_states([])
    leader_and_isr = {
        b: dict(states) for b, states in h.replica_batch.leader_and_isr_requests.items() if b in ctx.live_broker_ids
    }
    update_metadata = {s.topic_partition: s for s in h.replica_batch._update_metadata_states()}
    h.replica_batch.clear()
    return {"leader_and_isr": leader_and_isr, "update_metadata": update_metadata}


def _kept_requests(kept: KeptRequests) -> dict[str, Any]:
    """``kept`` partition-keyed, after checking it is in the start-up's order: each group and the
    UpdateMetadata states in the context's partition order, the groups by their first partition."""
    rank = {pid: i for i, (_, pid) in enumerate(kept.ctx.iter_assigned_ids())}
    orders: list[list[int]] = [list(group) for group in kept.groups.values()] + [list(kept.update_metadata)]
    for pids in orders:
        ranks = [rank[pid] for pid in pids]
        assert ranks == sorted(ranks), "out of the context's partition order"
    firsts = [rank[next(iter(group))] for group in kept.groups.values()]
    assert firsts == sorted(firsts), "groups out of order"
    leader_and_isr, update_metadata, parts = kept.take()
    for broker_id, own in parts.items():  # each broker's states are its shared parts, in order
        assert [s for part in own for s in part] == list(leader_and_isr[broker_id].values())
    tps = kept.ctx.table.tps
    return {
        "leader_and_isr": {b: {tps[pid]: s for pid, s in states.items()} for b, states in leader_and_isr.items()},
        "update_metadata": {tps[pid]: s for pid, s in update_metadata.items()},
    }


@pytest.mark.parametrize("settle_every", [1, 4])
@pytest.mark.parametrize("seed", range(12))
def test_changed_path_by_path_it_equals_a_cold_load(seed: int, settle_every: int) -> None:
    rng = random.Random(seed)
    cluster = _Cluster(rng)
    view = ClusterView()
    for _ in range(60):  # a starting cluster, loaded whole
        view.apply(*cluster.change())
    warm = WarmContext.load(7, view)
    for i in range(30):
        # One re-read's worth of changed paths at a time, as the follower applies them.
        chunk = [cluster.change() for _ in range(rng.randint(1, 8))]
        for target, read in chunk:
            view.apply(target, read)
        warm.apply_all([target for target, _ in chunk], view)
        assert warm.broken is None
        cold = cold_loaded_context(_ViewStore(view))  # type: ignore[arg-type]
        _assert_same(context_fields(warm.ctx), context_fields(cold))
        if i % settle_every == settle_every - 1:
            # The kept start-up requests, field by field, equal what the start-up adds on a cold load
            # (``kept`` first refreshes what the re-reads since the last time changed: ``settle``).
            _assert_same(_kept_requests(warm.kept), _startup_requests(cold))
            assert warm.stale_count == 0


def test_a_storm_refreshes_each_kept_request_once_when_settled() -> None:
    # Path by path, the same partitions change again and again: their kept requests wait for settle.
    rng = random.Random(4)
    cluster = _Cluster(rng)
    view = ClusterView()
    for _ in range(80):
        view.apply(*cluster.change())
    warm = WarmContext.load(7, view)
    refreshed: list[int] = []
    refresh = warm._kept.refresh

    def counted(ids: Any, *, at_end: bool = False) -> None:
        ids = list(ids)
        refreshed.extend(ids)
        refresh(ids, at_end=at_end)

    warm._kept.refresh = counted  # type: ignore[method-assign]
    # Rewritten state znodes (a missing one reloads its topic, refreshed at once: rare).
    states = [t for t in (cluster.change() for _ in range(200)) if t[0].kind is Kind.STATE and t[1].error is None]
    for _ in range(3):
        for target, read in states:
            view.apply(target, read)
        warm.apply_all([target for target, _ in states], view)
    assert states and not refreshed and warm.stale_count > 0
    warm.settle()
    assert warm.stale_count == 0 and len(refreshed) == len(set(refreshed))
    _assert_same(_kept_requests(warm.kept), _startup_requests(cold_loaded_context(_ViewStore(view))))  # type: ignore[arg-type]


def test_a_conflicting_topic_id_breaks_the_context_instead_of_handing_it_over() -> None:
    view = ClusterView()
    one = ReplicaAssignment.of([1])
    view.topics = {"a": TopicAssignment("same", {0: one}), "b": TopicAssignment("same", {0: one})}
    assert WarmContext.load(1, view).broken is not None


@pytest.mark.parametrize("seed", range(6))
def test_a_failover_start_up_on_it_does_what_it_does_on_a_cold_load(seed: int) -> None:
    rng = random.Random(100 + seed)
    cluster = _Cluster(rng)
    view = ClusterView()
    for _ in range(80):
        view.apply(*cluster.change())
    warm = WarmContext.load(1, view)
    for _ in range(10):
        target, read = cluster.change()
        view.apply(target, read)
        warm.apply(target, view)
    runs = []
    for kept in (None, warm.ctx):
        h = make_harness(brokers=(), decide_from_cache=True)
        for states in view.states.values():
            for tp, state in states.items():
                lai = state.leader_and_isr
                h.store.seed_state(tp, lai.leader, lai.isr, leader_epoch=lai.leader_epoch, version=lai.zk_version)
        for topic in view.topics:
            h.store.add_topic(topic)
        if kept is None:
            cold = ControllerContext(1)
            store = _ViewStore(view)
            load_brokers_topics_and_assignments(cold, store, view.topics)  # type: ignore[arg-type]
            cold.load_partition_leadership_info(store.get_partition_leadership(cold.all_partitions()))
            adopt(h.ctx, cold)
        else:
            adopt(h.ctx, kept)
        if kept is None:
            h.rsm.startup()
        else:
            start_replica_state_machine(h.rsm, h.replica_batch, h.ctx, h.log, warm.kept)
        if kept is None:
            h.psm.startup()
        else:  # as the controller starts it on the warm path
            start_partition_state_machine(h.psm, h.ctx, h.log)
        requests = sorted(
            (
                s.kind,
                s.broker_id,
                # Field by field (as JSON), in partition order: a cold load numbers partitions otherwise.
                tuple(sorted(((p.topic, p.partition), encode(p)) for p in s.request.partition_states)),
                encode(getattr(s.request, "live_leaders", None)),
                encode(getattr(s.request, "live_brokers", None)),
                # A dict built from a set of topic names: its order follows the partitions' order.
                tuple(sorted((getattr(s.request, "topic_ids", None) or {}).items())),
            )
            for s in h.transport.sent
        )
        records = [
            (r["kind"], r.get("machine"), r.get("counts")) for r in h.sink.records if r["kind"] == "states_initialized"
        ]
        runs.append((context_fields(h.ctx), requests, dict(h.store.znodes), records))
    (cold_fields, cold_requests, cold_znodes, cold_records), (warm_fields, warm_requests, warm_znodes, warm_records) = (
        runs
    )
    _assert_same(warm_fields, cold_fields)
    assert warm_requests == cold_requests
    assert warm_znodes == cold_znodes
    assert warm_records == cold_records and len(cold_records) == 2


def test_adopt_moves_every_field_but_the_controllers_identity_and_fencing() -> None:
    target, source = ControllerContext(1), ControllerContext(2)
    target.epoch, target.epoch_zk_version = 9, 8
    source.set_all_topics({"a"})
    adopt(target, source)
    assert (target.controller_id, target.epoch, target.epoch_zk_version) == (1, 9, 8)
    for name, value in vars(source).items():
        if name not in IDENTITY_FIELDS:
            assert getattr(target, name) is value, name
    assert target.all_topics == {"a"}


@pytest.mark.parametrize("seed", range(8))
def test_the_kept_requests_are_the_bytes_the_start_up_sends_on_the_same_context(seed: int) -> None:
    """Warm takeover with the kept requests vs ``ReplicaStateMachine.startup`` on an identical kept
    context (same changes, same partition numbers): the same requests, byte for byte, in the same order."""
    sent: list[list[tuple[int, bytes]]] = []
    for use_kept in (False, True):
        rng = random.Random(300 + seed)
        cluster = _Cluster(rng)
        view = ClusterView()
        for _ in range(60):
            view.apply(*cluster.change())
        warm = WarmContext.load(1, view)
        for _ in range(15):
            chunk = [cluster.change() for _ in range(rng.randint(1, 6))]
            for target, read in chunk:
                view.apply(target, read)
            warm.apply_all([target for target, _ in chunk], view)
        h = make_harness(brokers=(), decide_from_cache=True)
        for states in view.states.values():
            for tp, state in states.items():
                lai = state.leader_and_isr
                h.store.seed_state(tp, lai.leader, lai.isr, leader_epoch=lai.leader_epoch, version=lai.zk_version)
        adopt(h.ctx, warm.ctx)
        if use_kept:
            start_replica_state_machine(h.rsm, h.replica_batch, h.ctx, h.log, warm.kept)
        else:
            h.rsm.startup()
        sent.append([(s.broker_id, encode_control_request(s.request)) for s in h.transport.sent])
    assert sent[0] and sent[1] == sent[0]


def test_a_large_start_up_sends_each_groups_leader_and_isr_json_once_warm_or_cold() -> None:
    """3,000 partitions over 5 brokers: each broker's LeaderAndIsr is made of its replica lists' shared
    parts (one JSON each for all their replicas), warm or cold, and the bytes are those of the plain
    list, the same on both paths."""
    view = ClusterView()
    view.brokers = {b: BrokerRegistration(b, (EndPoint("PLAINTEXT", "h", 9000 + b),)) for b in range(1, 6)}
    for t in range(30):
        replicas = {p: ReplicaAssignment.of([1 + (t + p + k) % 5 for k in range(3)]) for p in range(100)}
        view.topics[f"t{t}"] = TopicAssignment(f"id-{t}", replicas)
        view.states[f"t{t}"] = {
            TopicPartition(f"t{t}", p): LeaderIsrAndControllerEpoch(LeaderAndIsr(a.replicas[0], 4, a.replicas, 2), 3)
            for p, a in replicas.items()
        }
    sent: list[list[tuple[int, bytes]]] = []
    for use_kept in (False, True):
        warm = WarmContext.load(1, view)
        h = make_harness(brokers=(), decide_from_cache=True)
        for states in view.states.values():
            for tp, state in states.items():
                lai = state.leader_and_isr
                h.store.seed_state(tp, lai.leader, lai.isr, leader_epoch=lai.leader_epoch, version=lai.zk_version)
        adopt(h.ctx, warm.ctx)
        if use_kept:
            start_replica_state_machine(h.rsm, h.replica_batch, h.ctx, h.log, warm.kept)
            assert not warm.kept.groups and not warm.kept.update_metadata  # let go once in the batch
        else:
            h.rsm.startup()
        leader_and_isr = [s.request for s in h.transport.sent if s.kind == "LeaderAndIsr"]
        assert len(leader_and_isr) == 5
        holders: dict[int, int] = {}
        for request in leader_and_isr:
            states = request.partition_states
            assert isinstance(states, PartedList) and len(states) == 1800
            assert [s for part in states.parts for s in part] == list(states)
            for part in states.parts:
                holders[id(part)] = holders.get(id(part), 0) + 1
            plain = msgspec.structs.replace(request, partition_states=list(states))
            assert b"".join(encode_control_request_parts(request)) == encode_control_request(plain)
        assert set(holders.values()) == {3}  # every part shared by its three replicas' requests
        sent.append([(s.broker_id, encode_control_request(s.request)) for s in h.transport.sent])
    assert sent[0] == sent[1]


def test_a_topic_queued_for_deletion_gets_its_update_metadata_built_not_kept() -> None:
    view = ClusterView()
    reg = {b: BrokerRegistration(b, (EndPoint("PLAINTEXT", "h", 9000 + b),)) for b in (1, 2)}
    view.brokers = dict(reg)
    view.topics = {"a": TopicAssignment("id-a", {0: ReplicaAssignment.of([1, 2])})}
    tp = TopicPartition("a", 0)
    view.states = {"a": {tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 3, (1, 2), 3), 2)}}
    warm = WarmContext.load(1, view)
    h = make_harness(brokers=())
    adopt(h.ctx, warm.ctx)
    h.ctx.queue_topic_deletion({"a"})
    start_replica_state_machine(h.rsm, h.replica_batch, h.ctx, h.log, warm.kept)
    updates = [s.request for s in h.transport.sent if s.kind == "UpdateMetadata"]
    assert len(updates) == 2 and all([p.leader for p in u.partition_states] == [-2] for u in updates)


def test_the_kept_context_and_the_view_share_one_partition_key_and_one_topic_name() -> None:
    """A standby holds its view and the context built from it: a partition's key object (and its
    topic's name) is one object in both, as a cold load's keys are one per partition."""
    view = ClusterView()
    view.apply(
        Target(Kind.TOPIC, "orders"),
        _Read(
            codecs.encode_topic_assignment({p: ReplicaAssignment.of([1, 2]) for p in range(4)}, "id"), _Stat(0, 5, 5)
        ),
    )
    for p in range(4):
        target = classify("/brokers/topics/" + "ord" + f"ers/partitions/{p}/state")  # a new name each time
        assert target is not None
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 2)), 3)
        view.apply(target, _Read(codecs.encode_partition_state(state), _Stat(0, 6 + p, 6 + p)))
    warm = WarmContext.load(1, view)
    view_keys = {tp: tp for tp in view.states["orders"]}
    assert len(warm.ctx.table.tps) == 4
    for tp in warm.ctx.table.tps:
        assert view_keys[tp] is tp
    assert len({id(tp.topic) for tp in warm.ctx.table.tps}) == 1


@pytest.mark.parametrize("seed", range(200))
def test_a_parted_lists_leaders_and_topics_are_those_of_its_states_in_the_same_order(seed: int) -> None:
    # The takeover's LeaderAndIsr takes them part by part (each shared part once for all its
    # brokers); ``topic_ids`` is built by iterating the topic set, so its order is the wire's.
    from controller_core.request_batch import _leaders_and_topics_of_parts

    rng = random.Random(seed)
    topics = rng.choice([3, 30, 300, 3000])
    parts: list[Any] = [
        [_PartState(f"t{rng.randrange(topics)}", rng.randrange(10)) for _ in range(rng.randint(0, 400))]
        for _ in range(rng.randint(1, 12))
    ]
    states = [state for part in parts for state in part]
    leaders, in_order = _leaders_and_topics_of_parts(parts, {})
    assert leaders == {s.leader for s in states}
    assert list(in_order) == list(set(s.topic for s in states))


@dataclass
class _PartState:
    topic: str
    leader: int
