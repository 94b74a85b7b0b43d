"""The controller context a warm standby keeps ready, so that taking over is a swap, not a load.

A cold failover reads brokers, topics, assignments and partition states into an empty
``ControllerContext``, then its state machines derive every partition's and replica's initial state
(``PartitionStateMachine.startup``: New without leadership, Online with a live leader, else Offline;
``ReplicaStateMachine.startup``: OnlineReplica on a live broker, else ReplicaDeletionIneligible). At
100,000 partitions that load costs more than the reads (docs/performance.md). A ``WarmContext``
holds that same context, built once from the standby's ``ClusterView`` and then changed by what
changed: each path the follower re-reads is applied to the view, then here.

How each change lands (``apply``), always from the view's entry, never from an event's type:

* a broker registered or gone: the broker set; when that changes who is live, the initial states of
  the partitions with a replica on it or led by it are derived again;
* a topic's assignment: the topic is forgotten (its rows emptied: assignment, leadership, both
  initial states) and loaded again with its partitions' states from the view (rare: creation,
  partition addition, a reassignment step, deletion);
* a partition state of an assigned partition: its leadership, then its initial partition state
  (replica states do not depend on leadership); a state znode gone while still assigned reloads
  the topic (topic deletion deletes the states first).

Partition numbers differ from a cold load's (rows are never reused) but nothing depends on them:
the property test compares the two contexts partition by partition. What the standby does *not*
keep is what a failover decides itself after loading: the topic-deletion queue, shutting-down
brokers, offline log directories, the epoch (all empty in a freshly loaded context too).

The kept start-up requests (``KeptRequests``) of the partitions a re-read changed are brought up to
the context later, not per re-read: ``kept`` does it when asked for (a takeover, a test), and the
follower does it (``settle``) once its backlog is empty. A broker failure's storm thus refreshes each
partition once, after the storm, instead of with each of its re-reads (the broker's own deregistration
first refreshed its 30,000 partitions, their state rewrites the same 30,000 again: ~2.5 us each, on
the path of every change the standby applies, under the GIL of a process short of CPU).

``adopt`` hands the context over to the controller's own ``ControllerContext`` object (the state
machines, batches and managers hold that one) by moving its fields across, keeping the controller's
identity and fencing token. No I/O and no locking here: the follower applies under its lock and
hands over once it has stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable
from typing import Any

from controller_core.context import ControllerContext
from controller_core.errors import ControllerMovedError, IllegalStateError
from controller_core.model import PartitionAndReplica, TopicPartition
from controller_core.partition_state_machine import ElectionResults, PartitionStateMachine
from controller_core.record_kinds import RecordKind
from controller_core.replica_state_machine import ReplicaStateMachine
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.standby.kept_requests import KeptRequests
from controller_core.standby.view import ClusterView, Kind, Target
from controller_core.state_change_log import StateChangeLogger
from controller_core.states import PartitionState, ReplicaState
from controller_core.zk.codecs import TopicAssignment

logger = logging.getLogger(__name__)

_P = PartitionState
_R = ReplicaState

#: Fields of a context that are the controller's own, not the cluster's: never handed over.
IDENTITY_FIELDS = frozenset({"controller_id", "epoch", "epoch_zk_version"})


class WarmContext:
    """A ``ControllerContext`` as a cold failover would load it from ``view`` (module docstring).

    Example::

        warm = WarmContext.load(controller_id, view)     # after the follower's full read
        view.apply(target, read); warm.apply(target, view)   # for each re-read path
        adopt(controller.ctx, warm.ctx)                  # on taking over (event thread)
    """

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.broken: str | None = None
        """Why this context cannot be handed over (the view holds what a cold load rejects)."""
        self._kept = KeptRequests(ctx)
        self._stale: set[int] = set()
        """Partition numbers whose kept requests wait for ``settle``."""

    @property
    def kept(self) -> KeptRequests:
        """The replica state machine start-up's per-partition request states of ``ctx``, kept with it
        (brought up to the context first: ``settle``)."""
        self.settle()
        return self._kept

    @property
    def stale_count(self) -> int:
        """Partitions whose kept requests ``settle`` has yet to refresh."""
        return len(self._stale)

    def settle(self) -> None:
        """Refresh the kept requests of every partition changed since the last call, then put them in
        the start-up's order (``KeptRequests.settle``). Idempotent: any order of refreshes gives the
        same requests, so one refresh per partition after many changes is the same as one per change."""
        stale = self._stale
        if stale:
            self._stale = set()
            self._kept.refresh(stale)
        self._kept.settle()

    @classmethod
    def load(cls, controller_id: int, view: ClusterView) -> WarmContext:
        """Build the context from the whole view, in a cold failover's order."""
        warm = cls(ControllerContext(controller_id))
        ctx = warm.ctx
        ctx.set_live_brokers(view.brokers.values())
        ctx.set_all_topics(view.topics)
        try:
            for topic, assignment in view.topics.items():
                warm._store_topic(topic, assignment, view.states.get(topic))
        except IllegalStateError as exc:
            warm._break(exc)
            return warm
        ctx.load_partition_leadership_info(view.leadership_for(ctx.all_partitions()))
        warm._derive([pid for _, pid in ctx.iter_assigned_ids()])
        warm._kept = KeptRequests.build(ctx)
        return warm

    # -- changes ------------------------------------------------------------------------------------
    def apply(self, target: Target, view: ClusterView) -> None:
        """Make the context match the view's entry for ``target`` (just re-read into ``view``)."""
        if self.broken is not None:
            return
        kind = target.kind
        try:
            if kind is Kind.STATE:
                self._apply_state(target.key, view)
            elif kind is Kind.TOPIC:
                self._reload_topic(target.key, view)
            elif kind is Kind.BROKER:
                self._apply_broker(target.key, view)
            # Admin znodes: the failover reads them itself (deletions, reassignment, preferred election).
        except IllegalStateError as exc:
            self._break(exc)

    def apply_all(self, targets: Iterable[Target], view: ClusterView) -> None:
        """``apply`` for one re-read's paths: brokers and topics one by one, then the partition states
        in one pass (a broker failure's 60,000 rewrites come this way). Every step reads the view as
        it is after the whole re-read, so their order does not matter."""
        if self.broken is not None:
            return
        states: list[TopicPartition] = []
        for target in targets:
            if target.kind is Kind.STATE:
                states.append(target.key)
            else:
                self.apply(target, view)
        if not states or self.broken is not None:
            return
        table = self.ctx.table
        by_topic, leadership = table.by_topic, table.leadership
        view_states = view.states
        infos: list[tuple[int, Any]] = []
        # A partition's initial state depends only on its leader: an ISR-only change keeps it.
        leader_moved: list[int] = []
        reload: set[str] = set()
        for tp in states:
            members = by_topic.get(tp.topic)
            pid = None if members is None else members.get(tp)
            if pid is None:
                continue
            by_partition = view_states.get(tp.topic)
            info = None if by_partition is None else by_partition.get(tp)
            if info is None:
                reload.add(tp.topic)
                continue
            infos.append((pid, info))
            before = leadership[pid]
            if before is None or before.leader_and_isr.leader != info.leader_and_isr.leader:
                leader_moved.append(pid)
        try:
            self.ctx.put_leadership_by_id(infos)
            _derive_partition_states(self.ctx, leader_moved)
            self._stale.update([pid for pid, _ in infos])
            for topic in sorted(reload):
                self._reload_topic(topic, view)
        except IllegalStateError as exc:
            self._break(exc)

    def _apply_state(self, tp: TopicPartition, view: ClusterView) -> None:
        ctx = self.ctx
        table = ctx.table
        members = table.by_topic.get(tp.topic)
        pid = None if members is None else members.get(tp)
        if pid is None:
            return  # not assigned: a cold load would not read it (the view keeps it for later)
        by_partition = view.states.get(tp.topic)
        info = None if by_partition is None else by_partition.get(tp)
        if info is None:
            self._reload_topic(tp.topic, view)  # rare: only the topic's reload can drop leadership
            return
        ctx.put_leadership_by_id([(pid, info)])
        _derive_partition_states(self.ctx, [pid])
        self._stale.add(pid)

    def _apply_broker(self, broker_id: int, view: ClusterView) -> None:
        ctx = self.ctx
        was_live = broker_id in ctx.live_broker_ids
        registration = view.brokers.get(broker_id)
        if registration is not None:
            ctx.add_live_brokers([registration])
        else:
            ctx.remove_live_brokers([broker_id])
        if was_live != (registration is not None):
            table = ctx.table
            affected = table.by_broker.get(broker_id, set()) | table.by_leader.get(broker_id, set())
            self._derive(sorted(affected))
            # Its partitions' recipients and offline replicas (``KeptRequests.broker_liveness_changed``).
            self._stale.update(table.by_broker.get(broker_id, ()))

    def _reload_topic(self, topic: str, view: ClusterView) -> None:
        ctx = self.ctx
        table = ctx.table
        if topic in ctx.all_topics or topic in table.by_topic:
            rows = list(table.by_topic.get(topic, {}).values())
            self._stale.difference_update(rows)
            self._kept.forget(rows)
            ctx.remove_topic(topic)  # assignment, leadership, topic id, reassigning; not the states
            self._forget_states(rows)
        assignment = view.topics.get(topic)
        if assignment is None:
            return
        ctx.add_topics((topic,))
        self._store_topic(topic, assignment, view.states.get(topic))
        members = table.by_topic.get(topic, {})
        states = view.states.get(topic)
        if states:
            ctx.put_leadership_by_id([(pid, states[tp]) for tp, pid in members.items() if tp in states])
        self._derive(list(members.values()))
        self._kept.refresh(members.values(), at_end=True)

    # -- the cold failover's steps, on part of the context ----------------------------------------------
    def _store_topic(
        self, topic: str, assignment: TopicAssignment, known: Collection[TopicPartition] | None = None
    ) -> None:
        """``Controller._store_assignments`` for one topic; ``known``: the view's partitions of it."""
        ctx = self.ctx
        if assignment.topic_id:
            ctx.add_topic_id(topic, assignment.topic_id)
        by_partition = {TopicPartition(topic, p): replicas for p, replicas in assignment.partitions.items()}
        if known:  # the view's own keys, so that the table and the view share one object a partition
            keys = {tp: tp for tp in known}
            by_partition = {keys.get(tp, tp): replicas for tp, replicas in by_partition.items()}
        ctx.load_topic_assignment(topic, by_partition)
        for tp, replicas in by_partition.items():
            if replicas.is_being_reassigned:
                ctx.partitions_being_reassigned.add(tp)

    def _derive(self, ids: Iterable[int]) -> None:
        """The initial partition and replica states of assigned partition numbers ``ids``."""
        derive_initial_states(self.ctx, list(ids))

    def _forget_states(self, ids: list[int]) -> None:
        """Empty the partition and replica states of rows no longer assigned (a cold load has none)."""
        if not ids:
            return
        ctx = self.ctx
        table = ctx.table
        # Through NonExistent first, so the offline gauge and the state index follow; then emptied.
        ctx.move_partition_ids_to_state(ids, _P.NON_EXISTENT)
        parked = table.by_state[_P.NON_EXISTENT]
        states, replica_states = table.state, table.replica_states
        for pid in ids:
            states[pid] = None
            parked.discard(pid)
            replica_states[pid] = None
        table.state_count -= len(ids)

    def _break(self, exc: Exception) -> None:
        self.broken = f"the view holds what a failover rejects: {exc}"
        logger.warning("standby: %s; the next failover reads everything", self.broken)


