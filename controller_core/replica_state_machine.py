"""The replica state machine (Kafka's ``ZkReplicaStateMachine``, reference §3).

Tracks one state per (partition, broker) replica and performs the side effects of moving between
them: LeaderAndIsr / StopReplica requests, and for OfflineReplica the removal of the replica from
the partition's ISR in ZooKeeper.

Failure behaviour (§3.2, §15.7):

* Invalid transitions are recorded as failed changes in the state-change log and left unchanged;
  they never raise.
* ``ControllerMovedError`` (a fenced write found a newer controller) propagates: the caller resigns.
* Any other error is logged and swallowed; the batch is then left as it was so the next
  ``new_batch`` reports the breach.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from dataclasses import dataclass, field

from controller_core.errors import ControllerMovedError, StateChangeFailedError
from controller_core.model import (
    EMPTY_ASSIGNMENT,
    NO_LEADER,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    TopicPartition,
)
from controller_core.ports import PartitionStateRead, ZkCode
from controller_core.record_kinds import RecordKind
from controller_core.request_batch import LeaderAndIsrGroups, LeaderAndIsrIdEntry
from controller_core.state_change_log import PartitionRow
from controller_core.state_machine_parts import StateMachineParts, TrailingWrites
from controller_core.states import ReplicaState, invalid_transition_error

logger = logging.getLogger(__name__)

_R = ReplicaState

_OnCached = Callable[[Sequence[tuple[int, LeaderIsrAndControllerEpoch]]], None]
"""Told of each slice of new cached states (partition number, leadership) of an ISR removal."""

_Split = tuple[dict[int, ReplicaState] | None, tuple[int, ...], tuple[int, ...]]
"""A replica list's initial states (Online, or DeletionIneligible on a dead broker; the table's shared
mapping, None for no replica), its online and its offline replicas."""


def _split(
    replicas: tuple[int, ...],
    online: AbstractSet[int],
    intern: Callable[[dict[int, ReplicaState]], dict[int, ReplicaState] | None],
) -> _Split:
    initial = intern({r: (_R.ONLINE if r in online else _R.DELETION_INELIGIBLE) for r in replicas})
    return (
        initial,
        tuple([r for r in replicas if r in online]),
        tuple([r for r in replicas if r not in online]),
    )


@dataclass(slots=True)
class _IsrRound:
    """One round of ISR removals as decided (``ReplicaStateMachine._decide_isr_removals``)."""

    finished: dict[int, LeaderIsrAndControllerEpoch | Exception] = field(default_factory=dict)
    """Partitions done without a write: the errors (the states read are added when cached)."""
    current: dict[int, LeaderAndIsr] = field(default_factory=dict)
    """Read from ZooKeeper with the replica already out of the ISR: cached as they are."""
    adjusted: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    """The states to write, in the order of ``adjusted_ids`` and ``before``."""
    adjusted_ids: list[int] = field(default_factory=list)
    before: list[LeaderAndIsr] = field(default_factory=list)
    unconfirmed: list[int] = field(default_factory=list)
    """Cached states without the replica in the ISR: confirmed on ZooKeeper in the next round."""
    writes: TrailingWrites | None = None
    """``adjusted`` carried behind another machine's writes (``offline_planned``), or None: written here."""


