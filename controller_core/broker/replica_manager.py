"""The broker's replicas and its answers to the controller (Kafka's ``ReplicaManager``).

It validates every control request exactly as Kafka's brokers do (reference §6.5):

* **Broker epoch** (all three requests): a request carrying a broker epoch other than -1 that is
  *smaller* than this broker's current epoch (the czxid of its registration) was meant for an
  earlier incarnation: STALE_BROKER_EPOCH, nothing changes. A larger one is accepted (the
  controller may learn of a re-registration before the broker does).
* **Controller epoch**: the highest controller epoch seen is remembered; a request from an older
  one is rejected whole with STALE_CONTROLLER_EPOCH; otherwise the remembered epoch moves up.
* **LeaderAndIsr per partition**: a topic id different from the one known -> INCONSISTENT_TOPIC_ID;
  a leader epoch newer than the local one is accepted if this broker is among the replicas (else
  UNKNOWN_TOPIC_OR_PARTITION); an older or equal one is ignored with STALE_CONTROLLER_EPOCH.
  Accepted partitions become leader when the leader is this broker and follower otherwise; a
  follower whose leader is not among the request's live leaders keeps its state (Kafka logs an
  error and waits for the next request).
* **StopReplica per partition**: leader epoch -2 (deletion), -1 (unknown) or newer than the local
  one -> stop, and delete the log if asked; older or equal -> FENCED_LEADER_EPOCH; a partition not
  hosted -> NONE.

It also serves follower fetches as leader, applies fetched data as follower, takes synthetic
appends, shrinks ISRs periodically and hands ISR proposals to the AlterIsr sender.

Threading: one re-entrant lock (``lock``) guards every partition, log and the metadata cache; HTTP
handler threads, fetcher threads, the producer, the ISR check and AlterIsr answers all take it.
Fetchers and the AlterIsr sender are called with the lock held and must only queue work.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from controller_core.broker.config import BrokerConfig
from controller_core.broker.log import ReplicaLog
from controller_core.broker.metadata_cache import MetadataCache
from controller_core.broker.partition import (
    IsrProposal,
    NotEnoughReplicasError,
    NotLeaderError,
    Partition,
    Role,
)
from controller_core.broker.throttle import ThrottleState
from controller_core.gc_policy import gc_paused
from controller_core.model import EPOCH_DURING_DELETE, NO_BROKER_EPOCH, NO_EPOCH, TopicPartition
from controller_core.protocol.messages import (
    AlterIsrPartitionResult,
    ErrorCode,
    FetchedPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    PartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    empty_response_for,
)
from controller_core.zk.history import process_recorder

logger = logging.getLogger(__name__)

#: Kafka's all-zero topic id, meaning "no id".
ZERO_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAA"
_LARGE_REQUEST = 1000


class FetcherControl(Protocol):
    """Starts and stops follower fetching (the fetcher manager); called with the lock held."""

    def add_partitions(self, leader: LiveLeader, partitions: Iterable[TopicPartition]) -> None: ...

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> None: ...


class IsrProposer(Protocol):
    """Queues ISR proposals for the controller (the AlterIsr sender); called with the lock held.

    ``submit`` returns False when a proposal for the same partition is already waiting to be sent.
    """

    def submit(self, proposal: IsrProposal) -> bool: ...


class AppendResult(StrEnum):
    """The outcome of one synthetic produce request (Kafka's produce errors, by name)."""

    APPENDED = "appended"
    NOT_LEADER = "not_leader_or_follower"
    NOT_ENOUGH_REPLICAS = "not_enough_replicas"


@dataclass(frozen=True, slots=True)
class FollowerFetchOutcome:
    """What a follower's fetcher learns from applying one response."""

    records: int
    failed: frozenset[TopicPartition]


class ReplicaManager:
    """Hosts this broker's partitions. See the module docstring for the rules.

    Example::

        rm = ReplicaManager(config, fetchers=fetcher_manager, isr_proposer=alter_isr)
        rm.set_broker_epoch(czxid)
        response = rm.handle_leader_and_isr(request)
    """

    def __init__(
        self,
        config: BrokerConfig,
        *,
        fetchers: FetcherControl | None = None,
        isr_proposer: IsrProposer | None = None,
        logs: Mapping[TopicPartition, ReplicaLog] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config
        self.broker_id = config.broker_id
        self.lock = threading.RLock()
        self.fetchers = fetchers
        self.isr_proposer = isr_proposer
        self._clock = clock
        #: Logs on this broker, hosted or not (restored from a checkpoint, awaiting a LeaderAndIsr).
        self.logs: dict[TopicPartition, ReplicaLog] = dict(logs or {})
        self.partitions: dict[TopicPartition, Partition] = {}
        self.metadata = MetadataCache()
        #: Replication throttles (KIP-73), kept current by the config-change listener.
        self.throttles = ThrottleState(config.broker_id, clock)
        #: Follower side: the leader's HW minus our log end after the last fetch (Kafka's fetch lag).
        self._fetch_lag: dict[TopicPartition, int] = {}
        self.topic_ids: dict[str, str] = {}
        self.broker_epoch = NO_BROKER_EPOCH
        self.controller_epoch = 0
        self.controller_id: int | None = None
        self.requests_handled: dict[str, int] = {"LeaderAndIsr": 0, "StopReplica": 0, "UpdateMetadata": 0}
        self.requests_rejected: dict[str, int] = {}
        self.messages_appended = 0
        self.not_enough_replicas = 0
        self.not_enough_replicas_by_partition: dict[TopicPartition, int] = {}
        # Reliability history of every control request and its decision (off unless
        # RELIABILITY_HISTORY_DIR is set; see controller_core.zk.history).
        self.request_log = process_recorder()

    def now_ms(self) -> float:
        return self._clock() * 1000.0

    @property
    def registered(self) -> bool:
        return self.broker_epoch != NO_BROKER_EPOCH

    def set_broker_epoch(self, epoch: int) -> None:
        """This broker (re-)registered: its registration's czxid is its new epoch."""
        with self.lock:
            if epoch != self.broker_epoch:
                logger.info("broker %d: broker epoch %d -> %d", self.broker_id, self.broker_epoch, epoch)
            self.broker_epoch = epoch

    # ==============================================================================================
    # common request validation
    # ==============================================================================================
    def _stale_broker_epoch(self, request_epoch: int) -> bool:
        return request_epoch != NO_BROKER_EPOCH and request_epoch < self.broker_epoch

    def _rejected(self, kind: str, error: ErrorCode, detail: str) -> None:
        key = f"{kind}:{error.name}"
        self.requests_rejected[key] = self.requests_rejected.get(key, 0) + 1
        logger.warning("broker %d: rejected %s with %s (%s)", self.broker_id, kind, error.name, detail)

    def _check_epochs(self, request: LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest) -> ErrorCode:
        """Broker-epoch then controller-epoch check; on success remember the controller."""
        seen = self.controller_epoch
        error = self._check_request_epochs(request)
        if self.request_log is not None:
            self.request_log.record(
                op="request",
                kind=request.kind,
                decision="accepted" if error == ErrorCode.NONE else "rejected",
                error=error.name,
                controller_id=request.controller_id,
                controller_epoch=request.controller_epoch,
                broker_epoch=request.broker_epoch,
                my_broker_epoch=self.broker_epoch,
                seen_controller_epoch=seen,
            )
        return error

    def _log_partition_decisions(self, request: LeaderAndIsrRequest, errors: list[PartitionError]) -> None:
        """History line: each partition state of a LeaderAndIsr and whether it was applied (NONE)."""
        assert self.request_log is not None
        self.request_log.record(
            op="leader_and_isr",
            controller_id=request.controller_id,
            controller_epoch=request.controller_epoch,
            partitions=[
                [s.topic, s.partition, s.leader, s.leader_epoch, e.error_code.name]
                for s, e in zip(request.partition_states, errors, strict=True)
            ],
        )

    def _check_request_epochs(
        self, request: LeaderAndIsrRequest | StopReplicaRequest | UpdateMetadataRequest
    ) -> ErrorCode:
        if self._stale_broker_epoch(request.broker_epoch):
            self._rejected(request.kind, ErrorCode.STALE_BROKER_EPOCH, f"{request.broker_epoch} < {self.broker_epoch}")
            return ErrorCode.STALE_BROKER_EPOCH
        if request.controller_epoch < self.controller_epoch:
            self._rejected(
                request.kind,
                ErrorCode.STALE_CONTROLLER_EPOCH,
                f"controller {request.controller_id} epoch {request.controller_epoch} < {self.controller_epoch}",
            )
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = request.controller_epoch
        self.controller_id = request.controller_id
        return ErrorCode.NONE

    # ==============================================================================================
    # LeaderAndIsr
    # ==============================================================================================
    def handle_leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        """Become leader or follower of the partitions in ``request`` (validated per §6.5)."""
        large = len(request.partition_states) > _LARGE_REQUEST
        with self.lock, gc_paused() if large else contextlib.nullcontext():
            error = self._check_epochs(request)
            if error != ErrorCode.NONE:
                response = empty_response_for(request, error)
                assert isinstance(response, LeaderAndIsrResponse)
                return response
            self.requests_handled[request.kind] += 1
            now = self.now_ms()
            live_leaders = {leader.id: leader for leader in request.live_leaders}
            errors: list[PartitionError] = []
            to_lead: list[tuple[LeaderAndIsrPartitionState, Partition]] = []
            to_follow: list[tuple[LeaderAndIsrPartitionState, Partition]] = []
            stale = 0
            partitions = self.partitions
            topic_ids = request.topic_ids
            me = self.broker_id
            none, stale_epoch = ErrorCode.NONE, ErrorCode.STALE_CONTROLLER_EPOCH
            for state in request.partition_states:
                tp = TopicPartition(state.topic, state.partition)
                partition = partitions.get(tp)
                code = self._check_topic_id(tp, topic_ids) if topic_ids else none
                if code is none:
                    if state.leader_epoch <= (NO_EPOCH if partition is None else partition.leader_epoch):
                        code = stale_epoch  # older or equal leader epoch: ignored
                        stale += 1
                    elif me not in state.replicas:
                        code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                        logger.warning(
                            "broker %d: ignoring %s: not among its replicas %s", me, tp, list(state.replicas)
                        )
                errors.append(PartitionError(state.topic, state.partition, code))
                if code is not none:
                    continue
                if partition is None:
                    partition = self._create_partition(tp)
                if state.leader == me:
                    to_lead.append((state, partition))
                else:
                    to_follow.append((state, partition))
            if stale:
                logger.info(
                    "broker %d: ignored %d partition states of controller epoch %d: leader epoch not newer than ours",
                    self.broker_id,
                    stale,
                    request.controller_epoch,
                )
            if to_lead:
                self._make_leaders(to_lead, now)
            if to_follow:
                self._make_followers(to_follow, live_leaders)
            if self.request_log is not None:
                self._log_partition_decisions(request, errors)
            return LeaderAndIsrResponse(ErrorCode.NONE, errors)

    def _check_topic_id(self, tp: TopicPartition, topic_ids: Mapping[str, str]) -> ErrorCode:
        """INCONSISTENT_TOPIC_ID when the request names another id than the one known for the topic."""
        requested_id = topic_ids.get(tp.topic)
        if requested_id and requested_id != ZERO_TOPIC_ID:
            known = self.topic_ids.get(tp.topic)
            if known is None:
                self.topic_ids[tp.topic] = requested_id
            elif known != requested_id:
                logger.error(
                    "broker %d: %s has topic id %s, the controller says %s", self.broker_id, tp, known, requested_id
                )
                return ErrorCode.INCONSISTENT_TOPIC_ID
        return ErrorCode.NONE

    def _create_partition(self, tp: TopicPartition) -> Partition:
        log = self.logs.get(tp)
        if log is None:
            log = self.logs[tp] = ReplicaLog()
        partition = self.partitions[tp] = Partition(tp, self.broker_id, log)
        return partition

    def _make_leaders(self, to_lead: list[tuple[LeaderAndIsrPartitionState, Partition]], now: float) -> None:
        if self.fetchers is not None:
            self.fetchers.remove_partitions([p.topic_partition for _, p in to_lead])
        moved = 0
        for state, partition in to_lead:
            if partition.make_leader(state, now):
                moved += 1
        logger.info("broker %d: leading %d partitions (%d newly)", self.broker_id, len(to_lead), moved)

    def _make_followers(
        self, to_follow: list[tuple[LeaderAndIsrPartitionState, Partition]], live_leaders: Mapping[int, LiveLeader]
    ) -> None:
        restart: dict[int, list[TopicPartition]] = {}
        unavailable = 0
        for state, partition in to_follow:
            if state.leader not in live_leaders:
                # Kafka: cannot become follower of an unavailable leader; the partition keeps its
                # state (and epoch) until a request names a live leader.
                unavailable += 1
                continue
            if partition.make_follower(state):
                self._fetch_lag.pop(partition.topic_partition, None)
                restart.setdefault(state.leader, []).append(partition.topic_partition)
        if unavailable:
            logger.error(
                "broker %d: %d partitions name a leader that is not live; not following them yet",
                self.broker_id,
                unavailable,
            )
        if self.fetchers is not None and restart:
            self.fetchers.remove_partitions([tp for tps in restart.values() for tp in tps])
            for leader_id, tps in restart.items():
                self.fetchers.add_partitions(live_leaders[leader_id], tps)
        logger.info(
            "broker %d: following %d partitions (%d restarted fetching)",
            self.broker_id,
            len(to_follow) - unavailable,
            sum(len(t) for t in restart.values()),
        )

    # ==============================================================================================
    # StopReplica
    # ==============================================================================================
    def handle_stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        """Stop (and maybe delete) replicas, fenced by leader epoch (§6.5)."""
        large = len(request.partitions) > _LARGE_REQUEST
        with self.lock, gc_paused() if large else contextlib.nullcontext():
            error = self._check_epochs(request)
            if error != ErrorCode.NONE:
                response = empty_response_for(request, error)
                assert isinstance(response, StopReplicaResponse)
                return response
            self.requests_handled[request.kind] += 1
            errors: list[PartitionError] = []
            to_stop: list[tuple[TopicPartition, bool]] = []
            for p in request.partitions:
                tp = TopicPartition(p.topic, p.partition)
                partition = self.partitions.get(tp)
                if partition is None:
                    if p.delete_partition:
                        self.logs.pop(tp, None)
                    errors.append(PartitionError(p.topic, p.partition, ErrorCode.NONE))
                    continue
                if p.leader_epoch in (EPOCH_DURING_DELETE, NO_EPOCH) or p.leader_epoch > partition.leader_epoch:
                    to_stop.append((tp, p.delete_partition))
                    errors.append(PartitionError(p.topic, p.partition, ErrorCode.NONE))
                else:
                    errors.append(PartitionError(p.topic, p.partition, ErrorCode.FENCED_LEADER_EPOCH))
            if to_stop:
                if self.fetchers is not None:
                    self.fetchers.remove_partitions([tp for tp, _ in to_stop])
                for tp, delete in to_stop:
                    if delete:
                        del self.partitions[tp]
                        self.logs.pop(tp, None)
                        self.not_enough_replicas_by_partition.pop(tp, None)
                        self._fetch_lag.pop(tp, None)
                    else:
                        self.partitions[tp].stop()
                self._forget_unhosted_topic_ids({tp.topic for tp, delete in to_stop if delete})
                logger.info(
                    "broker %d: stopped %d replicas (%d deleted)",
                    self.broker_id,
                    len(to_stop),
                    sum(1 for _, d in to_stop if d),
                )
            return StopReplicaResponse(ErrorCode.NONE, errors)

    def _forget_unhosted_topic_ids(self, topics: set[str]) -> None:
        if not topics:
            return
        hosted = {tp.topic for tp in self.partitions if tp.topic in topics}
        for topic in topics - hosted:
            self.topic_ids.pop(topic, None)

    # ==============================================================================================
    # UpdateMetadata
    # ==============================================================================================
    def handle_update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        """Refresh the metadata cache (validated per §6.5)."""
        large = len(request.partition_states) > _LARGE_REQUEST
        with self.lock, gc_paused() if large else contextlib.nullcontext():
            error = self._check_epochs(request)
            if error != ErrorCode.NONE:
                return UpdateMetadataResponse(error)
            self.requests_handled[request.kind] += 1
            self.metadata.update(request)
            return UpdateMetadataResponse(ErrorCode.NONE)

    # ==============================================================================================
    # follower fetch, leader side
    # ==============================================================================================
    def handle_fetch(self, request: FetchRequest) -> FetchResponse:
        """Serve a follower: records from each fetch offset, advance HW, maybe expand the ISR."""
        if request.replica_id < 0:
            raise ValueError("fetch: only followers fetch here (replica_id must be a broker id)")
        size = self.config.message_size_bytes
        default_per_partition = self.config.records_per_partition_fetch
        budget = max(1, min(request.max_bytes, self.config.replica_fetch_response_max_bytes) // size)
        out: list[FetchedPartition] = []
        with self.lock:
            now = self.now_ms()
            for fp in request.partitions:
                tp = TopicPartition(fp.topic, fp.partition)
                partition = self.partitions.get(tp)
                if partition is None:
                    out.append(FetchedPartition(fp.topic, fp.partition, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
                    continue
                error = partition.check_fetch_epoch(request.replica_id, fp.leader_epoch)
                if error != ErrorCode.NONE:
                    out.append(FetchedPartition(fp.topic, fp.partition, error))
                    continue
                log = partition.log
                count = 0
                if partition.update_follower_fetch_state(request.replica_id, fp.fetch_offset, fp.log_start_offset, now):
                    per_partition = default_per_partition if fp.max_bytes <= 0 else max(1, fp.max_bytes // size)
                    count = max(0, min(log.log_end_offset - fp.fetch_offset, per_partition, budget))
                    if (
                        count
                        and request.replica_id not in partition.isr_state.isr
                        and self.throttles.leader_throttled(tp)
                    ):
                        # KIP-73, leader side: a throttled replica outside the ISR gets what the quota allows.
                        count = self.throttles.leader.acquire(count * size, size) // size
                    budget -= count
                    self._propose(partition.maybe_expand_isr(request.replica_id))
                    partition.maybe_increment_high_watermark()
                out.append(
                    FetchedPartition(
                        fp.topic,
                        fp.partition,
                        ErrorCode.NONE,
                        high_watermark=log.high_watermark,
                        log_start_offset=log.log_start_offset,
                        log_end_offset=log.log_end_offset,
                        record_count=count,
                        records_bytes=count * size,
                        epochs=log.epoch_runs(fp.fetch_offset, fp.fetch_offset + count),
                    )
                )
        return FetchResponse(ErrorCode.NONE, tuple(out))

    # ==============================================================================================
    # follower fetch, follower side (called by fetcher threads)
    # ==============================================================================================
    def follower_positions(
        self, leader_id: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int, int]]:
        """``tp -> (fetch_offset, leader_epoch, log_start_offset)`` for those still following ``leader_id``."""
        out: dict[TopicPartition, tuple[int, int, int]] = {}
        with self.lock:
            for tp in partitions:
                partition = self.partitions.get(tp)
                if partition is not None and partition.role == Role.FOLLOWER and partition.leader_id == leader_id:
                    offset, epoch = partition.fetch_position()
                    out[tp] = (offset, epoch, partition.log.log_start_offset)
        return out

    def throttled_followers(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]:
        """Those of ``partitions`` this broker follows with a follower throttle on them and is not
        caught up on (KIP-73, follower side). A follower counts itself in sync as Kafka's fetcher does
        (``PartitionFetchState.isReplicaInSync``): its last fetch left it at the leader's high
        watermark; before its first fetch it is not."""
        out: set[TopicPartition] = set()
        throttles = self.throttles
        with self.lock:
            for tp in partitions:
                partition = self.partitions.get(tp)
                if partition is None or partition.role != Role.FOLLOWER or not throttles.follower_throttled(tp):
                    continue
                if self._fetch_lag.get(tp, 1) > 0:
                    out.add(tp)
        return out

    def apply_fetch_response(
        self,
        leader_id: int,
        sent: Mapping[TopicPartition, tuple[int, int, int]],
        response: FetchResponse,
    ) -> FollowerFetchOutcome:
        """Append what the leader sent, follow its HW and log start; report failed partitions.

        A partition whose role, leader, epoch or LEO changed while the fetch was in flight is skipped:
        the data was read for a log position it no longer has.
        """
        records = 0
        failed: set[TopicPartition] = set()
        with self.lock:
            for data in response.partitions:
                tp = TopicPartition(data.topic, data.partition)
                position = sent.get(tp)
                partition = self.partitions.get(tp)
                if position is None or partition is None:
                    continue
                offset, epoch, _ = position
                if (
                    partition.role != Role.FOLLOWER
                    or partition.leader_id != leader_id
                    or partition.leader_epoch != epoch
                    or partition.log.log_end_offset != offset
                ):
                    continue
                if data.error_code != ErrorCode.NONE:
                    failed.add(tp)
                    continue
                log = partition.log
                if 0 <= data.log_end_offset < offset:
                    # Our log is longer than the leader's (unclean election): drop the difference.
                    log.truncate_to(data.log_end_offset)
                    logger.warning(
                        "broker %d: %s truncated to the leader's end offset %d", self.broker_id, tp, data.log_end_offset
                    )
                    continue
                if data.log_start_offset > offset:
                    log.truncate_fully_and_start_at(data.log_start_offset)
                    continue
                if data.record_count:
                    log.append_replicated(data.record_count, data.epochs)
                    records += data.record_count
                log.maybe_increment_log_start_offset(data.log_start_offset)
                log.high_watermark = data.high_watermark
                self._fetch_lag[tp] = max(0, data.high_watermark - log.log_end_offset)
        return FollowerFetchOutcome(records, frozenset(failed))

    # ==============================================================================================
    # leader: synthetic appends and ISR maintenance
    # ==============================================================================================
    def leader_partitions(self) -> list[TopicPartition]:
        with self.lock:
            return [tp for tp, p in self.partitions.items() if p.role == Role.LEADER]

    def append(self, tp: TopicPartition, count: int, acks: int, min_insync_replicas: int) -> AppendResult:
        """Append ``count`` synthetic messages as leader of ``tp`` (a produce request of the load)."""
        with self.lock:
            partition = self.partitions.get(tp)
            if partition is None:
                return AppendResult.NOT_LEADER
            try:
                partition.append_as_leader(count, acks, min_insync_replicas)
            except NotLeaderError:
                return AppendResult.NOT_LEADER
            except NotEnoughReplicasError:
                self.not_enough_replicas += 1
                self.not_enough_replicas_by_partition[tp] = self.not_enough_replicas_by_partition.get(tp, 0) + 1
                return AppendResult.NOT_ENOUGH_REPLICAS
            self.messages_appended += count
            return AppendResult.APPENDED

    def maybe_shrink_isrs(self) -> int:
        """Propose dropping lagging followers from every led partition's ISR; the number proposed."""
        proposed = 0
        lag = float(self.config.replica_lag_time_max_ms)
        with self.lock:
            now = self.now_ms()
            for partition in self.partitions.values():
                if partition.role == Role.LEADER and self._propose(partition.maybe_shrink_isr(now, lag)):
                    proposed += 1
        return proposed

    def _propose(self, proposal: IsrProposal | None) -> bool:
        if proposal is None or self.isr_proposer is None:
            return False
        partition = self.partitions[proposal.topic_partition]
        if not self.isr_proposer.submit(proposal):
            return False
        partition.mark_proposed(proposal)
        logger.info(
            "broker %d: proposing ISR %s for %s (leader epoch %d, version %d; was %s)",
            self.broker_id,
            list(proposal.new_isr),
            proposal.topic_partition,
            proposal.leader_epoch,
            proposal.zk_version,
            list(proposal.state.isr),
        )
        return True

    def is_proposal_current(self, proposal: IsrProposal) -> bool:
        """Whether ``proposal`` is still its partition's pending ISR change."""
        with self.lock:
            partition = self.partitions.get(proposal.topic_partition)
            return partition is not None and partition.isr_state is proposal.state

    def handle_alter_isr_result(self, proposal: IsrProposal, result: AlterIsrPartitionResult) -> None:
        """Apply the controller's answer to one proposal (AlterIsr sender thread)."""
        with self.lock:
            partition = self.partitions.get(proposal.topic_partition)
            if partition is None:
                return
            if result.error_code == ErrorCode.NONE:
                if partition.handle_alter_isr_success(proposal, result):
                    logger.info(
                        "broker %d: ISR of %s is now %s (version %d)",
                        self.broker_id,
                        proposal.topic_partition,
                        list(result.isr),
                        result.zk_version,
                    )
                return
            retry = partition.handle_alter_isr_error(proposal, result.error_code)
            logger.warning(
                "broker %d: AlterIsr for %s failed with %s; %s",
                self.broker_id,
                proposal.topic_partition,
                result.error_code.name,
                "retrying"
                if retry
                else "kept the committed ISR"
                if result.error_code == ErrorCode.INELIGIBLE_REPLICA
                else "waiting for the controller's LeaderAndIsr",
            )
            if retry and self.isr_proposer is not None:
                self.isr_proposer.submit(proposal)

    # ==============================================================================================
    # state
    # ==============================================================================================
    def counts(self) -> dict[str, int]:
        with self.lock:
            roles = {role: 0 for role in Role}
            for p in self.partitions.values():
                roles[p.role] += 1
            return {
                "partitions": len(self.partitions),
                "leaders": roles[Role.LEADER],
                "followers": roles[Role.FOLLOWER],
                "stopped": roles[Role.STOPPED],
                "under_replicated": sum(
                    1 for p in self.partitions.values() if p.is_leader and len(p.isr_state.isr) < len(p.replicas)
                ),
                "under_min_isr": sum(
                    1
                    for p in self.partitions.values()
                    if p.is_leader and len(p.isr_state.isr) < self.config.min_insync_replicas
                ),
            }

    def snapshot(self, *, include_partitions: bool = True, topic: str | None = None) -> dict[str, Any]:
        """JSON-ready state of the replicas (``GET /v1/state``)."""
        with self.lock:
            now = self.now_ms()
            d: dict[str, Any] = {
                "broker_epoch": self.broker_epoch,
                "controller_id": self.controller_id,
                "controller_epoch": self.controller_epoch,
                "counts": self.counts(),
                "requests_handled": dict(self.requests_handled),
                "requests_rejected": dict(self.requests_rejected),
                "messages_appended": self.messages_appended,
                "not_enough_replicas": self.not_enough_replicas,
            }
            if include_partitions:
                replicas = []
                for tp in sorted(self.partitions):
                    if topic is not None and tp.topic != topic:
                        continue
                    partition = self.partitions[tp]
                    entry = partition.snapshot(now)
                    entry["not_enough_replicas"] = self.not_enough_replicas_by_partition.get(tp, 0)
                    cached = self.metadata.partitions.get(tp)
                    if (
                        not partition.is_leader
                        and cached is not None
                        and cached.leader_epoch == partition.leader_epoch
                        and cached.zk_version >= partition.zk_version
                    ):
                        # Followers hear of AlterIsr changes only through UpdateMetadata.
                        entry["isr"] = list(cached.isr)
                    replicas.append(entry)
                d["replicas"] = replicas
            d["metadata"] = self.metadata.snapshot(include_partitions=include_partitions, topic=topic)
            return d

    def checkpoint(self) -> dict[TopicPartition, ReplicaLog]:
        """A copy of every log's offsets, for the checkpoint file."""
        with self.lock:
            return {tp: ReplicaLog.from_dict(log.to_dict()) for tp, log in self.logs.items()}