def derive_initial_states(ctx: ControllerContext, ids: list[int]) -> None:
    """The initial partition and replica states of assigned partition numbers ``ids`` (their assignments
    and leaderships loaded), as the two start-ups derive them: a warm standby's kept context, and a cold
    failover's read as each batch of state znodes lands (``controller_core.failover_read``). No offline
    log directories (a loaded context has none)."""
    _derive_partition_states(ctx, ids)
    _derive_replica_states(ctx, ids)


def _derive_partition_states(ctx: ControllerContext, ids: list[int]) -> None:
    """``PartitionStateMachine.startup``'s initialization: New without leadership, Online with a live
    leader, else Offline."""
    leadership = ctx.table.leadership
    live = ctx.live_broker_ids
    by_state: dict[PartitionState, list[int]] = {_P.NEW: [], _P.ONLINE: [], _P.OFFLINE: []}
    for pid in ids:
        info = leadership[pid]
        if info is None:
            by_state[_P.NEW].append(pid)
        elif info.leader_and_isr.leader in live:
            by_state[_P.ONLINE].append(pid)
        else:
            by_state[_P.OFFLINE].append(pid)
    for state, members in by_state.items():
        if members:
            ctx.move_partition_ids_to_state(members, state)


def _derive_replica_states(ctx: ControllerContext, ids: list[int]) -> None:
    """``ReplicaStateMachine.startup``'s step 1: OnlineReplica on a live broker, else
    ReplicaDeletionIneligible; one shared mapping per distinct replica list."""
    table = ctx.table
    assignments, column = table.assignment, table.replica_states
    intern = table.replica_state_maps.intern
    live = ctx.live_broker_ids
    initial: dict[tuple[int, ...], dict[int, ReplicaState] | None] = {}
    for pid in ids:
        assignment = assignments[pid]
        if assignment is None:
            continue
        replicas = assignment.replicas
        if replicas in initial:
            column[pid] = initial[replicas]
        else:
            column[pid] = initial[replicas] = intern(
                {r: (_R.ONLINE if r in live else _R.DELETION_INELIGIBLE) for r in replicas}
            )


