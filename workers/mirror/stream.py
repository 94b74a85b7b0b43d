"""Follow the controller's state-change stream (``kcp:{cluster}:state-changes``, docs/contracts.md).

The follower thread ``XREAD``s from the last id with a short block, decodes records and enqueues
them for the mirror thread; it never touches the mirror's state. ``restart(from_id)`` starts a new
*run*: batches carry their run number and the mirror drops batches of an older run, so a resync
never applies records twice.

``replay_start`` finds where a late reader must start to rebuild every state without replaying
the whole stream: the newest ``state_snapshot`` a controller wrote at failover (docs/contracts.md).

``RecordGuard`` drops copies of records already passed on: the controller's sink resends a batch
Redis did not acknowledge in time, and a Redis that was only paused appends both copies (F20).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from typing import Any

import redis

from controller_core.record_kinds import RecordKind
from dashboard.lib.redis_keys import state_change_stream_key
from workers.mirror.events import StreamRecords

logger = logging.getLogger(__name__)

_SNAPSHOT_MARK = f'"kind":"{RecordKind.STATE_SNAPSHOT}"'.encode()
_HEADER_KINDS = frozenset({RecordKind.STATE_SNAPSHOT, RecordKind.FAILOVER})


class RecordGuard:
    """Admits each controller record once: ``seq`` must pass the highest seen for its controller epoch.

    Why: ``RedisStreamSink`` keeps a batch and sends it again when ``XADD`` fails, which is right when
    Redis refused it but not when Redis was only slow or paused (SIGSTOP, a long fork, a saturated
    link): the commands sat in its socket buffer and were applied when it resumed, so the stream holds
    the batch twice or more, interleaved with later records (F20 found 13 copies after a 10 s pause).
    Applied again, a copy replays transitions (the diagrams animate them twice) and, where copies
    interleave, shows an older leader or ISR for a moment. ``(controller_epoch, seq)`` is strictly
    increasing per writer (docs/contracts.md) and an epoch belongs to one controller, so anything at
    or below the high-water mark is a copy. Records without an epoch or ``seq`` always pass.
    """

    def __init__(self, max_epochs: int = 64) -> None:
        self._high: dict[tuple[object, int], int] = {}
        self._max_epochs = max_epochs
        self.dropped = 0

    def admit(self, record: dict[str, Any]) -> bool:
        epoch, seq = record.get("controller_epoch"), record.get("seq")
        if not isinstance(epoch, int) or not isinstance(seq, int) or epoch <= 0:
            return True
        key = (record.get("controller_id"), epoch)
        if seq <= self._high.get(key, 0):
            self.dropped += 1
            return False
        self._high[key] = seq
        if len(self._high) > self._max_epochs:  # old epochs write no more: forget the oldest
            del self._high[next(iter(self._high))]
        return True


def decode_entries(entries: Any, guard: RecordGuard | None = None) -> list[dict[str, Any]]:
    # ``entries``: redis-py's raw XRANGE/XREAD reply, [(id, {field: value}), ...] as bytes.
    """Decode stream entries (field ``r`` = JSON record); malformed ones are logged and skipped.

    Copies of records already decoded are dropped (``RecordGuard``): across calls with the caller's
    guard (the follower keeps one), within this call otherwise (a replay page).
    """
    records: list[dict[str, Any]] = []
    loads = json.loads
    admit = (guard or RecordGuard()).admit
    for entry_id, fields in entries:
        raw = fields.get(b"r")
        if raw is None:
            continue
        try:
            record = loads(raw)
        except ValueError:
            logger.warning("state-change stream entry %r is not JSON; skipped", entry_id)
            continue
        if isinstance(record, dict) and admit(record):
            records.append(record)
    return records


def replay_start(client: redis.Redis, cluster: str, max_scan: int = 500_000, page: int = 5_000) -> str:
    """The stream id to replay from: the newest controller's state snapshot, else the oldest scanned.

    Returns ``"-"`` for "from the beginning" and ``"$"``-like ``"0-0"`` semantics are avoided so the
    caller can always ``XRANGE`` from the result.
    """
    key = state_change_stream_key(cluster)
    upper = "+"
    scanned = 0
    oldest = "-"
    while scanned < max_scan:
        entries: Any = client.xrevrange(key, max=upper, min="-", count=page)
        if not entries:
            return "-"
        for index, (_entry_id, fields) in enumerate(entries):
            raw = fields.get(b"r", b"")
            if _SNAPSHOT_MARK in raw:
                return _header_start(entries, index)
        scanned += len(entries)
        last_id = entries[-1][0].decode()
        oldest = last_id
        upper = f"({last_id}"
    return oldest


def _header_start(entries: Any, index: int) -> str:
    """Walk back (older) over the failover/snapshot records written together with ``entries[index]``."""
    start = index
    while start + 1 < len(entries):
        raw = entries[start + 1][1].get(b"r", b"")
        try:
            kind = json.loads(raw).get("kind")
        except ValueError:
            break
        if kind not in _HEADER_KINDS:
            break
        start += 1
    return str(entries[start][0].decode())


class StreamFollower:
    """Reads the stream on its own thread and hands batches to ``deliver``.

    Example::

        follower = StreamFollower(redis_client, "demo", queue.put)
        follower.restart("1700000000000-0")   # exclusive: records after this id
        ...
        follower.stop()
    """

    def __init__(
        self,
        client: redis.Redis,
        cluster: str,
        deliver: Callable[[StreamRecords], None],
        block_ms: int = 200,
        count: int = 2_000,
    ) -> None:
        self._client = client
        self._key = state_change_stream_key(cluster)
        self._deliver = deliver
        self._block_ms = block_ms
        self._count = count
        self._lock = threading.Lock()
        self._run = 0
        self._position = "$"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors = 0
        self.guard = RecordGuard()

    @property
    def run(self) -> int:
        return self._run

    def restart(self, after_id: str) -> int:
        """Follow from just after ``after_id``; return the new run number."""
        with self._lock:
            self._run += 1
            self._position = after_id
            run = self._run
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name=f"mirror-stream-{self._key}", daemon=True)
            self._thread.start()
        return run

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                run, position = self._run, self._position
            try:
                answer: Any = self._client.xread({self._key: position}, count=self._count, block=self._block_ms)
            except redis.RedisError as exc:
                self.errors += 1
                logger.debug("state-change stream read failed: %s", exc)
                self._stop.wait(0.5)
                continue
            if not answer:
                continue
            _key, entries = answer[0]
            if not entries:
                continue
            last_id = entries[-1][0].decode()
            with self._lock:
                if run != self._run:
                    continue  # restarted meanwhile: drop this batch
                self._position = last_id
            self._deliver(StreamRecords(run, last_id, decode_entries(entries, self.guard)))
