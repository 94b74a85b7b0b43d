"""Applying partition and replica states to the mirror's model: ZooKeeper reads and controller records.

Why a module of its own: these are the two ways states arrive (bulk-read state znodes, and the
controller's state-change records in managed mode), with their own invariants: a read older than
the row, by ``(leader_epoch, mzxid)``, never regresses it; a batch of records is folded into one
working copy per partition and committed once; states that arrive before the partition's
assignment are kept as "early" and applied when it appears. ``StateUpdates`` is a base of
``MirrorState``, which sets every attribute declared below and keeps the counters (``_replace``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from controller_core.model import TopicPartition
from controller_core.record_kinds import RecordKind
from dashboard.clusters import layout
from dashboard.clusters.layout import PartitionRow
from workers.mirror.aggregates import rederive
from workers.mirror.changes import CLUSTER_SCOPE, broker_scope, topic_scope
from workers.mirror.model import NON_EXISTENT_R, PARTITION_STATES, REPLICA_STATES, UNREAD, StateRead

logger = logging.getLogger(__name__)


class StateUpdates:
    """The state-applying half of ``MirrorState``."""

    partitions: dict[str, PartitionRow]
    live: frozenset[int]
    _edges: Counter[tuple[str, str, str, str]]
    _recording: bool
    _early_states: dict[str, tuple[str | None, dict[int, str]]]

    def _replace(self, old: PartitionRow | None, new: PartitionRow, *, diff_edges: bool = True) -> None:
        raise NotImplementedError  # MirrorState's

    def set_controller(self, controller_id: int | None, epoch: int | None) -> None:
        raise NotImplementedError  # MirrorState's

    # -- partition states from ZooKeeper --------------------------------------------------------
    def apply_state_reads(self, reads: Mapping[TopicPartition, StateRead | None]) -> int:
        """Apply bulk-read state znodes (``None``: no state znode); return how many rows changed."""
        member = layout.member
        return self.apply_member_reads([member(tp.topic, tp.partition) for tp in reads], list(reads.values()))

    def apply_member_reads(
        self, members: Sequence[str], reads: Sequence[StateRead | None], replaced: list[str] | None = None
    ) -> int:
        """``apply_state_reads`` by member name, in order (``UNREAD``: nothing was read); the members
        of rows replaced are appended to ``replaced``. Returns how many rows changed."""
        changed = 0
        partitions = self.partitions
        for m, read in zip(members, reads, strict=True):
            if read is UNREAD:
                continue
            old = partitions.get(m)
            if old is None:
                continue
            if read is None:
                if old.mzxid < 0 and old.leader_epoch < 0:
                    continue
                # The state znode is gone (topic deletion): the partition has no leader any more.
                new = old.clone()
                new.leader, new.leader_epoch, new.isr, new.zk_version, new.mzxid = -1, -1, (), -1, -1
            else:
                if read.leader_epoch < old.leader_epoch or (
                    read.leader_epoch == old.leader_epoch and read.mzxid <= old.mzxid
                ):
                    continue  # older than (or the same as) what we hold: never regress
                if (read.leader, read.leader_epoch, read.isr) == (old.leader, old.leader_epoch, old.isr):
                    # A confirmation of what the controller's stream already told us: keep the
                    # versions for the next comparison, but there is nothing to show or publish.
                    old.zk_version, old.mzxid, old.controller_epoch = read.zk_version, read.mzxid, read.controller_epoch
                    continue
                new = old.clone()
                new.leader, new.leader_epoch, new.isr = read.leader, read.leader_epoch, read.isr
                new.controller_epoch, new.zk_version, new.mzxid = read.controller_epoch, read.zk_version, read.mzxid
            rederive(new, self.live)
            self._replace(old, new)
            changed += 1
            if replaced is not None:
                replaced.append(m)
        return changed

    # -- controller records (managed mode) ------------------------------------------------------
    def apply_records(self, records: Iterable[Mapping[str, Any]]) -> None:
        """Apply state-change records from the controller's stream, in order.

        Records of one batch are folded into one working copy per partition and committed once:
        a failover sends a partition record and a replica record for each partition, and counting,
        indexing and publishing a row once instead of twice is most of the mirror's cost then.
        """
        work: dict[str, tuple[PartitionRow, PartitionRow]] = {}
        for rec in records:
            kind = rec.get("kind")
            try:
                if kind in (RecordKind.PARTITION_TRANSITION, RecordKind.ELECTION):
                    self._partition_record(rec, work, state_change=True)
                elif kind == RecordKind.ISR_CHANGE:
                    self._partition_record(rec, work, state_change=False)
                elif kind == RecordKind.REPLICA_TRANSITION:
                    self._replica_record(rec, work)
                elif kind == RecordKind.STATE_SNAPSHOT:
                    self._commit(work)
                    work = {}
                    self._apply_state_snapshot(rec)
                elif kind == RecordKind.FAILOVER:
                    cid, epoch = rec.get("controller_id"), rec.get("controller_epoch")
                    if isinstance(cid, int) and isinstance(epoch, int):
                        self.set_controller(cid, epoch)
            except (TypeError, ValueError, KeyError) as exc:
                logger.warning("ignoring malformed state-change record %r: %s", rec, exc)
        self._commit(work)

    def _working(self, m: str, work: dict[str, tuple[PartitionRow, PartitionRow]]) -> PartitionRow | None:
        got = work.get(m)
        if got is not None:
            return got[1]
        old = self.partitions.get(m)
        if old is None:
            return None
        row = old.clone()
        work[m] = (old, row)
        return row

    def _commit(self, work: dict[str, tuple[PartitionRow, PartitionRow]]) -> None:
        """Put the working copies in place; animate what derivation changed beyond the records."""
        for old, row in work.values():
            state, rstates = row.state, dict(row.replica_states)
            rederive(row, self.live)
            self._replace(old, row, diff_edges=False)
            if not self._recording:
                continue
            if row.state != state:
                for scope in self._partition_scopes(row):
                    self._edges[(scope, "partition", state, row.state)] += 1
            for b, dst in row.replica_states.items():
                src = rstates.get(b, NON_EXISTENT_R)
                if src != dst:
                    for scope in (CLUSTER_SCOPE, topic_scope(row.topic), broker_scope(b)):
                        self._edges[(scope, "replica", src, dst)] += 1

    def _partition_record(
        self, rec: Mapping[str, Any], work: dict[str, tuple[PartitionRow, PartitionRow]], state_change: bool
    ) -> None:
        m = layout.member(str(rec["topic"]), int(rec["partition"]))
        to_state = rec.get("to_state") if state_change else None
        if to_state is not None and to_state not in PARTITION_STATES:
            raise ValueError(f"unknown partition state {to_state!r}")
        row = self._working(m, work)
        if row is None:
            if to_state is not None:
                prev = self._early_states.get(m, (None, {}))
                self._early_states[m] = (to_state, prev[1])
            return
        leader_after = rec.get("leader_after")
        epoch_after = rec.get("leader_epoch_after")
        if isinstance(leader_after, int) and isinstance(epoch_after, int) and epoch_after >= row.leader_epoch:
            row.leader = leader_after
            row.leader_epoch = epoch_after
            isr_after = rec.get("isr_after")
            if isinstance(isr_after, list | tuple):
                row.isr = tuple(int(b) for b in isr_after)
            row.controller_epoch = int(rec.get("controller_epoch", row.controller_epoch))
        if to_state is None:
            return
        src = str(rec.get("from_state") or row.state)
        row.state = to_state
        row.derived = False
        if self._recording:
            for scope in self._partition_scopes(row):
                self._edges[(scope, "partition", src, to_state)] += 1

    def _replica_record(self, rec: Mapping[str, Any], work: dict[str, tuple[PartitionRow, PartitionRow]]) -> None:
        m = layout.member(str(rec["topic"]), int(rec["partition"]))
        broker = int(rec["replica"])
        to_state = rec.get("to_state")
        if to_state not in REPLICA_STATES:
            raise ValueError(f"unknown replica state {to_state!r}")
        row = self._working(m, work)
        if row is None:
            prev = self._early_states.get(m, (None, {}))
            prev[1][broker] = str(to_state)
            self._early_states[m] = prev
            return
        src = str(rec.get("from_state") or row.replica_states.get(broker, NON_EXISTENT_R))
        row.replica_derived = False
        row.replica_states[broker] = str(to_state)
        if self._recording:
            for scope in (CLUSTER_SCOPE, topic_scope(row.topic), broker_scope(broker)):
                self._edges[(scope, "replica", src, str(to_state))] += 1

    def _partition_scopes(self, row: PartitionRow) -> list[str]:
        return [CLUSTER_SCOPE, topic_scope(row.topic), *(broker_scope(b) for b in row.replicas)]

    def _apply_state_snapshot(self, rec: Mapping[str, Any]) -> None:
        """A new controller's full states: overwrite ours without animating (it is not a transition)."""
        pstates: dict[str, str] = {}
        for state, entities in (rec.get("partition_states") or {}).items():
            if state not in PARTITION_STATES:
                raise ValueError(f"unknown partition state {state!r}")
            for entity in entities:
                tp = TopicPartition.parse(str(entity))
                pstates[layout.member(tp.topic, tp.partition)] = state
        rstates: dict[str, dict[int, str]] = {}
        for state, entities in (rec.get("replica_states") or {}).items():
            if state not in REPLICA_STATES:
                raise ValueError(f"unknown replica state {state!r}")
            for entity in entities:
                part, _, broker = str(entity).rpartition("@")
                tp = TopicPartition.parse(part)
                rstates.setdefault(layout.member(tp.topic, tp.partition), {})[int(broker)] = state
        for m in set(pstates) | set(rstates):
            old = self.partitions.get(m)
            if old is None:
                prev = self._early_states.get(m, (None, {}))
                self._early_states[m] = (pstates.get(m, prev[0]), {**prev[1], **rstates.get(m, {})})
                continue
            new = old.clone()
            if m in pstates:
                new.state = pstates[m]
                new.derived = False
            if m in rstates:
                new.replica_states.update(rstates[m])
                new.replica_derived = False
            rederive(new, self.live)
            self._replace(old, new, diff_edges=False)

    def _apply_early(self, row: PartitionRow, early: tuple[str | None, dict[int, str]]) -> None:
        pstate, rstates = early
        if pstate is not None:
            row.state = pstate
            row.derived = False
        if rstates:
            row.replica_states.update(rstates)
            row.replica_derived = False
            rederive(row, self.live)
