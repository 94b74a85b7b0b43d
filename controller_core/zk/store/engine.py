"""The fenced-multi engine: every controller write, in epoch-checked, pipelined ZooKeeper multis.

Every op list goes out in multis that begin with ``check(/controller_epoch, version=expected)``
(Kafka's ``wrapRequestWithControllerEpochCheck``), each under ``max_multi_bytes`` by its exact
serialized size, up to ``max_in_flight`` at a time. A BADVERSION on the check raises
``ControllerMovedError`` (the failed multi changed nothing); an op ZooKeeper rejects gets its own
result code and the rest of its multi is resubmitted in halves; a multi lost to a connection loss
is resubmitted once, and a conflict with our own first attempt is recognised and reported as OK.
The guarantees in full are in ``controller_core.zk.store``'s docstring. The concern modules only
build ``Op`` lists and interpret the outcomes.
"""

from __future__ import annotations

import logging
import os
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from itertools import islice
from typing import Any

from kazoo.exceptions import (
    BadVersionError,
    ConnectionClosedError,
    ConnectionLoss,
    NodeExistsError,
    RolledBackError,
    RuntimeInconsistency,
    SessionExpiredError,
)
from kazoo.protocol.states import ZnodeStat

from controller_core.errors import ControllerMovedError, ZkOperationError
from controller_core.pause_points import pause_point, pause_points_enabled
from controller_core.ports import ZkCode
from controller_core.zk import paths
from controller_core.zk.jute import DONE, INT
from controller_core.zk.store.base import StoreBase
from controller_core.zk.store.wire import (
    CHECK,
    CREATE,
    DELETE,
    PATH_HEADERS,
    REPLY_BYTES,
    SET,
    TXN_SLACK,
    Op,
    PreparedMulti,
    WriteOutcome,
    zk_code,
)

logger = logging.getLogger(__name__)


