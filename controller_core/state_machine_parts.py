"""What the partition and the replica state machine are both built from.

Both move states held in the controller context, write partition states through the store, add
their requests to their own batch and record every change; both decide their first round on the
context's cached states unless told to read first (``controller_core.cached_states``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from itertools import islice

from controller_core.context import ControllerContext
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.ports import LeaderAndIsrWrite, PartitionStateStore
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.state_change_log import PartitionRow, StateChangeLogger


class TrailingWrites:
    """State writes that ride behind another state machine's next writes, in the same stream of
    pipelined fenced multis, so that ZooKeeper applies them while the first machine is still taking its
    own results (a controlled shutdown: the ISR removals of the partitions the broker follows behind the
    leader moves of those it leads; in two rounds ZooKeeper waited between them for the first round's
    last slice, its send and the second round's decisions and first encoding: at 100,000 partitions
    through the real store, 322 against 421 ms of wall, min of two timed shutdowns, one alternated pair
    of ``scripts/bench_elections.py --zookeeper`` at load 5 to 8).

    The writes are decided by their own machine before the stream starts (``ReplicaStateMachine
    .offline_planned``), carried by the first machine's next ``_write_states`` (``StateMachineParts
    .carrying``), and their outcomes taken later by their own machine (``outcomes``), in their order.
    ZooKeeper applies them after the first machine's first-attempt writes (one session, multis in
    order). A fence or an error of the stream is the carried writes' too: ``outcomes`` raises what the
    stream raised while the first machine took its share.
    """

    __slots__ = ("_ahead", "_error", "_stream", "states")

    def __init__(self, states: Mapping[TopicPartition, LeaderAndIsr]) -> None:
        self.states = states
        self._stream: Iterator[LeaderAndIsrWrite] | None = None
        self._ahead = 0  # the leading writes' outcomes not taken yet
        self._error: Exception | None = None

    def carry(
        self,
        leading: Mapping[TopicPartition, LeaderAndIsr],
        write: Callable[[Mapping[TopicPartition, LeaderAndIsr]], Iterator[LeaderAndIsrWrite]],
    ) -> Iterator[LeaderAndIsrWrite]:
        """Write ``leading`` and then these states in one ``write``; return ``leading``'s outcomes (the
        stream's first ones). Partitions in both are not carried: ``leading`` is written alone."""
        merged = {**leading, **self.states}
        if len(merged) != len(leading) + len(self.states):
            return write(leading)
        stream = self._stream = write(merged)
        self._ahead = len(leading)
        return self._lead(stream, len(leading))

    def _lead(self, stream: Iterator[LeaderAndIsrWrite], count: int) -> Iterator[LeaderAndIsrWrite]:
        try:
            for outcome in islice(stream, count):
                self._ahead -= 1
                yield outcome
        except Exception as e:  # the stream is over: the carried writes' outcomes end with it
            self._error = e
            raise

    def outcomes(self) -> Iterator[LeaderAndIsrWrite] | None:
        """The carried states' outcomes, in their order, from the stream that carried them; None when
        no stream did (the first machine wrote nothing), and the caller writes them itself."""
        if self._stream is None:
            return None
        if self._error is not None:
            raise self._error
        stream = self._stream
        # Leading outcomes left untaken (the first machine failed while taking them) are lost, as a
        # stream abandoned alone loses them.
        for _ in range(self._ahead):
            next(stream)
        self._ahead = 0
        return stream


class StateMachineParts:
    """The context, store, request batch and state-change logger of one state machine."""

    stream_slice: int = 1024
    """Write results are taken (recorded, cached, their requests built) this many at a time as their
    multis come back, while ZooKeeper applies the later ones (a multi holds ~750 state writes)."""

    def __init__(
        self,
        context: ControllerContext,
        store: PartitionStateStore,
        batch: ControllerBrokerRequestBatch,
        state_change_logger: StateChangeLogger,
        *,
        decide_from_cache: bool = True,
    ) -> None:
        self._ctx = context
        self._store = store
        self._batch = batch
        self._log = state_change_logger
        self.decide_from_cache = decide_from_cache
        """First round on cached states (controller_core.cached_states); False: Kafka's read-first."""
        self._trailing: TrailingWrites | None = None

    @contextmanager
    def carrying(self, trailing: TrailingWrites | None) -> Iterator[None]:
        """Within the block, this machine's next state writes carry ``trailing``'s behind them in one
        stream (``TrailingWrites``); if it writes nothing, they are not carried."""
        self._trailing = trailing
        try:
            yield
        finally:
            self._trailing = None

    def _write_states(self, states: Mapping[TopicPartition, LeaderAndIsr]) -> Iterator[LeaderAndIsrWrite]:
        """Write ``states`` conditionally, fenced by this controller's epoch; yield each partition and
        its outcome (the new state, an error, or None: a version conflict to retry on a fresh read) as
        its multi comes back, so the caller's work on the first results overlaps ZooKeeper's on the rest.

        The outcomes come in the order of ``states`` (``ports.PartitionStateStore``): callers pair them
        with the partitions' numbers by position (``zip(..., strict=True)``, in C) instead of looking
        each partition up again."""
        ctx = self._ctx
        epoch, epoch_zk_version, write = ctx.epoch, ctx.epoch_zk_version, self._store.update_leader_and_isr_iter
        trailing, self._trailing = self._trailing, None
        if trailing is not None and trailing.states:
            return trailing.carry(states, lambda merged: write(merged, epoch, epoch_zk_version))
        return write(states, epoch, epoch_zk_version)

    def _take_written(
        self,
        kind: str,
        records: list[PartitionRow],
        written: list[tuple[int, LeaderIsrAndControllerEpoch]],
        replica: int | None = None,
    ) -> list[tuple[int, LeaderIsrAndControllerEpoch]]:
        """Record and cache the slice of write results gathered so far (``records`` and ``written``,
        of ``_write_states``' outcomes) and return it for the caller's requests. The slice is taken off
        both lists first, so it is never taken twice, even when recording or caching it raised (each
        stream takes its last slice in a ``finally``)."""
        taken_records, taken = records[:], written[:]
        records.clear()
        written.clear()
        self._log.partition_records(kind, taken_records, replica)
        self._ctx.put_leadership_by_id(taken)
        return taken
