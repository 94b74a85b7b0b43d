"""An optional history of what a process wrote and decided, as JSON lines (for the reliability checker).

Why: the fault-injection suite (``scripts/reliability``) checks safety from the *histories* the real
processes leave behind, the way Jepsen does: every fenced ZooKeeper write the controller made (with
its fencing version, result and ZooKeeper's ``mzxid``), every election it won, every control request
a broker accepted or rejected. Nothing is sampled and nothing is inferred from logs.

It is off unless ``RELIABILITY_HISTORY_DIR`` names a directory; then each process appends to its own
``<role>-<pid>.jsonl`` there. Each record is one ``os.write`` of one line to a file opened with
``O_APPEND``, so a SIGKILL loses at most the record being written and never interleaves lines.
When off, callers hold ``None`` and pay one ``is not None`` test per write.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

#: Directory receiving the histories; unset means no history is kept.
HISTORY_DIR_ENV = "RELIABILITY_HISTORY_DIR"


class HistoryRecorder:
    """Appends one JSON object per line, stamped with ``t_mono``, ``t_wall``, ``pid`` and ``role``.

    Example::

        recorder = HistoryRecorder(Path("/tmp/history/controller-1.jsonl"), role="controller", node=1)
        recorder.record(op="set", path="/controller_epoch", result="OK")
    """

    def __init__(self, path: Path, *, role: str, node: int | None = None) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.role = role
        self.node = node
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self._lock = threading.Lock()

    @classmethod
    def from_env(cls, role: str, node: int | None = None) -> HistoryRecorder | None:
        """A recorder writing under ``$RELIABILITY_HISTORY_DIR``, or None when that is unset."""
        directory = os.environ.get(HISTORY_DIR_ENV)
        if not directory:
            return None
        name = f"{role}-{node if node is not None else 'x'}-{os.getpid()}.jsonl"
        return cls(Path(directory) / name, role=role, node=node)

    def record(self, **fields: Any) -> None:
        entry = {"t_mono": time.monotonic(), "t_wall": time.time(), "pid": os.getpid(), "role": self.role}
        if self.node is not None:
            entry["node"] = self.node
        entry.update(fields)
        line = (json.dumps(entry, separators=(",", ":"), default=str) + "\n").encode()
        with self._lock:
            if self._fd >= 0:
                os.write(self._fd, line)

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


_process_recorders: dict[str, HistoryRecorder] = {}
_process_recorder_lock = threading.Lock()


def process_recorder() -> HistoryRecorder | None:
    """This process's shared recorder, or None when ``RELIABILITY_HISTORY_DIR`` is unset.

    The role and node id come from ``RELIABILITY_ROLE`` (default ``zk``) and ``RELIABILITY_NODE``,
    which the harness sets for each process it starts; every store of the process shares one file.
    """
    directory = os.environ.get(HISTORY_DIR_ENV)
    if not directory:
        return None
    with _process_recorder_lock:
        recorder = _process_recorders.get(directory)
        if recorder is None:
            node = os.environ.get("RELIABILITY_NODE")
            role = os.environ.get("RELIABILITY_ROLE", "zk")
            recorder = HistoryRecorder.from_env(role, int(node) if node and node.isdigit() else None)
            assert recorder is not None
            _process_recorders[directory] = recorder
        return recorder