class FencedMultiEngine(StoreBase):
    """Fenced, batched, pipelined writes over ``StoreBase`` (the concern modules build on it)."""

    def _deleted(self, outcome: WriteOutcome, path: str) -> bool:
        if outcome.code is ZkCode.OK:
            return True
        if outcome.code is ZkCode.NO_NODE:
            return False
        raise ZkOperationError(outcome.code, path, repr(outcome.error))

    def _delete_all(self, znode_paths: Sequence[str], expected: int) -> None:
        ops = [Op(DELETE, p) for p in dict.fromkeys(znode_paths)]
        for op, outcome in zip(ops, self._fenced_write(ops, expected), strict=True):
            if outcome.code not in (ZkCode.OK, ZkCode.NO_NODE):
                raise ZkOperationError(outcome.code, op.path, repr(outcome.error))

    def _delete_recursively(self, roots: Sequence[str], expected: int, attempts: int = 5) -> None:
        """Delete ``roots`` with their subtrees: list level by level (multi-read), then delete the
        deepest level first, one batch of fenced multis per level. A NOTEMPTY (a child created
        meanwhile) restarts from the listing; absent nodes count as deleted."""
        for _ in range(attempts):
            levels: list[list[str]] = []
            level = list(dict.fromkeys(roots))
            while level:
                levels.append(level)
                listed = self.reader.get_children(level, size_hint=1024)
                level = [
                    f"{parent}/{child}" for parent, r in zip(level, listed, strict=True) for child in (r.children or ())
                ]
            retry = False
            for level in reversed(levels):
                ops = [Op(DELETE, p) for p in level]
                for op, outcome in zip(ops, self._fenced_write(ops, expected), strict=True):
                    if outcome.code is ZkCode.NOT_EMPTY:
                        retry = True
                    elif outcome.code not in (ZkCode.OK, ZkCode.NO_NODE):
                        raise ZkOperationError(outcome.code, op.path, repr(outcome.error))
                if retry:
                    break
            if not retry:
                return
        raise ZkOperationError(ZkCode.NOT_EMPTY, ", ".join(roots), f"children kept appearing after {attempts} attempts")

    def _encode(self, op: Op) -> bytes:
        """One op of a multi as ZooKeeper's wire format (multi header + request)."""
        path = self._server_path(op.path).encode()
        head = PATH_HEADERS[op.kind] + INT.pack(len(path)) + path
        if op.kind == SET:
            return head + INT.pack(len(op.data)) + op.data + INT.pack(op.version)
        if op.kind == CREATE:
            flags = (1 if op.ephemeral else 0) | (2 if op.sequence else 0)
            return head + INT.pack(len(op.data)) + op.data + self._acl + INT.pack(flags)
        return head + INT.pack(op.version)

    def _multi_budget(self) -> int:
        """Bytes a multi's ops may take: ``max_multi_bytes`` less the epoch check and the framing."""
        return self.max_multi_bytes - 256 - len(self._check_prefix(0))

    def _check_sizes(self, ops: Sequence[Op]) -> None:
        """Raise ``ValueError`` for an op too big for one multi; exact sizes only for the doubtful ones."""
        budget = self._multi_budget()
        # An upper bound of the encoded size: 4 UTF-8 bytes per character of the (chrooted) path.
        fixed = 64 + len(self._acl) + 4 * len(self._server_path("/")) + TXN_SLACK
        for op in ops:
            if len(op.data) + 4 * len(op.path) + fixed > budget and len(self._encode(op)) + TXN_SLACK > budget:
                raise ValueError(f"a write to {op.path} of {len(op.data)} bytes cannot fit in one ZooKeeper request")

    def _encoded_chunks(self, ops: Sequence[Op], encoded: list[bytes]) -> Iterator[list[int]]:
        """Encode ``ops`` into ``encoded`` (by index) and yield multis' op indices as each one fills,
        so the first multi is on the wire while the later ops are still being encoded.

        A set (every state write of an election) is encoded inline, as ``_encode`` does, without
        the method call and its branches: this loop runs once per partition on the event thread."""
        budget = self._multi_budget()
        max_ops = self.max_ops_per_multi
        encode, server_path, pack, append = self._encode, self._server_path, INT.pack, encoded.append
        set_head, set_reply, replies = PATH_HEADERS[SET], REPLY_BYTES[SET], REPLY_BYTES
        current: list[int] = []
        request = reply = 0
        for i, op in enumerate(ops):
            kind = op.kind
            if kind == SET:
                path = server_path(op.path).encode()
                data = op.data
                blob = b"".join((set_head, pack(len(path)), path, pack(len(data)), data, pack(op.version)))
                rep = set_reply
            else:
                blob = encode(op)
                rep = replies[kind] + (len(blob) if kind == CREATE else 0)
            append(blob)
            req = len(blob) + TXN_SLACK
            if current and ((max_ops and len(current) >= max_ops) or request + req > budget or reply + rep > budget):
                yield current
                current, request, reply = [], 0, 0
            current.append(i)
            request += req
            reply += rep
        if current:
            yield current

    def _prepared_chunks(
        self, blobs: Sequence[bytes], reply_bytes: int, more: Iterator[object] | None = None
    ) -> Iterator[list[int]]:
        """``_encoded_chunks`` for ops their caller encoded already (``blobs``: each op's exact
        ``_encode`` bytes, every op of one kind whose reply takes ``reply_bytes``): only the split into
        multis is left per op, by the same rules (request and reply under the budget, at most
        ``max_ops_per_multi`` ops). ``more``, if given, appends the next block of ops to ``blobs`` at
        each step until it is exhausted: the first multis leave while the later ops are encoded."""
        budget = self._multi_budget()
        cap = budget // reply_bytes  # (n + 1) * reply_bytes > budget exactly when n >= cap
        if self.max_ops_per_multi:
            cap = min(cap, self.max_ops_per_multi)
        start = request = done = 0
        while True:
            for i, size in enumerate(map(len, islice(blobs, done, None)), done):
                req = size + TXN_SLACK
                if i > start and (i - start >= cap or request + req > budget):
                    yield list(range(start, i))
                    start, request = i, 0
                request += req
            done = len(blobs)
            if more is None or next(more, None) is None:
                break
        if len(blobs) > start:
            yield list(range(start, len(blobs)))

    def _streams_results(self) -> bool:
        """Whether ``_fenced_write_iter`` yields each outcome as its multi comes back: not in
        fault-injection runs (test pause points, the reliability history), which keep the whole
        batch's order and read every op once the batch is complete or fenced."""
        return not pause_points_enabled() and self._recorder is None

    def _check_prefix(self, expected: int) -> bytes:
        return self._encode(Op(CHECK, paths.CONTROLLER_EPOCH_PATH, version=expected))

    def _commit(self, encoded: Sequence[bytes], indices: Sequence[int], expected: int) -> Any:
        payload = b"".join([self._check_prefix(expected), *(encoded[i] for i in indices), DONE])
        c = self._counters
        c.multis += 1
        c.write_ops += len(indices)
        c.bytes_sent += len(payload)
        c.largest_multi_bytes = max(c.largest_multi_bytes, len(payload))
        pending = self._client.handler.async_result()
        self._client._call(PreparedMulti(payload, len(indices) + 1), pending)
        return pending

    def _fenced_write(self, ops: Sequence[Op], expected: int) -> list[WriteOutcome]:
        """Run independent ops in pipelined fenced multis; one outcome per op, in order.

        Raises ``ControllerMovedError`` when the epoch check fails (BADVERSION), ``ZkOperationError``
        when it fails otherwise (``/controller_epoch`` missing).
        """
        return [outcome for _, outcome in self._fenced_write_iter(ops, expected)]

    def _fenced_write_iter(
        self,
        ops: Sequence[Op],
        expected: int,
        prepared: tuple[list[bytes], int] | None = None,
        more: Iterator[object] | None = None,
    ) -> Iterator[tuple[int, WriteOutcome]]:
        """``_fenced_write`` as it happens: ``(index, outcome)`` for every op, in index order, each as
        soon as its multi has come back, so the caller's work on the first results overlaps
        ZooKeeper's on the rest (a 30,000-partition controlled shutdown spends ~0.25 s waiting).

        An op whose multi was replayed after a connection loss and conflicted is held back to the end
        (its conflict may be our own first attempt, ``_confirm_replayed_writes``). When the epoch check
        fails the iterator raises ``ControllerMovedError`` after the outcomes already yielded: those
        multis ran while this controller still held the epoch, so they stay true. With test pause
        points or the reliability history enabled every outcome is held until the batch is complete
        (``after_write`` then means "before any result is used").

        ``prepared`` is ``(blobs, reply_bytes)`` when the caller has encoded the ops in bulk already
        (``_prepared_chunks``: the state writes of an election) and checked their sizes; ``ops`` is then
        read only for what needs an op's path (an error, a replay's confirmation, the history).
        With ``more`` (``_prepared_chunks``) the blobs are encoded a block at a time as multis leave;
        the ops of a block are read only once it is encoded.
        """
        if isinstance(expected, bool) or not isinstance(expected, int) or expected < 0:
            raise ValueError(f"expected controller epoch zk version must be >= 0, got {expected!r}")
        if not ops:
            return
        pause_point("before_write", ops[0].path)  # test-only; a no-op unless CONTROLLER_PAUSE_DIR
        count = len(ops)
        outcomes: list[WriteOutcome | None] = [None] * count
        replay_conflicts: list[int] = []  # conflicts seen by a multi resubmitted after a connection loss
        held: set[int] = set()  # replay conflicts: not final until confirmed at the end
        # Fault-injection runs keep the whole-batch order: pause points mean "before any result is
        # used", and the reliability history records every op once the batch is complete.
        stream = self._streams_results()
        next_out = 0  # outcomes[:next_out] have been yielded
        encoded: list[bytes] = []
        if prepared is None:
            self._check_sizes(ops)  # before the first multi leaves: an op that cannot fit changes nothing
            fresh = self._encoded_chunks(ops, encoded)
        else:
            encoded = prepared[0]
            fresh = self._prepared_chunks(encoded, prepared[1], more)
        retries: deque[tuple[list[int], int]] = deque()  # split or resubmitted multis go first
        in_flight: deque[tuple[list[int], int, Any]] = deque()
        timeout_error = self._client.handler.timeout_exception
        ok, new = ZkCode.OK, tuple.__new__
        while True:
            while len(in_flight) < self.max_in_flight:
                if retries:
                    indices, drops = retries.popleft()
                else:
                    chunk = next(fresh, None)
                    if chunk is None:
                        break
                    indices, drops = chunk, 0
                in_flight.append((indices, drops, self._commit(encoded, indices, expected)))
            if not in_flight:
                break
            while stream and next_out < count and next_out not in held:
                outcome = outcomes[next_out]
                if outcome is None:
                    break
                yield next_out, outcome  # the caller works while ZooKeeper has multis in flight
                next_out += 1
            indices, drops, pending = in_flight.popleft()
            try:
                results = pending.get(timeout=self.timeout)
            except (ConnectionLoss, ConnectionClosedError) as exc:
                if drops == 0 and isinstance(exc, ConnectionLoss):
                    self._counters.connection_retries += 1
                    retries.appendleft((indices, 1))
                else:
                    for i in indices:
                        outcomes[i] = WriteOutcome(ZkCode.CONNECTION_LOSS, None, exc)
                continue
            except (SessionExpiredError, timeout_error) as exc:
                code = ZkCode.SESSION_EXPIRED if isinstance(exc, SessionExpiredError) else ZkCode.CONNECTION_LOSS
                for i in indices:
                    outcomes[i] = WriteOutcome(code, None, exc)
                continue
            check = results[0]
            if not isinstance(check, Exception):
                for i, result in zip(indices, results[1:], strict=True):
                    outcomes[i] = new(WriteOutcome, (ok, result, None))  # WriteOutcome(ZkCode.OK, result)
                continue
            if isinstance(check, BadVersionError):
                if self._recorder is not None:
                    self._record_writes(ops, outcomes, expected, fenced=indices)
                raise ControllerMovedError(
                    f"controller epoch zkVersion check failed (expected version {expected} of "
                    f"{paths.CONTROLLER_EPOCH_PATH}): another controller has been elected"
                )
            if not isinstance(check, RolledBackError):
                raise ZkOperationError(zk_code(check), paths.CONTROLLER_EPOCH_PATH, "controller epoch check failed")
            # The check passed; exactly one op failed and the rest were rolled back or not evaluated.
            position = next(
                (
                    k
                    for k in range(1, len(results))
                    if isinstance(results[k], Exception)
                    and not isinstance(results[k], RolledBackError | RuntimeInconsistency)
                ),
                None,
            )
            if position is None:
                raise ZkOperationError(ZkCode.OTHER, paths.CONTROLLER_EPOCH_PATH, f"unexpected multi reply {results!r}")
            failed = indices[position - 1]
            error = results[position]
            outcomes[failed] = WriteOutcome(zk_code(error), None, error)
            self._counters.failed_ops += 1
            if drops and isinstance(error, BadVersionError | NodeExistsError):
                replay_conflicts.append(failed)
                held.add(failed)
            rest = indices[: position - 1] + indices[position:]
            if rest:
                self._counters.split_retries += 1
                half = (len(rest) + 1) // 2
                # Halves: the ops before the failure are known to pass, so the first half usually
                # succeeds whole; further failures are isolated in logarithmically many rounds.
                if half < len(rest):
                    retries.appendleft((rest[half:], drops))
                retries.appendleft((rest[:half], drops))
        if replay_conflicts:
            self._confirm_replayed_writes(ops, outcomes, replay_conflicts)
        if self._recorder is not None:
            self._record_writes(ops, outcomes, expected)
        pause_point("after_write", ops[0].path)
        for i in range(next_out, count):
            yield i, outcomes[i] or WriteOutcome(ZkCode.OTHER)

    # -- reliability history (off unless RELIABILITY_HISTORY_DIR is set) ---------------------------

    def _record_writes(
        self,
        ops: Sequence[Op],
        outcomes: Sequence[WriteOutcome | None],
        expected: int,
        fenced: Sequence[int] = (),
    ) -> None:
        """One history line per op that got an answer (and per op of a multi the epoch check fenced)."""
        assert self._recorder is not None
        names = {CREATE: "create", DELETE: "delete", SET: "set"}
        fenced_set = set(fenced)
        for i, op in enumerate(ops):
            outcome = outcomes[i]
            if outcome is None and i not in fenced_set:
                continue
            stat = outcome.result if outcome is not None and isinstance(outcome.result, ZnodeStat) else None
            data: str | None = None
            if op.kind != DELETE and op.path.endswith("/state") and len(op.data) < 4096:
                data = op.data.decode(errors="replace")
            self._recorder.record(
                op=names.get(op.kind, str(op.kind)),
                path=op.path,
                epoch_zk_version=expected,
                version=op.version,
                result="FENCED" if outcome is None else outcome.code.name,
                mzxid=None if stat is None else stat.mzxid,
                new_version=None if stat is None else stat.version,
                data=data,
            )

    def _confirm_replayed_writes(
        self, ops: Sequence[Op], outcomes: list[WriteOutcome | None], conflicts: Sequence[int]
    ) -> None:
        """Turn the conflicts of replayed multis that our own first attempt caused into successes.

        A multi resubmitted after a connection loss may have been applied the first time; its set then
        fails with BADVERSION (its create with NODEEXISTS) against our own write. When the znode holds
        exactly our bytes (at the version our set would have produced), that write did happen: report
        it as OK with the znode's stat, so the caller does not redo (and re-bump) it. Anything else
        stays a conflict. Reads are best effort: on a failure the conflicts are reported as they are.
        """
        try:
            reads = self.reader.get_data([ops[i].path for i in conflicts], size_hint=256)
        except Exception:
            logger.info("could not check %d replayed writes; reporting them as conflicts", len(conflicts))
            return
        for i, read in zip(conflicts, reads, strict=True):
            op = ops[i]
            if read.error is not None or read.data != op.data:
                continue
            if op.kind == SET and read.stat.version == op.version + 1:
                outcomes[i] = WriteOutcome(ZkCode.OK, read.stat)
            elif op.kind == CREATE and not op.sequence:
                outcomes[i] = WriteOutcome(ZkCode.OK, op.path)
            else:
                continue
            self._counters.failed_ops -= 1


WRITE_STREAM_SWITCH_S: float = int(os.environ.get("CONTROLLER_WRITE_SWITCH_US", "500")) / 1e6
"""The interpreter's thread switch interval while an election's state writes stream (0: Python's own,
5 ms). The event thread works each slice of results as its multis come back while kazoo's connection
thread waits for the interpreter lock to read the next replies and send the next multis: with 5 ms
it waits up to 5 ms a hand-over, with ZooKeeper idle meanwhile."""


@contextmanager
def write_stream_switch() -> Iterator[None]:
    """``WRITE_STREAM_SWITCH_S`` as the process's switch interval for the block, then the previous
    one back; nothing when it is 0 or the interval is already as short (a test's)."""
    interval = WRITE_STREAM_SWITCH_S
    before = sys.getswitchinterval()
    if interval <= 0 or before <= interval:
        yield
        return
    sys.setswitchinterval(interval)
    try:
        yield
    finally:
        sys.setswitchinterval(before)
