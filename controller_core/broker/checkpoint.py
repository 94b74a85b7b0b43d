"""The broker's log checkpoint: every log's offsets and epochs in one JSON file in the data directory.

Why: a real broker restarts with its logs, so after ``kill -9`` and a restart it only has to catch
up on what it missed (and truncate what was never committed), not copy everything again. Our logs
are offsets only, so a checkpoint of offsets *is* the log. It plays the part of Kafka's
recovery-point and high-watermark checkpoint files: written periodically and on clean shutdown,
atomically (write a temporary file, then rename), so a crash leaves the previous checkpoint intact
and a restarted broker resumes from a slightly older log, which replication repairs.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from controller_core.broker.log import ReplicaLog
from controller_core.model import TopicPartition

CHECKPOINT_FILE = "log-checkpoint.json"
CHECKPOINT_VERSION = 1


def save_logs(data_dir: Path, broker_id: int, logs: Mapping[TopicPartition, ReplicaLog]) -> Path:
    """Write every log's state atomically; return the file written."""
    data_dir.mkdir(parents=True, exist_ok=True)
    target = data_dir / CHECKPOINT_FILE
    body: dict[str, Any] = {
        "version": CHECKPOINT_VERSION,
        "broker_id": broker_id,
        "logs": [{"topic": tp.topic, "partition": tp.partition, **log.to_dict()} for tp, log in sorted(logs.items())],
    }
    tmp = target.with_suffix(".tmp")
    with open(tmp, "w", encoding="utf-8") as out:
        json.dump(body, out, separators=(",", ":"))
        out.flush()
        os.fsync(out.fileno())
    os.replace(tmp, target)
    return target


def load_logs(data_dir: Path, broker_id: int) -> dict[TopicPartition, ReplicaLog]:
    """Read the checkpoint (no file: no logs). ``ValueError`` on a file that is not ours or not valid."""
    source = data_dir / CHECKPOINT_FILE
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        body = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{source}: not JSON ({exc})") from None
    if not isinstance(body, dict) or body.get("version") != CHECKPOINT_VERSION:
        raise ValueError(f"{source}: not a version-{CHECKPOINT_VERSION} log checkpoint")
    if body.get("broker_id") != broker_id:
        raise ValueError(f"{source} belongs to broker {body.get('broker_id')}, not {broker_id}")
    logs: dict[TopicPartition, ReplicaLog] = {}
    for entry in body.get("logs", []):
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"{source}: bad log entry {entry!r} ({exc})") from None
        try:
            logs[tp] = ReplicaLog.from_dict(entry)
        except ValueError as exc:
            raise ValueError(f"{source}: {tp}: {exc}") from None
    return logs