def start_replica_state_machine(
    replica_sm: ReplicaStateMachine,
    batch: ControllerBrokerRequestBatch,
    ctx: ControllerContext,
    log: StateChangeLogger,
    kept: KeptRequests,
) -> None:
    """``ReplicaStateMachine.startup`` on an adopted kept context with its kept requests (``kept``, of
    that same context): step 1's initial states are already there (derived as ``startup`` derives
    them) and step 2's requests already built, so this sends them, records the summary and moves the
    replicas on dead brokers offline (step 3), in ``startup``'s order and with its failure handling.
    The requests are the bytes ``startup`` sends on the same context (``KeptRequests``)."""
    kept.ctx = ctx  # the adopted context: the same table and sets, now the controller's
    live = ctx.live_broker_ids
    by_broker = ctx.table.by_broker
    online_count = sum(len(by_broker.get(b, ())) for b in live)
    offline: list[PartitionAndReplica] = []
    if any(ids for b, ids in by_broker.items() if b not in live):
        # Replicas on dead brokers, in the start-up's order (partition by partition): what changed.
        assignments = ctx.table.assignment
        for tp, pid in ctx.iter_assigned_ids():
            assignment = assignments[pid]
            if assignment is not None:
                offline.extend(PartitionAndReplica(tp, r) for r in assignment.replicas if r not in live)
    try:
        batch.new_batch()
        batch.add_kept(*kept.take())
        kept.release()
        batch.send_requests_to_brokers(ctx.epoch)
    except ControllerMovedError:
        raise
    except Exception:
        logger.exception("error while bringing %d online replicas online at startup", online_count)
    log.record(
        RecordKind.STATES_INITIALIZED,
        machine="replica",
        counts={str(_R.ONLINE): online_count, str(_R.DELETION_INELIGIBLE): len(offline)},
    )
    replica_sm.handle_state_changes(offline, _R.OFFLINE)


