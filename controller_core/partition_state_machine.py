"""The partition state machine (Kafka's ``ZkPartitionStateMachine``, reference §4).

Tracks one state per partition and performs the side effects of reaching OnlinePartition: creating
the first leader/ISR of a new partition, or electing a leader with one of the four strategies of
``controller_core.election``, writing the result to ZooKeeper (fenced by the controller epoch and
conditional on the state znode's version) and telling the brokers.

Failure behaviour (§4.2, §15.7):

* Invalid transitions are recorded as failed changes and left unchanged (never raised, never in
  the result).
* Elections re-read the state znodes from ZooKeeper, never trusting the cache; a znode written by
  a newer controller aborts that partition with ``StateChangeFailedError``; a version conflict
  re-runs the election for that partition.
* ``ControllerMovedError`` propagates. Any other error maps every requested partition to it; the
  batch is then neither sent nor cleared, so the next ``new_batch`` fails until the controller's
  illegal-state handling clears it and resigns (§7.4), as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from controller_core.cached_states import current_partition_states
from controller_core.election import (
    ControlledShutdownStrategy,
    ElectionOutcome,
    ElectionStrategy,
    OfflineStrategy,
    PreferredStrategy,
    ReassignStrategy,
    elect_controlled_shutdown,
    elect_offline,
    elect_preferred,
    elect_reassign,
)
from controller_core.errors import ControllerMovedError, StateChangeFailedError, ZkOperationError
from controller_core.model import (
    EMPTY_ASSIGNMENT,
    INITIAL_LEADER_EPOCH,
    INITIAL_PARTITION_ZK_VERSION,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.ports import PartitionStateRead, ZkCode
from controller_core.record_kinds import RecordKind
from controller_core.request_batch import LeaderAndIsrGroups, LeaderAndIsrIdEntry
from controller_core.state_change_log import PartitionRow
from controller_core.state_machine_parts import StateMachineParts
from controller_core.states import PartitionState, invalid_transition_error

logger = logging.getLogger(__name__)

_P = PartitionState

UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"

ElectionResults = dict[TopicPartition, LeaderAndIsr | Exception]
"""Per partition: the new LeaderAndIsr (carrying its new zk version) or why it failed."""


def state_znode_path(tp: TopicPartition) -> str:
    return f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state"


def parse_config_bool(value: str) -> bool:
    """Parse a Kafka boolean config value ("true"/"false", any case, surrounding blanks ignored)."""
    text = value.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ValueError(f"invalid boolean config value {value!r}")


class PartitionStateMachine(StateMachineParts):
    """Move partitions between New, Online, Offline and NonExistent, electing leaders on the way.

    ``unclean_leader_election_enable`` is the broker default of the same config; the controller
    updates it when the dynamic broker config changes. Topic overrides are read from ZooKeeper at
    election time, only for partitions that have no live in-sync replica.

    Example::

        psm = PartitionStateMachine(ctx, store, ControllerBrokerRequestBatch(ctx, transport, log), log)
        psm.startup()
        results = psm.handle_state_changes([tp], PartitionState.ONLINE, PreferredStrategy())
    """

    unclean_leader_election_enable: bool = False
    """The broker default of ``unclean.leader.election.enable`` (the controller sets it from its config
    and when the dynamic broker config changes)."""
    unclean_leader_elections: int = 0
    """How many unclean leaders were chosen (Kafka's UncleanLeaderElectionsPerSec meter)."""

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self) -> ElectionResults:
        """Derive every partition's state from the leadership cache, then elect where needed.

        A partition with a cached leader that is online is Online, with any other cached state
        Offline, and without cached state New. These are initializations, not transitions, so
        they are summarized in one record instead of one per partition.
        """
        ctx = self._ctx
        leadership = ctx.table.leadership
        new, online, offline = _P.NEW, _P.ONLINE, _P.OFFLINE
        by_state: dict[PartitionState, list[int]] = {new: [], online: [], offline: []}
        add_new, add_online, add_offline = by_state[new].append, by_state[online].append, by_state[offline].append
        live = ctx.live_broker_ids
        per_partition = ctx.has_replicas_on_offline_dirs
        for tp, pid in ctx.iter_assigned_ids():
            info = leadership[pid]
            if info is None:
                add_new(pid)
            elif (
                ctx.is_replica_online(info.leader_and_isr.leader, tp)
                if per_partition
                else info.leader_and_isr.leader in live
            ):
                add_online(pid)
            else:
                add_offline(pid)
        for state, ids in by_state.items():
            ctx.move_partition_ids_to_state(ids, state)
        counts = {str(state): len(ids) for state, ids in by_state.items()}
        self._log.record(RecordKind.STATES_INITIALIZED, machine="partition", counts=counts)
        return self.trigger_online_partition_state_change()

    def shutdown(self) -> None:
        """Nothing to release: states die with the context."""
        logger.info("partition state machine stopped")

    def trigger_online_partition_state_change(self, topic: str | None = None) -> ElectionResults:
        """Try to bring every New or Offline partition (of ``topic``, or all) online.

        Topics queued for deletion are left alone. The offline strategy does not force unclean
        elections; a topic's own ``unclean.leader.election.enable`` still applies.
        """
        ctx = self._ctx
        ids = ctx.partition_ids_in_states((_P.OFFLINE, _P.NEW), topic)
        queued = ctx.topics_to_be_deleted
        if queued:
            tps = ctx.table.tps
            ids = [pid for pid in ids if tps[pid].topic not in queued]
        return self.handle_partition_ids(ids, _P.ONLINE, OfflineStrategy(allow_unclean=False))

    # -- transitions -------------------------------------------------------------------------------

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy | None = None,
    ) -> ElectionResults:
        """Move ``partitions`` to ``target``; return the outcome of each *election* (§4.2).

        Partitions initialized from New, and transitions to New/Offline/NonExistent, are not in
        the result. The requests are sent as one batch at the end. The partitions become numbers
        of the context's table once, here; the work below is on the table's columns.
        """
        return self.handle_partition_ids(self._ctx.partition_ids(partitions), target, strategy)

    def handle_partition_ids(
        self, ids: Iterable[int], target: PartitionState, strategy: ElectionStrategy | None = None
    ) -> ElectionResults:
        """``handle_state_changes`` for partition numbers of the context's table (the controller's bulk
        events: a broker failure's leaderless partitions come from the leader index as numbers)."""
        requested = list(dict.fromkeys(ids))
        if not requested:
            return {}
        try:
            self._batch.new_batch()
            results = self._do_handle_state_changes(requested, target, strategy)
            self._batch.send_requests_to_brokers(self._ctx.epoch)
            return results
        except ControllerMovedError:
            logger.error("controller moved while moving %d partitions to %s", len(requested), target)
            raise
        except Exception as e:
            logger.exception("error while moving %d partitions to %s", len(requested), target)
            return dict.fromkeys(self._ctx.partitions_of(requested), e)

    def _do_handle_state_changes(
        self,
        ids: Sequence[int],
        target: PartitionState,
        strategy: ElectionStrategy | None,
    ) -> ElectionResults:
        ctx = self._ctx
        table = ctx.table
        tps = table.tps
        valid, invalid = ctx.check_valid_partition_id_state_change(ids, target, default=_P.NON_EXISTENT)
        if invalid:
            self._log_invalid(ctx.partitions_of(invalid), target)
        if target is _P.OFFLINE:
            # One pass over the table for all of them (a broker failure: 10,000), then the records,
            # which keep the leader each partition loses (the broker whose loss caused it).
            leadership = table.leadership
            rows: list[PartitionRow] = []
            append = rows.append
            for pid, current in zip(valid, ctx.move_partition_ids_to_state(valid, target), strict=True):
                if current is not target:  # Offline -> Offline changes nothing worth a record
                    info = leadership[pid]
                    append((tps[pid], current, target, None, None if info is None else info.leader_and_isr, None, None))
            self._log.partition_records(RecordKind.PARTITION_TRANSITION, rows)
            return {}
        if target is not _P.ONLINE:
            for tp in ctx.partitions_of(valid):
                self._put(tp, target)
            return {}

        states = table.state
        new = _P.NEW
        uninitialized: list[TopicPartition] = []
        to_elect: list[int] = []
        for pid in valid:
            if states[pid] is new:
                uninitialized.append(tps[pid])
            else:
                to_elect.append(pid)
        if uninitialized:
            for tp, leader_and_isr in self._initialize_leader_and_isr(uninitialized):
                self._put(tp, _P.ONLINE, leader_and_isr)
        if not to_elect:
            return {}
        if strategy is None:
            raise ValueError("Election strategy is a required field when the target state is OnlinePartition")
        results, elected = self._elect_leader_for_partitions(to_elect, strategy)
        # The election record already carries this transition.
        ctx.move_partition_ids_to_state(elected, _P.ONLINE)
        return results

    def _put(
        self,
        tp: TopicPartition,
        state: PartitionState,
        leader_and_isr: LeaderAndIsr | None = None,
        before: LeaderAndIsr | None = None,
    ) -> None:
        current = self._ctx.partition_state(tp)
        self._ctx.put_partition_state(tp, state)
        if current is not state:  # Offline -> Offline changes nothing worth a record
            self._log.partition_transition(tp, current, state, leader_and_isr, before=before)

    # -- New -> Online (§4.3) ----------------------------------------------------------------------

    def _initialize_leader_and_isr(
        self, partitions: Sequence[TopicPartition]
    ) -> list[tuple[TopicPartition, LeaderAndIsr]]:
        """Create the first state znode of each partition: first live replica leads, all live are in sync."""
        ctx = self._ctx
        to_create: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tp in partitions:
            replicas = ctx.partition_replica_assignment(tp)
            online = ctx.online_replica_set(tp)
            live = tuple(r for r in replicas if r in online)
            if not live:
                self._log.failed_partition_change(
                    tp,
                    _P.NEW,
                    _P.ONLINE,
                    StateChangeFailedError(
                        f"No assigned replica of partition {tp} is alive (assigned replicas {list(replicas)})"
                    ),
                )
                continue
            leader_and_isr = LeaderAndIsr(live[0], INITIAL_LEADER_EPOCH, live, INITIAL_PARTITION_ZK_VERSION)
            to_create[tp] = LeaderIsrAndControllerEpoch(leader_and_isr, ctx.epoch)
        if not to_create:
            return []

        try:
            codes = self._store.create_partition_states(to_create, ctx.epoch_zk_version)
        except ControllerMovedError:
            raise
        except Exception as e:
            for tp in to_create:
                self._log.failed_partition_change(tp, _P.NEW, _P.ONLINE, e)
            return []

        initialized: list[tuple[TopicPartition, LeaderAndIsr]] = []
        for tp, info in to_create.items():
            code = codes.get(tp, ZkCode.OTHER)
            if code != ZkCode.OK:
                self._log.failed_partition_change(tp, _P.NEW, _P.ONLINE, ZkOperationError(code, state_znode_path(tp)))
                continue
            ctx.put_partition_leadership_info(tp, info)
            self._batch.add_leader_and_isr_request_for_brokers(
                info.leader_and_isr.isr, tp, info, ctx.partition_full_replica_assignment(tp), is_new=True
            )
            initialized.append((tp, info.leader_and_isr))
        return initialized

    # -- Offline/Online -> Online: elections (§4.4) --------------------------------------------------

    def _elect_leader_for_partitions(
        self, ids: Sequence[int], strategy: ElectionStrategy
    ) -> tuple[ElectionResults, list[int]]:
        """Elect until every partition has finished; version conflicts are retried without limit.

        Returns every partition's outcome and the numbers of those elected."""
        results: ElectionResults = {}
        elected: list[int] = []
        remaining: Sequence[int] = ids
        from_cache = self.decide_from_cache  # conflicts always re-read (controller_core.cached_states)
        while remaining:
            finished, remaining = self._do_elect_leader_for_partitions(remaining, strategy, elected, from_cache)
            from_cache = False
            for tp, outcome in finished.items():
                if isinstance(outcome, Exception):
                    self._log.failed_partition_change(
                        tp, self._ctx.partition_state(tp), _P.ONLINE, outcome, strategy.name
                    )
            results.update(finished)
            if remaining:
                logger.info(
                    "retrying %s leader election for %d partitions on fresh reads (conflicts or cache to confirm)",
                    strategy.name,
                    len(remaining),
                )
        return results, elected

    def _do_elect_leader_for_partitions(
        self, ids: Sequence[int], strategy: ElectionStrategy, elected: list[int], from_cache: bool = False
    ) -> tuple[ElectionResults, list[int]]:
        """One round: decide, write, cache and request; the numbers written go to ``elected``; returns
        the finished partitions' outcomes and the numbers to retry on fresh reads."""
        ctx = self._ctx
        table = ctx.table
        tps = table.tps
        cached = self._candidates_from_cache(ids) if from_cache else None
        if cached is None:
            partitions = ctx.partitions_of(ids)
            try:
                reads = current_partition_states(ctx, self._store, partitions, from_cache)
            except ControllerMovedError:
                raise
            except Exception as e:
                return dict.fromkeys(partitions, e), []
            candidates, failed = self._candidates_from_reads(ids, reads)
        else:
            candidates, failed = cached
        if not candidates:
            return failed, []

        outcomes = self._run_strategy(candidates, strategy)
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        # In to_write's order: each partition's number and its election's outcome (paired with the
        # store's outcomes by position).
        write_ids: list[int] = []
        decisions: list[ElectionOutcome] = []
        # A cached state that allows no election is confirmed on ZooKeeper before the partition
        # fails: no write means no conflict would have caught a stale cache.
        unconfirmed: list[int] = []
        for pid, outcome in outcomes.items():
            elected_state, _, unclean = outcome
            if elected_state is None and from_cache:
                unconfirmed.append(pid)
            elif elected_state is None:
                failed[tps[pid]] = StateChangeFailedError(
                    f"Failed to elect leader for partition {tps[pid]} under strategy {strategy}"
                )
            else:
                to_write[tps[pid]] = elected_state
                write_ids.append(pid)
                decisions.append(outcome)
                if unclean:
                    self.unclean_leader_elections += 1
        if not to_write:
            return failed, unconfirmed

        results: ElectionResults = {}
        retry: list[int] = []
        before = dict(candidates)
        requests: list[LeaderAndIsrIdEntry] = []
        written: list[tuple[int, LeaderIsrAndControllerEpoch]] = []
        epoch = ctx.epoch
        assignments, states = table.assignment, table.state
        records: list[PartitionRow] = []
        record = records.append
        name = strategy.name
        online = _P.ONLINE
        batch = self._batch
        staged = LeaderAndIsrGroups(ctx, is_new=False)
        step = self.stream_slice

        def take_written() -> None:
            """Record, cache and build the requests of what was written so far (a slice of results)."""
            taken_requests = requests[:]
            requests.clear()
            taken = self._take_written(RecordKind.ELECTION, records, written)
            staged.add(taken_requests)
            ids_written = [pid for pid, _ in taken]
            batch.prebuild_update_metadata(ids_written)
            elected.extend(ids_written)

        try:
            # Each slice of results is taken as it comes back, while ZooKeeper applies the later multis:
            # what is left once the last write is in is one slice and the send.
            for pid, (_, recipients, unclean), (tp, result) in zip(
                write_ids, decisions, self._write_states(to_write), strict=True
            ):
                if result is None:
                    retry.append(pid)
                    continue
                if isinstance(result, Exception):
                    results[tp] = result
                    continue
                info = LeaderIsrAndControllerEpoch(result, epoch)
                written.append((pid, info))
                requests.append((recipients, pid, info, assignments[pid] or EMPTY_ASSIGNMENT))
                record((tp, states[pid], online, name, before[pid], result, unclean))
                results[tp] = result
                if len(written) >= step:
                    take_written()
        finally:  # what was written is recorded, cached and requested even when a later multi fails
            take_written()
            batch.add_leader_and_isr_groups(staged)
        results.update(failed)
        return results, [*retry, *unconfirmed]

    def _candidates_from_cache(self, ids: Sequence[int]) -> tuple[list[_Candidate], ElectionResults] | None:
        """(candidates, failed) straight from the leadership column, in the order of ``ids``; None when
        one is not cached (``current_partition_states`` then reads those, keeping the order)."""
        ctx = self._ctx
        cached = ctx.table.leadership
        epoch = ctx.epoch
        candidates: list[_Candidate] = []
        append = candidates.append
        failed: ElectionResults = {}
        for pid in ids:
            info = cached[pid]
            if info is None:
                return None
            if info.controller_epoch > epoch:
                tp = ctx.table.tps[pid]
                failed[tp] = _written_by_newer_controller(tp, info.controller_epoch, epoch)
            else:
                append((pid, info.leader_and_isr))
        return candidates, failed

    def _candidates_from_reads(
        self, ids: Sequence[int], reads: Mapping[TopicPartition, PartitionStateRead]
    ) -> tuple[list[_Candidate], ElectionResults]:
        """(candidates, failed) from the states read, in the order of ``ids``."""
        ctx = self._ctx
        tps = ctx.table.tps
        candidates: list[_Candidate] = []
        failed: ElectionResults = {}
        ok, no_node, epoch = ZkCode.OK, ZkCode.NO_NODE, ctx.epoch  # enum lookups hoisted: per-partition loop
        for pid in ids:
            tp = tps[pid]
            read = reads.get(tp)
            state = None if read is None else read.state
            if state is not None and read is not None and read.code is ok:
                if state.controller_epoch > epoch:
                    failed[tp] = _written_by_newer_controller(tp, state.controller_epoch, epoch)
                else:
                    candidates.append((pid, state.leader_and_isr))
            elif read is None or read.code is no_node or read.code is ok:
                failed[tp] = StateChangeFailedError(
                    f"LeaderAndIsr information doesn't exist for partition {tp} in {ctx.partition_state(tp)} state"
                )
            else:
                failed[tp] = ZkOperationError(read.code, state_znode_path(tp))
        return candidates, failed

    def _run_strategy(self, candidates: Sequence[_Candidate], strategy: ElectionStrategy) -> dict[int, ElectionOutcome]:
        """Apply ``strategy`` to every candidate (the strategy is dispatched once, not per partition).

        Each distinct shape (replica list, ISR, online set, unclean flag) is decided once by the pure
        strategy function and the decision reused for the other partitions of that shape: a broker
        failure at 100,000 partitions elects 10,000 leaders from a few dozen shapes.

        Why reuse is exact: every strategy of ``controller_core.election`` decides from the replica
        list (a reassignment: its targets), the ISR, the online set and the unclean flag only, never
        from the current leader or epoch; the state it returns is the current one with the leader
        epoch bumped, the zk version kept, and the chosen leader and ISR (``LeaderAndIsr.new_leader*``).
        The shutting-down set of a controlled shutdown is the same for the whole batch.
        """
        ctx = self._ctx
        tps = ctx.table.tps
        assignments = ctx.table.assignment
        online = ctx.online_replica_set
        # Without failed log directories every partition sees the same online sets.
        per_partition = ctx.has_replicas_on_offline_dirs
        shared = ctx.live_broker_ids
        with_shutting_down = False
        by_target = False  # a reassignment decides from its target replicas
        rows: Iterable[tuple[int, LeaderAndIsr | None, bool]]
        decide: Callable[[LeaderAndIsr, ReplicaAssignment, AbstractSet[int], bool], ElectionOutcome]
        match strategy:
            case OfflineStrategy(allow_unclean=allow_unclean):
                rows = self._collect_unclean_leader_election_state(candidates, allow_unclean)

                def decide(
                    c: LeaderAndIsr, a: ReplicaAssignment, live: AbstractSet[int], unclean: bool
                ) -> ElectionOutcome:
                    return elect_offline(c, a.replicas, live, unclean)

            case ReassignStrategy():
                by_target = True

                def decide(c: LeaderAndIsr, a: ReplicaAssignment, live: AbstractSet[int], _: bool) -> ElectionOutcome:
                    return elect_reassign(c, a, live)

            case PreferredStrategy():

                def decide(c: LeaderAndIsr, a: ReplicaAssignment, live: AbstractSet[int], _: bool) -> ElectionOutcome:
                    return elect_preferred(c, a.replicas, live)

            case ControlledShutdownStrategy():
                shutting_down = ctx.shutting_down_broker_ids
                shared = ctx.live_or_shutting_down_broker_ids
                with_shutting_down = True

                def decide(c: LeaderAndIsr, a: ReplicaAssignment, live: AbstractSet[int], _: bool) -> ElectionOutcome:
                    return elect_controlled_shutdown(c, a.replicas, live, shutting_down)

            case _:
                raise ValueError(f"unknown election strategy {strategy!r}")
        if not isinstance(strategy, OfflineStrategy):
            rows = [(pid, current, False) for pid, current in candidates]
        # One online set for all unless log directories failed, and the replica list unless a
        # reassignment: the key's two branches are tests of locals, the derivation inlined (it runs
        # once per partition elected).
        decided: dict[_Shape, ElectionOutcome] = {}
        empty = EMPTY_ASSIGNMENT
        state_of, new = LeaderAndIsr, _new_outcome
        out: dict[int, ElectionOutcome] = {}
        for pid, current, unclean in rows:
            if current is None:
                out[pid] = _NO_OUTCOME
                continue
            assignment = assignments[pid] or empty
            live = online(tps[pid], with_shutting_down) if per_partition else shared
            key = (assignment.target_replicas if by_target else assignment.replicas, current.isr, live, unclean)
            shape = decided.get(key)
            if shape is None:
                out[pid] = decided[key] = decide(current, assignment, live, unclean)
                continue
            chosen = shape[0]
            if chosen is None:
                out[pid] = shape
            else:  # the shape's leader and ISR on this partition's epoch and version
                out[pid] = new(
                    ElectionOutcome,
                    (
                        state_of(chosen.leader, current.leader_epoch + 1, chosen.isr, current.zk_version),
                        shape[1],
                        shape[2],
                    ),
                )
        return out

    def _collect_unclean_leader_election_state(
        self, candidates: Sequence[_Candidate], allow_unclean: bool
    ) -> list[tuple[int, LeaderAndIsr | None, bool]]:
        """Decide per partition whether an unclean election is allowed (§4.4 step 3).

        Only partitions without any online in-sync replica need the answer; for them the topic
        config is read from ZooKeeper (one batch) unless the strategy already allows unclean
        elections. A partition whose topic config cannot be read is logged as failed and gets no
        state, so no leader is elected for it.
        """
        ctx = self._ctx
        tps = ctx.table.tps
        decided: list[tuple[int, LeaderAndIsr | None, bool]] = []
        without_live_isr: list[_Candidate] = []
        # Without failed log directories every partition sees the same online set.
        shared = None if ctx.has_replicas_on_offline_dirs else ctx.live_broker_ids
        for pid, current in candidates:
            online = shared if shared is not None else ctx.online_replica_set(tps[pid])
            if online.isdisjoint(current.isr):
                without_live_isr.append((pid, current))
            else:
                decided.append((pid, current, False))
        if not without_live_isr:
            return decided
        if allow_unclean:
            decided.extend((pid, current, True) for pid, current in without_live_isr)
            return decided

        topics = {tps[pid].topic for pid, _ in without_live_isr}
        read_error: Exception | None = None
        try:
            configs: Mapping[str, Mapping[str, str]] = self._store.get_topic_configs(topics)
        except ControllerMovedError:
            raise
        except Exception as e:
            configs, read_error = {}, e
        enabled: dict[str, bool | Exception] = {}
        for topic in topics:
            config = configs.get(topic)
            if config is None:
                enabled[topic] = read_error or StateChangeFailedError(f"could not read the config of topic {topic}")
                continue
            value = config.get(UNCLEAN_LEADER_ELECTION_ENABLE)
            try:
                enabled[topic] = self.unclean_leader_election_enable if value is None else parse_config_bool(value)
            except ValueError as e:
                enabled[topic] = e
        for pid, current in without_live_isr:
            tp = tps[pid]
            flag = enabled[tp.topic]
            if isinstance(flag, Exception):
                self._log.failed_partition_change(tp, ctx.partition_state(tp), _P.ONLINE, flag, OfflineStrategy.name)
                decided.append((pid, None, False))
            else:
                decided.append((pid, current, flag))
        return decided

    # -- logging -------------------------------------------------------------------------------------

    def _log_invalid(self, partitions: Sequence[TopicPartition], target: PartitionState) -> None:
        error = invalid_transition_error("partition", len(partitions), target)
        for tp in partitions:
            self._log.failed_partition_change(tp, self._ctx.partition_state(tp), target, error)


_NO_OUTCOME = ElectionOutcome(None, ())


def _written_by_newer_controller(tp: TopicPartition, written_epoch: int, epoch: int) -> StateChangeFailedError:
    return StateChangeFailedError(
        f"Aborted leader election for partition {tp} since the LeaderAndIsr path was already "
        f"written by another controller (epoch {written_epoch} > {epoch}). "
        "This controller probably went through a soft failure."
    )


_Candidate = tuple[int, LeaderAndIsr]
"""A partition number and the state its election decides from."""

_Shape = tuple[tuple[int, ...], tuple[int, ...], AbstractSet[int], bool]
"""What an election depends on: replica list (a reassignment: its targets), ISR, online set, unclean flag."""


# tuple.__new__: the NamedTuple's own constructor costs twice as much, once per partition elected.
_new_outcome = tuple.__new__
