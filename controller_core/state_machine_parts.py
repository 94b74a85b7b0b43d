"""What the partition and the replica state machine are both built from.

Both move states held in the controller context, write partition states through the store, add
their requests to their own batch and record every change; both decide their first round on the
context's cached states unless told to read first (``controller_core.cached_states``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from controller_core.context import ControllerContext
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.ports import LeaderAndIsrWrite, PartitionStateStore
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.state_change_log import PartitionRow, StateChangeLogger


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

    def _write_states(self, states: Mapping[TopicPartition, LeaderAndIsr]) -> Iterator[LeaderAndIsrWrite]:
        """Write ``states`` conditionally, fenced by this controller's epoch; yield each partition and
        its outcome (the new state, an error, or None: a version conflict to retry on a fresh read) as
        its multi comes back, so the caller's work on the first results overlaps ZooKeeper's on the rest.

        The outcomes come in the order of ``states`` (``ports.PartitionStateStore``): callers pair them
        with the partitions' numbers by position (``zip(..., strict=True)``, in C) instead of looking
        each partition up again."""
        ctx = self._ctx
        return self._store.update_leader_and_isr_iter(states, ctx.epoch, ctx.epoch_zk_version)

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