def start_partition_state_machine(
    partition_sm: PartitionStateMachine, ctx: ControllerContext, log: StateChangeLogger
) -> ElectionResults:
    """``PartitionStateMachine.startup`` on an adopted kept context: its initial states are already
    there (derived as ``startup`` derives them), so only the summary record and the elections remain.

    Why deriving them before the replica state machine's start-up (as the standby does) gives what
    the cold order gives: a partition's initial state depends only on whether its leader is live, and
    that start-up's only leadership change is an ISR shrink of a replica on a dead broker, which sets
    the leader to -1 only where it was that dead broker (not live either way); a controller's earlier
    elections are all in the context (caught up to the election) and brokers never change leaders.
    """
    by_state = ctx.table.by_state
    new, offline = len(by_state[_P.NEW]), len(by_state[_P.OFFLINE])
    others = sum(len(ids) for state, ids in by_state.items() if state not in (_P.NEW, _P.OFFLINE))
    counts = {
        str(_P.NEW): new,
        str(_P.ONLINE): ctx.table.state_count - new - offline - others,
        str(_P.OFFLINE): offline,
    }
    log.record(RecordKind.STATES_INITIALIZED, machine="partition", counts=counts)
    return partition_sm.trigger_online_partition_state_change()


def adopt(target: ControllerContext, source: ControllerContext) -> None:
    """Move ``source``'s cluster state into ``target`` (the controller's own context object), keeping
    ``target``'s identity and fencing token (``IDENTITY_FIELDS``). ``source`` must not be used again."""
    for name, value in vars(source).items():
        if name not in IDENTITY_FIELDS:
            setattr(target, name, value)
