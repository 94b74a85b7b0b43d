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
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet

from controller_core.cached_states import current_partition_states
from controller_core.context import ControllerContext
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
    INITIAL_LEADER_EPOCH,
    INITIAL_PARTITION_ZK_VERSION,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    TopicPartition,
)
from controller_core.ports import PartitionStateRead, PartitionStateStore, ZkCode
from controller_core.record_kinds import RecordKind
from controller_core.request_batch import ControllerBrokerRequestBatch, LeaderAndIsrEntry
from controller_core.state_change_log import PartitionRow, StateChangeLogger
from controller_core.states import PartitionState

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


class PartitionStateMachine:
    """Move partitions between New, Online, Offline and NonExistent, electing leaders on the way.

    ``unclean_leader_election_enable`` is the broker default of the same config; the controller
    updates it when the dynamic broker config changes. Topic overrides are read from ZooKeeper at
    election time, only for partitions that have no live in-sync replica.

    Example::

        psm = PartitionStateMachine(ctx, store, ControllerBrokerRequestBatch(ctx, transport, log), log)
        psm.startup()
        results = psm.handle_state_changes([tp], PartitionState.ONLINE, PreferredStrategy())
    """

    def __init__(
        self,
        context: ControllerContext,
        store: PartitionStateStore,
        batch: ControllerBrokerRequestBatch,
        state_change_logger: StateChangeLogger,
        *,
        unclean_leader_election_enable: bool = False,
        decide_from_cache: bool = True,
    ) -> None:
        self._ctx = context
        self._store = store
        self._batch = batch
        self._log = state_change_logger
        self.unclean_leader_election_enable = unclean_leader_election_enable
        self.decide_from_cache = decide_from_cache
        """First election round on cached states (controller_core.cached_states); False: Kafka's read-first."""
        self.unclean_leader_elections = 0
        """How many unclean leaders were chosen (Kafka's UncleanLeaderElectionsPerSec meter)."""

    # -- lifecycle -----------------------------------------------------------------------------

    def startup(self) -> ElectionResults:
        """Derive every partition's state from the leadership cache, then elect where needed.

        A partition with a cached leader that is online is Online, with any other cached state
        Offline, and without cached state New. These are initializations, not transitions, so
        they are summarized in one record instead of one per partition.
        """
        ctx = self._ctx
        counts = dict.fromkeys((_P.NEW, _P.ONLINE, _P.OFFLINE), 0)
        leadership = ctx.partitions_leadership_info
        new, online, offline = _P.NEW, _P.ONLINE, _P.OFFLINE
        states: dict[TopicPartition, PartitionState] = {}
        for tp in ctx.all_partitions():
            info = leadership.get(tp)
            if info is None:
                state = new
            elif ctx.is_replica_online(info.leader_and_isr.leader, tp):
                state = online
            else:
                state = offline
            states[tp] = state
            counts[state] += 1
        ctx.put_partition_states(states)
        self._log.record(
            RecordKind.STATES_INITIALIZED, machine="partition", counts={str(s): n for s, n in counts.items()}
        )
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
        partitions: Iterable[TopicPartition] = ctx.partitions_in_states((_P.OFFLINE, _P.NEW), topic)
        queued = ctx.topics_to_be_deleted
        if queued:
            partitions = [tp for tp in partitions if tp.topic not in queued]
        return self.handle_state_changes(partitions, _P.ONLINE, OfflineStrategy(allow_unclean=False))

    # -- transitions -------------------------------------------------------------------------------

    def handle_state_changes(
        self,
        partitions: Iterable[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy | None = None,
    ) -> ElectionResults:
        """Move ``partitions`` to ``target``; return the outcome of each *election* (§4.2).

        Partitions initialized from New, and transitions to New/Offline/NonExistent, are not in
        the result. The requests are sent as one batch at the end.
        """
        requested = list(dict.fromkeys(partitions))
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
            return dict.fromkeys(requested, e)

    def _do_handle_state_changes(
        self,
        partitions: Sequence[TopicPartition],
        target: PartitionState,
        strategy: ElectionStrategy | None,
    ) -> ElectionResults:
        ctx = self._ctx
        valid, invalid = ctx.check_valid_partition_state_change(partitions, target, default=_P.NON_EXISTENT)
        if invalid:
            self._log_invalid(invalid, target)
        if target is _P.OFFLINE:
            # One pass over the context for all of them (a broker failure: 10,000), then the records,
            # which keep the leader each partition loses (the broker whose loss caused it).
            leadership = ctx.partitions_leadership_info
            rows: list[PartitionRow] = []
            append = rows.append
            for tp, current in zip(valid, ctx.move_partitions_to_state(valid, target), strict=True):
                if current is not target:  # Offline -> Offline changes nothing worth a record
                    info = leadership.get(tp)
                    append((tp, current, target, None, None if info is None else info.leader_and_isr, None, None))
            self._log.partition_records(RecordKind.PARTITION_TRANSITION, rows)
            return {}
        if target is not _P.ONLINE:
            for tp in valid:
                self._put(tp, target)
            return {}

        states = ctx.partition_states
        new = _P.NEW
        uninitialized: list[TopicPartition] = []
        to_elect: list[TopicPartition] = []
        for tp in valid:
            (uninitialized if states[tp] is new else to_elect).append(tp)
        if uninitialized:
            for tp, leader_and_isr in self._initialize_leader_and_isr(uninitialized):
                self._put(tp, _P.ONLINE, leader_and_isr)
        if not to_elect:
            return {}
        if strategy is None:
            raise ValueError("Election strategy is a required field when the target state is OnlinePartition")
        results = self._elect_leader_for_partitions(to_elect, strategy)
        # The election record already carries this transition.
        ctx.move_partitions_to_state([tp for tp, o in results.items() if not isinstance(o, Exception)], _P.ONLINE)
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
        self, partitions: Sequence[TopicPartition], strategy: ElectionStrategy
    ) -> ElectionResults:
        """Elect until every partition has finished; version conflicts are retried without limit."""
        results: ElectionResults = {}
        remaining: Sequence[TopicPartition] = partitions
        from_cache = self.decide_from_cache  # conflicts always re-read (controller_core.cached_states)
        while remaining:
            finished, remaining = self._do_elect_leader_for_partitions(remaining, strategy, from_cache)
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
        return results

    def _do_elect_leader_for_partitions(
        self, partitions: Sequence[TopicPartition], strategy: ElectionStrategy, from_cache: bool = False
    ) -> tuple[ElectionResults, list[TopicPartition]]:
        ctx = self._ctx
        cached = self._candidates_from_cache(partitions) if from_cache else None
        if cached is None:
            try:
                reads = current_partition_states(ctx, self._store, partitions, from_cache)
            except ControllerMovedError:
                raise
            except Exception as e:
                return dict.fromkeys(partitions, e), []
            candidates, failed = self._candidates_from_reads(partitions, reads)
        else:
            candidates, failed = cached
        if not candidates:
            return failed, []

        outcomes = self._run_strategy(candidates, strategy)
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        # A cached state that allows no election is confirmed on ZooKeeper before the partition
        # fails: no write means no conflict would have caught a stale cache.
        unconfirmed: list[TopicPartition] = []
        for tp, outcome in outcomes.items():
            if outcome.leader_and_isr is None and from_cache:
                unconfirmed.append(tp)
            elif outcome.leader_and_isr is None:
                failed[tp] = StateChangeFailedError(
                    f"Failed to elect leader for partition {tp} under strategy {strategy}"
                )
            else:
                to_write[tp] = outcome.leader_and_isr
                if outcome.unclean:
                    self.unclean_leader_elections += 1
        if not to_write:
            return failed, unconfirmed

        results: ElectionResults = {}
        retry: list[TopicPartition] = []
        before = dict(candidates)
        requests: list[LeaderAndIsrEntry] = []
        written: list[tuple[TopicPartition, LeaderIsrAndControllerEpoch]] = []
        epoch = ctx.epoch
        assignment_of = ctx.partition_full_replica_assignment
        state_of = ctx.partition_states.get
        records: list[PartitionRow] = []
        record = records.append
        name = strategy.name
        online = _P.ONLINE
        # Results are used as each multi comes back, while ZooKeeper applies the next ones.
        try:
            for tp, result in self._store.update_leader_and_isr_iter(to_write, epoch, ctx.epoch_zk_version):
                if result is None:
                    retry.append(tp)
                    continue
                if isinstance(result, Exception):
                    results[tp] = result
                    continue
                info = LeaderIsrAndControllerEpoch(result, epoch)
                written.append((tp, info))
                outcome = outcomes[tp]
                requests.append((outcome.recipients, tp, info, assignment_of(tp)))
                record((tp, state_of(tp), online, name, before[tp], result, outcome.unclean))
                results[tp] = result
        finally:  # what was written is recorded, cached and requested even when a later multi fails
            self._log.partition_records(RecordKind.ELECTION, records)
            ctx.put_partition_leadership_infos(written)
            self._batch.add_leader_and_isr_requests(requests, is_new=False)
        results.update(failed)
        return results, [*retry, *unconfirmed]

    def _candidates_from_cache(
        self, partitions: Sequence[TopicPartition]
    ) -> tuple[list[tuple[TopicPartition, LeaderAndIsr]], ElectionResults] | None:
        """(candidates, failed) straight from the leadership cache, in the order of ``partitions``; None
        when one is not cached (``current_partition_states`` then reads those, keeping the order)."""
        ctx = self._ctx
        cached = ctx.partitions_leadership_info
        epoch = ctx.epoch
        candidates: list[tuple[TopicPartition, LeaderAndIsr]] = []
        append = candidates.append
        failed: ElectionResults = {}
        for tp in partitions:
            info = cached.get(tp)
            if info is None:
                return None
            if info.controller_epoch > epoch:
                failed[tp] = _written_by_newer_controller(tp, info.controller_epoch, epoch)
            else:
                append((tp, info.leader_and_isr))
        return candidates, failed

    def _candidates_from_reads(
        self, partitions: Sequence[TopicPartition], reads: Mapping[TopicPartition, PartitionStateRead]
    ) -> tuple[list[tuple[TopicPartition, LeaderAndIsr]], ElectionResults]:
        """(candidates, failed) from the states read, in the order of ``partitions``."""
        ctx = self._ctx
        candidates: list[tuple[TopicPartition, LeaderAndIsr]] = []
        failed: ElectionResults = {}
        ok, no_node, epoch = ZkCode.OK, ZkCode.NO_NODE, ctx.epoch  # enum lookups hoisted: per-partition loop
        for tp in partitions:
            read = reads.get(tp)
            state = None if read is None else read.state
            if state is not None and read is not None and read.code is ok:
                if state.controller_epoch > epoch:
                    failed[tp] = _written_by_newer_controller(tp, state.controller_epoch, epoch)
                else:
                    candidates.append((tp, state.leader_and_isr))
            elif read is None or read.code is no_node or read.code is ok:
                failed[tp] = StateChangeFailedError(
                    f"LeaderAndIsr information doesn't exist for partition {tp} in {ctx.partition_state(tp)} state"
                )
            else:
                failed[tp] = ZkOperationError(read.code, state_znode_path(tp))
        return candidates, failed

    def _run_strategy(
        self, candidates: Sequence[tuple[TopicPartition, LeaderAndIsr]], strategy: ElectionStrategy
    ) -> dict[TopicPartition, ElectionOutcome]:
        """Apply ``strategy`` to every candidate (the strategy is dispatched once, not per partition).

        Each distinct shape (replica list, ISR, online set, unclean flag) is decided once by the pure
        strategy function and the decision reused for the other partitions of that shape
        (``_derive``): a broker failure at 100,000 partitions elects 10,000 leaders from a few
        dozen shapes.
        """
        ctx = self._ctx
        online = ctx.online_replica_set
        # Without failed log directories every partition sees the same online sets.
        per_partition = ctx.has_replicas_on_offline_dirs
        shared = ctx.live_broker_ids
        assignment = ctx.partition_full_replica_assignment
        decided: dict[_Shape, ElectionOutcome] = {}
        derive = _derive
        out: dict[TopicPartition, ElectionOutcome] = {}
        match strategy:
            case OfflineStrategy(allow_unclean=allow_unclean):
                for tp, current, unclean in self._collect_unclean_leader_election_state(candidates, allow_unclean):
                    if current is None:
                        out[tp] = _NO_OUTCOME
                        continue
                    replicas = assignment(tp).replicas
                    live = online(tp) if per_partition else shared
                    key = (replicas, current.isr, live, unclean)
                    shape = decided.get(key)
                    if shape is None:
                        out[tp] = decided[key] = elect_offline(current, replicas, live, unclean)
                    else:
                        out[tp] = derive(shape, current)
            case ReassignStrategy():
                for tp, current in candidates:
                    full = assignment(tp)
                    live = online(tp) if per_partition else shared
                    key = (full.target_replicas, current.isr, live, False)
                    shape = decided.get(key)
                    if shape is None:
                        out[tp] = decided[key] = elect_reassign(current, full, live)
                    else:
                        out[tp] = derive(shape, current)
            case PreferredStrategy():
                for tp, current in candidates:
                    replicas = assignment(tp).replicas
                    live = online(tp) if per_partition else shared
                    key = (replicas, current.isr, live, False)
                    shape = decided.get(key)
                    if shape is None:
                        out[tp] = decided[key] = elect_preferred(current, replicas, live)
                    else:
                        out[tp] = derive(shape, current)
            case ControlledShutdownStrategy():
                shutting_down = ctx.shutting_down_broker_ids
                shared = ctx.live_or_shutting_down_broker_ids
                for tp, current in candidates:
                    replicas = assignment(tp).replicas
                    live = online(tp, True) if per_partition else shared
                    key = (replicas, current.isr, live, False)
                    shape = decided.get(key)
                    if shape is None:
                        out[tp] = decided[key] = elect_controlled_shutdown(current, replicas, live, shutting_down)
                    else:
                        out[tp] = derive(shape, current)
        return out

    def _collect_unclean_leader_election_state(
        self, candidates: Sequence[tuple[TopicPartition, LeaderAndIsr]], allow_unclean: bool
    ) -> list[tuple[TopicPartition, LeaderAndIsr | None, bool]]:
        """Decide per partition whether an unclean election is allowed (§4.4 step 3).

        Only partitions without any online in-sync replica need the answer; for them the topic
        config is read from ZooKeeper (one batch) unless the strategy already allows unclean
        elections. A partition whose topic config cannot be read is logged as failed and gets no
        state, so no leader is elected for it.
        """
        ctx = self._ctx
        decided: list[tuple[TopicPartition, LeaderAndIsr | None, bool]] = []
        without_live_isr: list[tuple[TopicPartition, LeaderAndIsr]] = []
        # Without failed log directories every partition sees the same online set.
        shared = None if ctx.has_replicas_on_offline_dirs else ctx.live_broker_ids
        for tp, current in candidates:
            online = shared if shared is not None else ctx.online_replica_set(tp)
            if online.isdisjoint(current.isr):
                without_live_isr.append((tp, current))
            else:
                decided.append((tp, current, False))
        if not without_live_isr:
            return decided
        if allow_unclean:
            decided.extend((tp, current, True) for tp, current in without_live_isr)
            return decided

        topics = {tp.topic for tp, _ in without_live_isr}
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
        for tp, current in without_live_isr:
            flag = enabled[tp.topic]
            if isinstance(flag, Exception):
                self._log.failed_partition_change(tp, ctx.partition_state(tp), _P.ONLINE, flag, OfflineStrategy.name)
                decided.append((tp, None, False))
            else:
                decided.append((tp, current, flag))
        return decided

    # -- logging -------------------------------------------------------------------------------------

    def _log_invalid(self, partitions: Sequence[TopicPartition], target: PartitionState) -> None:
        ctx = self._ctx
        allowed = ", ".join(sorted(target.valid_previous_states))
        error = f"IllegalStateError: partition must be in one of [{allowed}] before moving to {target}"
        for tp in partitions:
            self._log.failed_partition_change(tp, ctx.partition_state(tp), target, error)
        logger.warning(
            "%d partitions cannot move to %s: they must be in one of [%s] first", len(partitions), target, allowed
        )


