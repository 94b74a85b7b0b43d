"""A replica's log, modelled by its offsets: what replication and leadership need, without the bytes.

Messages are synthetic, so a log is its **log start offset**, its **log end offset** (LEO, the
offset the next message gets), its **high watermark** (HW, the first offset not yet known to be on
every in-sync replica) and its **leader-epoch cache**: for each leader epoch that wrote to this log,
the offset of its first message (Kafka's ``LeaderEpochFileCache``). The cache is what lets a
follower's log match its leader's epoch by epoch, and what the state page shows.

Invariants kept by every method: ``log_start_offset <= high_watermark <= log_end_offset``; cache
entries are strictly increasing in both epoch and start offset, and none starts beyond the LEO.

Not thread-safe: a log belongs to one partition, which the replica manager guards with its lock.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class ReplicaLog:
    """Offsets and leader epochs of one replica's log.

    Example::

        log = ReplicaLog()
        log.append(10, leader_epoch=3)      # offsets 0..9 written in epoch 3
        log.high_watermark = 10             # only a leader with its ISR caught up does this
        log.truncate_to(4)                  # a follower dropping what its leader never committed
    """

    __slots__ = ("_epochs", "_high_watermark", "log_end_offset", "log_start_offset")

    def __init__(
        self,
        log_start_offset: int = 0,
        log_end_offset: int | None = None,
        high_watermark: int | None = None,
        epochs: Iterable[tuple[int, int]] = (),
    ) -> None:
        leo = log_start_offset if log_end_offset is None else log_end_offset
        hw = log_start_offset if high_watermark is None else high_watermark
        if not 0 <= log_start_offset <= leo:
            raise ValueError(f"log start offset {log_start_offset} must be within 0..LEO {leo}")
        if not log_start_offset <= hw <= leo:
            raise ValueError(f"high watermark {hw} must be within {log_start_offset}..{leo}")
        self.log_start_offset = log_start_offset
        self.log_end_offset = leo
        self._high_watermark = hw
        self._epochs: list[tuple[int, int]] = []
        for epoch, start in epochs:
            self.assign_epoch_start_offset(epoch, start)

    # -- reading ---------------------------------------------------------------------------------

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @high_watermark.setter
    def high_watermark(self, offset: int) -> None:
        """Set the HW, clamped into ``log_start_offset..log_end_offset``."""
        self._high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)

    @property
    def epochs(self) -> tuple[tuple[int, int], ...]:
        """``((leader_epoch, start_offset), ...)`` oldest first."""
        return tuple(self._epochs)

    @property
    def latest_epoch(self) -> int:
        """The epoch of the newest message's leader (-1 for a log nobody has written to)."""
        return self._epochs[-1][0] if self._epochs else -1

    def epoch_runs(self, start: int, end: int) -> tuple[tuple[int, int], ...]:
        """The leader epoch of messages ``start..end-1`` as runs ``((epoch, first_offset), ...)``.

        The first run starts at ``start``. Messages older than every cache entry (a log restored
        without its cache) are reported with epoch -1, which followers ignore.
        """
        if start >= end:
            return ()
        runs: list[tuple[int, int]] = []
        current = -1
        for epoch, first in self._epochs:
            if first <= start:
                current = epoch
            elif first < end:
                if not runs:
                    runs.append((current, start))
                runs.append((epoch, first))
            else:
                break
        if not runs:
            runs.append((current, start))
        return tuple(runs)

    # -- writing ---------------------------------------------------------------------------------

    def append(self, count: int, leader_epoch: int) -> int:
        """Append ``count`` messages written in ``leader_epoch``; return the offset of the first."""
        if count < 0:
            raise ValueError(f"cannot append {count} messages")
        first = self.log_end_offset
        if count:
            self.assign_epoch_start_offset(leader_epoch, first)
            self.log_end_offset += count
        return first

    def append_replicated(self, count: int, runs: Iterable[tuple[int, int]]) -> None:
        """Append ``count`` messages fetched from the leader, with the leader's epoch runs for them."""
        first = self.log_end_offset
        for epoch, start in runs:
            if first <= start < first + count:
                self.assign_epoch_start_offset(epoch, start)
        self.log_end_offset += max(0, count)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (Kafka's ``LeaderEpochFileCache.assign``).

        Entries for the same or later epochs, or starting at or after ``start_offset``, are replaced:
        they belong to a history this log no longer has. Negative (unknown) epochs are ignored.
        """
        if epoch < 0:
            return
        epochs = self._epochs
        if epochs:
            last_epoch, last_start = epochs[-1]
            if last_epoch == epoch and start_offset >= last_start:
                return
            if last_epoch < epoch and last_start < start_offset:
                epochs.append((epoch, start_offset))  # the usual case: a newer epoch, further on
                return
            self._epochs = epochs = [(e, s) for e, s in epochs if e < epoch and s < start_offset]
        epochs.append((epoch, start_offset))

    def truncate_to(self, offset: int) -> bool:
        """Drop every message at or after ``offset`` (never below the log start); True if any went."""
        target = max(offset, self.log_start_offset)
        if target >= self.log_end_offset:
            return False
        self.log_end_offset = target
        self._high_watermark = min(self._high_watermark, target)
        self._epochs = [(e, s) for e, s in self._epochs if s < target]
        return True

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and restart it at ``offset`` (a follower far behind the leader's log start)."""
        if offset < 0:
            raise ValueError(f"a log cannot start at {offset}")
        self.log_start_offset = self.log_end_offset = self._high_watermark = offset
        self._epochs = []

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        """Advance the log start (never backwards, never past the LEO)."""
        if offset > self.log_start_offset:
            self.log_start_offset = min(offset, self.log_end_offset)
            self._high_watermark = max(self._high_watermark, self.log_start_offset)
            self._epochs = _drop_before(self._epochs, self.log_start_offset)

    # -- checkpoint form -------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "high_watermark": self._high_watermark,
            "epochs": [list(e) for e in self._epochs],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> ReplicaLog:
        try:
            return cls(
                int(d["log_start_offset"]),
                int(d["log_end_offset"]),
                int(d["high_watermark"]),
                ((int(e), int(s)) for e, s in d.get("epochs", ())),
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"not a log checkpoint: {exc}") from None

    def __repr__(self) -> str:
        return (
            f"ReplicaLog(start={self.log_start_offset}, leo={self.log_end_offset}, "
            f"hw={self._high_watermark}, epochs={self._epochs})"
        )


def _drop_before(epochs: list[tuple[int, int]], offset: int) -> list[tuple[int, int]]:
    """Keep the entry covering ``offset`` (moved to start there) and every later one."""
    kept: list[tuple[int, int]] = []
    for i, (epoch, start) in enumerate(epochs):
        next_start = epochs[i + 1][1] if i + 1 < len(epochs) else None
        if next_start is not None and next_start <= offset:
            continue
        kept.append((epoch, max(start, offset)))
    return kept
