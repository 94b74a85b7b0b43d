"""ZooKeeper's jute framing shared by the two requests this package serializes itself.

Why: the multi-read (``multiread``, OpCode 22) and the fenced multi (``store.wire``, OpCode 14) are
both built as bytes on the caller's thread and handed to kazoo as they are, and both speak the same
multi framing (op header, length-prefixed strings, the 68-byte stat, the "done" trailer). The
framing and the request shape kazoo's connection expects are defined here once.
"""

from __future__ import annotations

import struct
from typing import Any, ClassVar, Final

INT: Final = struct.Struct("!i")
MULTI_HEADER: Final = struct.Struct("!iBi")  # op type, done flag, error code
STAT: Final = struct.Struct("!qqqqiiiqiiq")  # czxid, mzxid, ctime, mtime, version, cversion, ...
STAT_BYTES: Final = STAT.size  # 68
DONE: Final = MULTI_HEADER.pack(-1, 1, -1)
ERROR_OPCODE: Final = -1  # a multi reply's per-op error result


class PreparedRequest:
    """A request serialized before kazoo sees it: ``serialize`` hands over the prepared bytes.

    kazoo calls ``serialize()`` on its connection thread and ``deserialize()`` with the reply
    packet; keeping the first trivial keeps that thread free for pings and other traffic.
    Subclasses set ``type`` (the opcode), ``label`` (for kazoo's DEBUG log) and ``deserialize``.
    """

    type: ClassVar[int]
    label: ClassVar[str]
    __slots__ = ("count", "payload")

    def __init__(self, payload: bytes, count: int) -> None:
        self.payload = payload
        self.count = count

    def serialize(self) -> bytes:
        return self.payload

    def deserialize(self, buffer: bytes, offset: int) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:  # kazoo logs requests at DEBUG: keep it one short line
        return f"{self.label}({self.count} ops, {len(self.payload)} bytes)"