_NO_OUTCOME = ElectionOutcome(None, ())


def _written_by_newer_controller(tp: TopicPartition, written_epoch: int, epoch: int) -> StateChangeFailedError:
    return StateChangeFailedError(
        f"Aborted leader election for partition {tp} since the LeaderAndIsr path was already "
        f"written by another controller (epoch {written_epoch} > {epoch}). "
        "This controller probably went through a soft failure."
    )


_Shape = tuple[tuple[int, ...], tuple[int, ...], AbstractSet[int], bool]
"""What an election depends on: replica list (a reassignment: its targets), ISR, online set, unclean flag."""


def _derive(shape: ElectionOutcome, current: LeaderAndIsr) -> ElectionOutcome:
    """``shape`` (decided for another partition of the same shape) applied to ``current``.

    Why this is exact: every strategy of ``controller_core.election`` decides from the replica list
    (the reassignment: its targets), the ISR, the online set and the unclean flag only, never from
    the current leader or epoch; the state it returns is the current one with the leader epoch
    bumped, the zk version kept, and the chosen leader and ISR (``LeaderAndIsr.new_leader*``). The
    shutting-down set of a controlled shutdown is the same for the whole batch.
    """
    decided = shape.leader_and_isr
    if decided is None:
        return shape
    return ElectionOutcome(
        LeaderAndIsr(decided.leader, current.leader_epoch + 1, decided.isr, current.zk_version),
        shape.recipients,
        shape.unclean,
    )
