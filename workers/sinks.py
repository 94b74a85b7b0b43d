"""Redis adapters for the controller's ports: the state-change stream and the status hash.

Why Redis here and not in ``controller_core``: the core stays a plain library; the hosts (Celery
worker, ``run_controller``) plug these sinks in. Key names and fields are the contract in
``docs/contracts.md``.

The stream sink buffers records and a writer thread of its own sends them, thousands of ``XADD``
per round trip, so a 20,000-partition failover costs a handful of round trips, not 20,000, and a
slow or absent Redis never stalls the controller's event thread. If Redis is down, records are kept
(bounded) and written, in order, when it returns; the day's JSON-lines file stays the durable copy.

The writer shares the controller's interpreter lock, so its CPU is the event thread's loss: with one
pipelined ``XADD`` command per record redis-py spends ~10 us a record (0.5 s for the 50,000 records of
a controlled shutdown at 100,000 partitions, taken from the event in the middle of it). A server-side
script that appends a whole chunk takes one command of arguments instead: ~3 us a record here.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any, cast

import redis

from controller_core.state_change_log import encode_record
from dashboard.lib.redis_keys import STREAM_FIELD, controller_status_key, state_change_stream_key

logger = logging.getLogger(__name__)


_XADD_CHUNK_SCRIPT = f"""
local maxlen = ARGV[1]
for i = 2, #ARGV do
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', maxlen, '*', '{STREAM_FIELD}', ARGV[i])
end
return #ARGV - 1
"""
"""Append each argument after the first to the stream KEYS[1] as field ``STREAM_FIELD``, trimming to ~ARGV[1]."""


def _scripts_refused(error: redis.ResponseError) -> bool:
    """Whether Redis refused to run scripts at all: no permission (an ACL without ``@scripting``) or no
    such command (``rename-command EVALSHA ""``), as opposed to a script that ran and failed."""
    return isinstance(error, redis.exceptions.NoPermissionError) or "unknown command" in str(error).lower()


class RedisStreamSink:
    """A ``StateChangeSink`` appending each record to the cluster's Redis stream.

    ``emit`` only buffers (it runs on the controller's event thread); ``flush`` writes. A record
    that cannot be written stays buffered, up to ``max_buffer`` records, oldest dropped first with
    a warning (the JSON-lines file still has them).
    """

    def __init__(
        self,
        client: redis.Redis,
        cluster: str,
        maxlen: int = 1_000_000,
        max_buffer: int = 2_000_000,
        chunk: int = 5_000,
    ) -> None:
        self._client = client
        self._key = state_change_stream_key(cluster)
        self._maxlen = maxlen
        self._buffer: deque[Mapping[str, Any]] = deque()
        self._max_buffer = max_buffer
        self._chunk = chunk
        self._lock = threading.Lock()
        self.dropped = 0
        self.written = 0
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"stream-{cluster}", daemon=True)
        self._append_chunk = client.register_script(_XADD_CHUNK_SCRIPT)
        self.scripting = True
        """False once Redis refused the script (scripting disabled or not permitted): one XADD a record."""

    def emit(self, record: Mapping[str, Any]) -> None:
        with self._lock:
            self._buffer.append(record)
            overflow = len(self._buffer) - self._max_buffer
            if overflow > 0:
                for _ in range(overflow):
                    self._buffer.popleft()
                self.dropped += overflow

    def flush(self) -> None:
        """Wake the writer (non-blocking: runs on the controller's event thread)."""
        self._wake.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        """Write what is buffered (for up to ``timeout`` seconds), then stop the writer."""
        self._stopping.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def write_pending(self) -> bool:
        """Send everything buffered; False when Redis refused (records stay buffered)."""
        while True:
            with self._lock:
                if not self._buffer:
                    return True
                batch = [self._buffer.popleft() for _ in range(min(self._chunk, len(self._buffer)))]
            try:
                self._append(batch)
                self.written += len(batch)
            except redis.RedisError as exc:
                with self._lock:
                    self._buffer.extendleft(reversed(batch))
                logger.warning(
                    "state-change stream %s unavailable (%s); %d records buffered", self._key, exc, len(self._buffer)
                )
                return False

    def _append(self, batch: list[Mapping[str, Any]]) -> None:
        """XADD every record of ``batch`` in order: one script call (all of them or, if the connection
        fails before it runs, none), or where scripts are refused one pipelined command a record."""
        payloads = [encode_record(record) for record in batch]
        if self.scripting:
            try:
                self._append_chunk(keys=[self._key], args=[self._maxlen, *payloads])
                return
            except redis.ResponseError as exc:
                if not _scripts_refused(exc):
                    raise  # e.g. WRONGTYPE: the XADDs would fail the same way; the records stay buffered
                self.scripting = False
                logger.warning("state-change stream %s: scripts refused (%s); one XADD per record", self._key, exc)
        pipe = self._client.pipeline(transaction=False)
        for payload in payloads:
            pipe.xadd(self._key, {STREAM_FIELD: payload}, maxlen=self._maxlen, approximate=True)
        pipe.execute()

    def _run(self) -> None:
        while True:
            self._wake.wait(1.0)
            self._wake.clear()
            ok = self.write_pending()
            if self._stopping.is_set():
                return
            if not ok:
                self._stopping.wait(1.0)  # back off while Redis is away


class ControllerStatusPublisher:
    """Publishes a controller candidate's status hash every ``interval`` seconds, on its own thread."""

    def __init__(
        self,
        client: redis.Redis,
        cluster: str,
        controller_id: int,
        snapshot: Callable[[], Mapping[str, Any]],
        interval: float = 1.0,
        ttl_s: int = 10,
    ) -> None:
        self._client = client
        self._key = controller_status_key(cluster, controller_id)
        self._snapshot = snapshot
        self._interval = interval
        self._ttl = ttl_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"status-{controller_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)
        with contextlib.suppress(redis.RedisError):
            self._client.delete(self._key)

    def publish_once(self) -> None:
        fields: dict[str, str] = {
            k: (str(v) if isinstance(v, str | int | float) else encode_record(v).decode())
            for k, v in self._snapshot().items()
        }
        fields["updated_at"] = str(int(time.time() * 1000))
        pipe = self._client.pipeline(transaction=True)
        pipe.delete(self._key)
        pipe.hset(self._key, mapping=cast(Any, fields))  # redis' stubs want an invariant key type
        pipe.expire(self._key, self._ttl)
        pipe.execute()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self.publish_once()
            except redis.RedisError as exc:
                logger.debug("controller status not published: %s", exc)
            except Exception:
                logger.exception("controller status snapshot failed")
