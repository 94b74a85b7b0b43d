"""How one day's records are numbered, counted and rendered in ``controller_core.state_change_log``'s shape."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Final

from scripts.support.history_spec import RECORD_STEP_MS, DayPlan, DayResult

# --- rendering ----------------------------------------------------------------------------------------

# The brokers' zookeeper.session.timeout.ms (ControllerConfig.broker_session_timeout_s).
SESSION_TIMEOUT_MS: Final = 18_000.0
HEADER: Final = '{"ts":%.3f,"controller_id":%d,"controller_epoch":%d,"seq":%d,"kind":"%s","event_id":"%s","cause":"%s"'
PARTITION_RECORD: Final = (
    HEADER + ',"entity":"%s","topic":"%s","partition":%d,"replica":%s,"from_state":%s,"to_state":%s,'
    '"strategy":%s,"leader_before":%s,"leader_after":%s,"isr_before":%s,"isr_after":%s,'
    '"leader_epoch_before":%s,"leader_epoch_after":%s,"unclean":%s,"error":%s}'
)
NULL: Final = "null"
ONLINE, OFFLINE, NEW = '"OnlinePartition"', '"OfflinePartition"', '"NewPartition"'
R_ONLINE, R_OFFLINE, R_NEW, R_GONE = '"OnlineReplica"', '"OfflineReplica"', '"NewReplica"', '"NonExistentReplica"'
R_DEL_START, R_DEL_OK = '"ReplicaDeletionStarted"', '"ReplicaDeletionSuccessful"'


class DayRecords:
    """Number, count and (when ``path`` is given) render and write one day's records in order."""

    def __init__(self, plan: DayPlan, day_start_ms: float, path: Path | None) -> None:
        self.controller_id = plan.controller_id
        self.epoch = plan.controller_epoch
        self.seq = plan.seq_start
        self.clock = day_start_ms
        self.result = DayResult(plan.index)
        self.after_failover = False
        self.render = path is not None
        self._path = path
        self._tmp = None if path is None else path.with_suffix(".jsonl.tmp")
        self._file = None if self._tmp is None else open(self._tmp, "w", encoding="utf-8")  # noqa: SIM115
        self._lines: list[str] = []
        self._isr_text: dict[tuple[int, ...], str] = {}

    def advance_to(self, t_ms: float) -> None:
        self.clock = max(self.clock, t_ms)

    def _next(self, kind: str) -> float:
        self.seq += 1
        self.clock += RECORD_STEP_MS
        kinds = self.result.kinds
        kinds[kind] = kinds.get(kind, 0) + 1
        self.result.records += 1
        if self.after_failover:
            self.result.records_after_failover += 1
        return self.clock

    def isr(self, isr: tuple[int, ...]) -> str:
        text = self._isr_text.get(isr)
        if text is None:
            text = self._isr_text[isr] = "[" + ",".join(map(str, isr)) + "]"
        return text

    def partition(
        self,
        kind: str,
        cause: str,
        event_id: str,
        entity: str,
        topic: str,
        partition: int,
        replica: str,
        from_state: str,
        to_state: str,
        strategy: str = NULL,
        leader_before: str = NULL,
        leader_after: str = NULL,
        isr_before: str = NULL,
        isr_after: str = NULL,
        epoch_before: str = NULL,
        epoch_after: str = NULL,
        unclean: str = NULL,
        error: str = NULL,
    ) -> None:
        ts = self._next(kind)
        if self.render:
            self._lines.append(
                PARTITION_RECORD
                % (
                    ts,
                    self.controller_id,
                    self.epoch,
                    self.seq,
                    kind,
                    event_id,
                    cause,
                    entity,
                    topic,
                    partition,
                    replica,
                    from_state,
                    to_state,
                    strategy,
                    leader_before,
                    leader_after,
                    isr_before,
                    isr_after,
                    epoch_before,
                    epoch_after,
                    unclean,
                    error,
                )
            )
            if len(self._lines) >= 50_000:
                self._flush()

    def other(self, kind: str, cause: str, event_id: str, fields: str | Callable[[], str]) -> None:
        """A non-partition record; ``fields`` is the JSON tail (a callable when costly to build)."""
        ts = self._next(kind)
        if self.render:
            tail = fields() if callable(fields) else fields
            head = HEADER % (ts, self.controller_id, self.epoch, self.seq, kind, event_id, cause)
            self._lines.append(f"{head},{tail}}}" if tail else head + "}")

    def switch_controller(self, controller_id: int) -> None:
        self.controller_id = controller_id
        self.epoch += 1
        self.seq = 0
        self.after_failover = True

    def _flush(self) -> None:
        if self._file is not None and self._lines:
            text = "\n".join(self._lines) + "\n"
            self._file.write(text)
            self.result.bytes += len(text)
        self._lines.clear()

    def close(self) -> None:
        self._flush()
        if self._file is not None and self._tmp is not None and self._path is not None:
            self._file.close()
            os.replace(self._tmp, self._path)


# --- the day simulation ---------------------------------------------------------------------------------