class ReplicaStateMachine(StateMachineParts):
    """Move replicas between the seven replica states, with Kafka's side effects.

    Example::

        rsm = ReplicaStateMachine(ctx, store, ControllerBrokerRequestBatch(ctx, transport, log), log)
        rsm.startup()                                    # at failover
        rsm.handle_state_changes(ctx.replicas_on_brokers({3}), ReplicaState.OFFLINE)
    """

    _planned: tuple[int, list[int], _IsrRound] | None = None
    """The first ISR-removal round ``offline_planned`` decided: its broker, its partitions, its decisions."""

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self) -> None:
        """Initialize replica states from the context, then bring online and offline replicas in line.

        1. Online replicas -> OnlineReplica; replicas on dead brokers -> ReplicaDeletionIneligible,
           which lets topic deletion treat them as failed and lets them later go Offline/Online.
        2. Online replicas -> OnlineReplica again (LeaderAndIsr to each, for partitions with a leader),
           done in the same pass, one request entry per partition.
        3. Offline replicas -> OfflineReplica (ISR shrink in ZooKeeper, LeaderAndIsr to the others).
        """
        ctx = self._ctx
        batch = self._batch
        online_count = 0
        offline: list[PartitionAndReplica] = []
        try:
            batch.new_batch()
            online_count = self._initialize_states(offline)
            batch.send_requests_to_brokers(ctx.epoch)
        except ControllerMovedError:
            raise
        except Exception:
            logger.exception("error while bringing %d online replicas online at startup", online_count)
        # Initializations, not transitions: one summary instead of a record per replica.
        self._log.record(
            RecordKind.STATES_INITIALIZED,
            machine="replica",
            counts={str(_R.ONLINE): online_count, str(_R.DELETION_INELIGIBLE): len(offline)},
        )
        self.handle_state_changes(offline, _R.OFFLINE)

    def _initialize_states(self, offline: list[PartitionAndReplica]) -> int:
        """Steps 1 and 2 of ``startup`` in one pass over every partition; appends the replicas on dead
        brokers to ``offline`` and returns how many replicas are online.

        A failover runs this for every partition (100,000+), so the split of a replica list into
        online and offline replicas is computed once per distinct list, which a cluster has few of,
        unless log directories have failed (then the online set depends on the partition).
        """
        ctx = self._ctx
        table = ctx.table
        leadership, assignments = table.leadership, table.assignment
        per_partition = ctx.has_replicas_on_offline_dirs
        live = ctx.live_broker_ids
        splits: dict[tuple[int, ...], _Split] = {}
        column = table.replica_states
        intern = table.replica_state_maps.intern
        requests: list[LeaderAndIsrIdEntry] = []
        add_request = requests.append
        online_count = 0
        for tp, pid in ctx.iter_assigned_ids():
            assignment = assignments[pid]
            if assignment is None:
                continue
            replicas = assignment.replicas
            known = None if per_partition else splits.get(replicas)
            if known is not None:
                initial, online_here, offline_here = known
            elif per_partition:
                initial, online_here, offline_here = _split(replicas, ctx.online_replica_set(tp), intern)
            else:
                initial, online_here, offline_here = splits[replicas] = _split(replicas, live, intern)
            if initial is None:
                continue
            column[pid] = initial  # the table's shared mapping: one per distinct replica list
            for replica_id in offline_here:
                offline.append(PartitionAndReplica(tp, replica_id))
            if online_here:
                online_count += len(online_here)
                # Step 2 in bulk: Online -> Online is always valid, changes no state and sends each
                # online replica a LeaderAndIsr. One entry per partition instead of one per replica.
                info = leadership[pid]
                if info is not None:
                    add_request((online_here, pid, info, assignment))
        self._batch.add_leader_and_isr_requests_by_id(requests, is_new=False)
        return online_count

    def shutdown(self) -> None:
        """Nothing to release: states die with the context."""
        logger.info("replica state machine stopped")

    # -- transitions -----------------------------------------------------------------------------

    def handle_state_changes(self, replicas: Iterable[PartitionAndReplica], target: ReplicaState) -> None:
        """Move ``replicas`` to ``target``, sending the resulting requests as one batch."""
        replicas = list(replicas)
        if not replicas:
            return
        # Per broker, the partitions become numbers of the context's table once.
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp, broker_id in replicas:
            group = by_broker.get(broker_id)
            if group is None:
                by_broker[broker_id] = [tp]
            else:
                group.append(tp)
        partition_ids = self._ctx.partition_ids
        self._handle_by_broker(
            [(broker_id, partition_ids(group)) for broker_id, group in by_broker.items()], target, len(replicas)
        )

    def handle_replica_ids(self, broker_id: int, ids: Sequence[int], target: ReplicaState) -> None:
        """``handle_state_changes`` for ``broker_id``'s replica of each partition given by number: a
        controlled shutdown's or a broker failure's 20,000 and more replicas, without making a
        ``PartitionAndReplica`` of each only to turn it back into a number."""
        if ids:
            self._handle_by_broker([(broker_id, ids)], target, len(ids))

    def _handle_by_broker(self, groups: Sequence[tuple[int, Sequence[int]]], target: ReplicaState, count: int) -> None:
        """Move each broker's replicas of the partitions numbered in its group, as one request batch."""
        try:
            self._batch.new_batch()
            for broker_id, ids in groups:
                self._do_handle_state_changes(broker_id, ids, target)
            self._batch.send_requests_to_brokers(self._ctx.epoch)
        except ControllerMovedError:
            logger.error("controller moved while moving %d replicas to %s", count, target)
            raise
        except Exception:
            logger.exception("error while moving some of %d replicas to %s", count, target)

    def _do_handle_state_changes(self, broker_id: int, ids: Sequence[int], target: ReplicaState) -> None:
        ctx = self._ctx
        valid_ids, invalid = ctx.check_valid_replica_id_state_change(broker_id, ids, target, default=_R.NON_EXISTENT)
        if invalid:
            self._log_invalid(self._replicas(broker_id, invalid), target)
        if not valid_ids:
            return
        if target is _R.OFFLINE:  # the bulk one: a broker failure or a controlled shutdown (20,000 and more)
            self._to_offline(broker_id, valid_ids)
            return
        valid = self._replicas(broker_id, valid_ids)
        match target:
            case _R.NEW:
                self._to_new(broker_id, valid)
            case _R.ONLINE:
                self._to_online(broker_id, valid)
            case _R.DELETION_STARTED:
                for replica in valid:
                    self._put(replica, _R.DELETION_STARTED)
                    self._batch.add_stop_replica_request_for_brokers(
                        (broker_id,), replica.topic_partition, delete_partition=True
                    )
            case _R.DELETION_INELIGIBLE | _R.DELETION_SUCCESSFUL:
                for replica in valid:
                    self._put(replica, target)
            case _R.NON_EXISTENT:
                for replica in valid:
                    tp = replica.topic_partition
                    current = ctx.replica_state(replica)
                    assignment = ctx.partition_full_replica_assignment(tp)
                    ctx.update_partition_full_replica_assignment(tp, assignment.remove_replica(broker_id))
                    ctx.remove_replica_state(replica)
                    self._log.replica_transition(replica, current, _R.NON_EXISTENT)

    def _put(self, replica: PartitionAndReplica, state: ReplicaState) -> None:
        current = self._ctx.replica_state(replica)
        self._ctx.put_replica_state(replica, state)
        if current is not state:
            # Self-transitions (Online -> Online at every failover, for every replica) change no
            # state; their effects (an ISR shrink) have records of their own.
            self._log.replica_transition(replica, current, state)

    def _put_all(self, broker_id: int, ids: Sequence[int], state: ReplicaState) -> None:
        """``_put`` for ``broker_id``'s replica of each partition (numbers), the states moved in one pass."""
        ctx = self._ctx
        tps = ctx.table.tps
        before = ctx.move_replica_ids_of_broker(broker_id, ids, state)
        rows: list[PartitionRow] = [
            (tps[pid], current, state, None, None, None, None)
            for pid, current in zip(ids, before, strict=True)
            if current is not state
        ]
        self._log.partition_records(RecordKind.REPLICA_TRANSITION, rows, broker_id)

    def _to_new(self, broker_id: int, replicas: Sequence[PartitionAndReplica]) -> None:
        ctx = self._ctx
        for replica in replicas:
            tp = replica.topic_partition
            info = ctx.partition_leadership_info(tp)
            if info is not None and info.leader_and_isr.leader == broker_id:
                # The leader must never be told it is a brand-new follower.
                self._log.failed_replica_change(
                    replica,
                    ctx.replica_state(replica),
                    _R.NEW,
                    StateChangeFailedError(
                        f"Replica {broker_id} for partition {tp} cannot be moved to NewReplica state "
                        "as it is being requested to become leader"
                    ),
                )
                continue
            if info is not None:
                self._batch.add_leader_and_isr_request_for_brokers(
                    (broker_id,), tp, info, ctx.partition_full_replica_assignment(tp), is_new=True
                )
            self._put(replica, _R.NEW)

    def _to_online(self, broker_id: int, replicas: Sequence[PartitionAndReplica]) -> None:
        ctx = self._ctx
        for replica in replicas:
            tp = replica.topic_partition
            if ctx.replica_state(replica) is _R.NEW:
                assignment = ctx.partition_full_replica_assignment(tp)
                if broker_id not in assignment.replicas:
                    logger.error(
                        "adding replica %s that is not part of the assignment %s of %s", broker_id, assignment, tp
                    )
                    ctx.update_partition_full_replica_assignment(
                        tp, assignment.with_replicas((*assignment.replicas, broker_id))
                    )
            else:
                info = ctx.partition_leadership_info(tp)
                if info is not None:
                    self._batch.add_leader_and_isr_request_for_brokers(
                        (broker_id,), tp, info, ctx.partition_full_replica_assignment(tp), is_new=False
                    )
            self._put(replica, _R.ONLINE)

    def _replicas(self, broker_id: int, ids: Iterable[int]) -> list[PartitionAndReplica]:
        tps = self._ctx.table.tps
        return [PartitionAndReplica(tps[pid], broker_id) for pid in ids]

    def _to_offline(self, broker_id: int, ids: Sequence[int]) -> None:
        ctx = self._ctx
        batch = self._batch
        table = ctx.table
        leadership, assignments, tps = table.leadership, table.assignment, table.tps
        with_leadership: list[int] = []
        without_leadership: list[PartitionAndReplica] = []
        for pid in ids:
            if leadership[pid] is not None:
                with_leadership.append(pid)
            else:
                without_leadership.append(PartitionAndReplica(tps[pid], broker_id))
        batch.add_stop_replica_requests_by_id(broker_id, ids, False)

        deleting = ctx.topics_to_be_deleted
        staged = LeaderAndIsrGroups(ctx, is_new=False)
        others: dict[tuple[int, ...], tuple[int, ...]] = {}  # per replica list: the replicas but broker_id

        def request(taken: Sequence[tuple[int, LeaderIsrAndControllerEpoch]]) -> None:
            """The LeaderAndIsr (and UpdateMetadata) states of ISRs shrunk so far, built as their multis
            come back while ZooKeeper applies the later ones."""
            requests: list[LeaderAndIsrIdEntry] = []
            for pid, info in taken:
                if not deleting or tps[pid].topic not in deleting:
                    # Every other assigned replica learns the new ISR (not only the leader, §15.16).
                    assignment = assignments[pid] or EMPTY_ASSIGNMENT
                    assigned = assignment.replicas
                    recipients = others.get(assigned)
                    if recipients is None:
                        recipients = others[assigned] = tuple([r for r in assigned if r != broker_id])
                    requests.append((recipients, pid, info, assignment))
            staged.add(requests)
            batch.prebuild_update_metadata([pid for _, pid, _, _ in requests])

        updated = self._remove_replicas_from_isr(broker_id, with_leadership, request)
        batch.add_leader_and_isr_groups(staged)
        self._put_all(broker_id, list(updated), _R.OFFLINE)

        if without_leadership:
            registered = ctx.live_or_shutting_down_broker_ids
            for replica in without_leadership:
                batch.add_update_metadata_request_for_brokers(registered, (replica.topic_partition,))
                self._put(replica, _R.OFFLINE)

    # -- ISR removal (§3.3) -------------------------------------------------------------------------

    def _remove_replicas_from_isr(
        self, broker_id: int, ids: Sequence[int], on_cached: _OnCached | None = None
    ) -> dict[int, LeaderIsrAndControllerEpoch]:
        """Take ``broker_id`` out of the ISR of each partition (numbers of the context's table) in
        ZooKeeper, retrying version conflicts.

        Returns the partitions that succeeded with their new cached state; failures are logged
        as failed changes and keep their replica state. ``on_cached`` gets them too, in the same
        order, a slice at a time as each is cached (the written ones as their multis come back).
        """
        results: dict[int, LeaderIsrAndControllerEpoch] = {}
        remaining = list(ids)
        tps = self._ctx.table.tps
        from_cache = self.decide_from_cache  # conflicts always re-read (controller_core.cached_states)
        while remaining:
            finished, remaining = self._do_remove_replicas_from_isr(broker_id, remaining, from_cache, on_cached)
            from_cache = False
            for pid, outcome in finished.items():
                if isinstance(outcome, Exception):
                    replica = PartitionAndReplica(tps[pid], broker_id)
                    self._log.failed_replica_change(replica, self._ctx.replica_state(replica), _R.OFFLINE, outcome)
                else:
                    results[pid] = outcome
            if remaining:
                logger.info(
                    "re-reading %d partitions to take replica %s out of their ISR (conflicts or cache to confirm)",
                    len(remaining),
                    broker_id,
                )
        return results

    @contextmanager
    def offline_planned(self, broker_id: int, ids: Sequence[int]) -> Iterator[TrailingWrites | None]:
        """Decide now, on the cache, the first round of taking ``broker_id`` out of the ISRs of the
        partitions numbered ``ids`` (``handle_replica_ids(broker_id, ids, OFFLINE)``, which a controlled
        shutdown runs after its leader moves) and return its writes, for the leader moves to carry
        behind theirs (``StateMachineParts.carrying``): ZooKeeper then applies both rounds in one
        pipeline. Nothing is recorded, cached or logged here; ``handle_replica_ids`` does all of it as
        it would, taking the carried writes' outcomes instead of writing them, within the block (the
        plan is dropped at its end). None when there is nothing to write.

        The plan holds while nothing else changes these partitions (the leader moves act on others):
        ``handle_replica_ids`` uses it only for the same broker and the same partitions with leadership
        (every replica valid for Offline); otherwise it decides again, and a carried write that landed
        meanwhile is a version conflict its re-read settles."""
        leadership = self._ctx.table.leadership
        with_leadership = [pid for pid in ids if leadership[pid] is not None]
        planned = None
        if with_leadership:
            planned = self._decide_isr_removals(broker_id, with_leadership, self.decide_from_cache)
        if planned is None or not planned.adjusted:
            yield None
            return
        planned.writes = TrailingWrites(planned.adjusted)
        self._planned = (broker_id, with_leadership, planned)
        try:
            yield planned.writes
        finally:
            self._planned = None

    def _do_remove_replicas_from_isr(
        self, broker_id: int, ids: Sequence[int], from_cache: bool = False, on_cached: _OnCached | None = None
    ) -> tuple[dict[int, LeaderIsrAndControllerEpoch | Exception], list[int]]:
        """One round: decide on the leadership column (``from_cache``; partitions not cached are read)
        or on ZooKeeper's states, write, cache and record; returns the finished partitions' outcomes
        and the numbers to retry on fresh reads. The round ``offline_planned`` decided is taken as it is."""
        planned, self._planned = self._planned, None
        if planned is not None and from_cache == self.decide_from_cache and planned[:2] == (broker_id, ids):
            decided = planned[2]
        else:
            decided = self._decide_isr_removals(broker_id, ids, from_cache)
        return self._write_isr_removals(broker_id, decided, on_cached)

    def _decide_isr_removals(self, broker_id: int, ids: Sequence[int], from_cache: bool) -> _IsrRound:
        """A round's decisions, with nothing changed: per partition, an error, the state read when
        there is nothing to write, or the ISR without ``broker_id`` to write."""
        ctx = self._ctx
        table = ctx.table
        tps, leadership = table.tps, table.leadership
        decided = _IsrRound()
        finished = decided.finished
        missing = [pid for pid in ids if leadership[pid] is None] if from_cache else list(ids)
        reads: dict[int, PartitionStateRead] = {}
        if missing:
            try:
                ids_of = table.ids
                fetched = self._store.get_partition_states([tps[pid] for pid in missing])
                reads = {ids_of[tp]: r for tp, r in fetched.items()}
            except ControllerMovedError:
                raise
            except Exception as e:
                finished.update(dict.fromkeys(ids, e))
                return decided

        current = decided.current
        adjusted = decided.adjusted
        adjusted_ids = decided.adjusted_ids  # the numbers of adjusted's partitions, in its order
        before = decided.before  # and the states they leave
        unconfirmed = decided.unconfirmed
        ok, no_node, epoch = ZkCode.OK, ZkCode.NO_NODE, ctx.epoch  # enum lookups hoisted: per-partition loop
        # The ISR without broker_id, per ISR: a shutdown's 20,000 partitions have a few dozen ISRs.
        shrunk: dict[tuple[int, ...], tuple[int, ...]] = {}
        state_of = LeaderAndIsr
        for pid in ids:
            # The cached state when deciding on the cache (most partitions), else what was read.
            state = leadership[pid] if from_cache else None
            if state is None:
                read = reads.get(pid)
                state = None if read is None else read.state
                if read is None or read.code is no_node or (read.code is ok and state is None):
                    # Nothing in ZooKeeper: expected for a topic being deleted, an error otherwise.
                    if not ctx.is_topic_queued_up_for_deletion(tps[pid].topic):
                        finished[pid] = StateChangeFailedError(
                            f"Failed to change state of replica {broker_id} for partition {tps[pid]} since the "
                            "leader and isr path in zookeeper is empty"
                        )
                    continue
                if read.code is not ok or state is None:
                    finished[pid] = StateChangeFailedError(f"reading the state of {tps[pid]} failed with {read.code}")
                    continue
            if state.controller_epoch > epoch:
                finished[pid] = StateChangeFailedError(
                    f"Leader and isr path of {tps[pid]} written by another controller (epoch "
                    f"{state.controller_epoch} > {epoch}); this controller may have gone through "
                    "a soft failure. Aborting state change."
                )
                continue
            leader_and_isr = state.leader_and_isr
            if broker_id not in leader_and_isr.isr:
                if from_cache:
                    # Nothing to write, so no conflict would catch a stale cache: confirm on ZooKeeper.
                    unconfirmed.append(pid)
                else:
                    current[pid] = leader_and_isr
                continue
            leader = leader_and_isr.leader
            isr = leader_and_isr.isr
            new_isr = shrunk.get(isr)
            if new_isr is None:
                # Never write an empty ISR: the last member stays, even when it is offline (§15.2).
                new_isr = shrunk[isr] = isr if len(isr) == 1 else tuple([r for r in isr if r != broker_id])
            # LeaderAndIsr.new_leader_and_isr without the method call: a new leader epoch, the same version.
            adjusted[tps[pid]] = state_of(
                NO_LEADER if leader == broker_id else leader,
                leader_and_isr.leader_epoch + 1,
                new_isr,
                leader_and_isr.zk_version,
            )
            adjusted_ids.append(pid)
            before.append(leader_and_isr)
        return decided

    def _write_isr_removals(
        self, broker_id: int, decided: _IsrRound, on_cached: _OnCached | None
    ) -> tuple[dict[int, LeaderIsrAndControllerEpoch | Exception], list[int]]:
        """A decided round's effects: the states read are cached, the others written (or their carried
        writes' outcomes taken), cached and recorded; returns the outcomes and the numbers to retry."""
        ctx = self._ctx
        epoch = ctx.epoch
        finished = decided.finished
        current, adjusted = decided.current, decided.adjusted
        adjusted_ids, before = decided.adjusted_ids, decided.before
        kept: list[tuple[int, LeaderIsrAndControllerEpoch]] = []
        for pid, leader_and_isr in current.items():  # nothing to write: the cache takes what was read
            info = LeaderIsrAndControllerEpoch(leader_and_isr, epoch)
            kept.append((pid, info))
            finished[pid] = info
        ctx.put_leadership_by_id(kept)
        if on_cached is not None and kept:
            on_cached(kept)
        retry: list[int] = decided.unconfirmed
        if adjusted:
            # Each slice of results is recorded, cached and handed to ``on_cached`` as its multis come
            # back, while ZooKeeper applies the next ones, even if a later multi fails.
            written: list[tuple[int, LeaderIsrAndControllerEpoch]] = []
            records: list[PartitionRow] = []
            record = records.append
            step = self.stream_slice

            def take_written() -> None:
                """Record and cache the slice written so far, then hand it to ``on_cached``."""
                taken = self._take_written(RecordKind.ISR_CHANGE, records, written, broker_id)
                if on_cached is not None and taken:
                    on_cached(taken)

            try:
                carried = None if decided.writes is None else decided.writes.outcomes()
                outcomes = self._write_states(adjusted) if carried is None else carried
                for pid, left, (tp, outcome) in zip(adjusted_ids, before, outcomes, strict=True):
                    if outcome is None:
                        retry.append(pid)
                    elif isinstance(outcome, Exception):
                        finished[pid] = outcome
                    else:
                        record((tp, None, None, None, left, outcome, None))
                        info = LeaderIsrAndControllerEpoch(outcome, epoch)
                        written.append((pid, info))
                        finished[pid] = info
                        if len(written) >= step:
                            take_written()
            finally:  # what was written is recorded and cached even when a later multi fails
                take_written()
        return finished, retry

    # -- logging -----------------------------------------------------------------------------------

    def _log_invalid(self, replicas: Sequence[PartitionAndReplica], target: ReplicaState) -> None:
        error = invalid_transition_error("replica", len(replicas), target)
        for replica in replicas:
            self._log.failed_replica_change(replica, self._ctx.replica_state(replica), target, error)
