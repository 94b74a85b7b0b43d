"""Export the audit table (operator actions) as daily JSON lines: the job's second input.

The Spark job must not need a database (on a cluster its executors have none), so the actions it
matches against the controller's records are exported first, in the same shape as the
state-change files: ``<out>/<cluster>/actions-YYYY-MM-DD.jsonl``, one file per cluster and UTC day
of the action's creation, one JSON object per line (see :data:`workers.analytics.actions.ACTION_SCHEMA`).

A day's file is rewritten whole (written aside, then renamed), so an export is idempotent and a
reader never sees half a file; days from ``since`` on that no longer have actions (retention
cleanup) lose their file. Actions without a cluster (logins, user changes) are not exported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from pathlib import Path
from typing import Any

from django.conf import settings

from dashboard.audit.models import Action
from dashboard.lib.env import env_str

FILE_PREFIX = "actions-"
FILE_SUFFIX = ".jsonl"


def default_audit_dir() -> Path:
    """``ANALYTICS_AUDIT_DIR`` (Django setting, else environment), default ``<VAR_DIR>/analytics/audit``.

    Lives here, not in ``workers``, because the web process (this command) may not import workers.
    """
    configured = getattr(settings, "ANALYTICS_AUDIT_DIR", None) or env_str(
        "ANALYTICS_AUDIT_DIR", str(Path(settings.VAR_DIR) / "analytics" / "audit")
    )
    return Path(str(configured))


def file_name_for(day: date) -> str:
    return f"{FILE_PREFIX}{day.isoformat()}{FILE_SUFFIX}"


def day_of_file_name(name: str) -> date | None:
    if not (name.startswith(FILE_PREFIX) and name.endswith(FILE_SUFFIX)):
        return None
    try:
        return date.fromisoformat(name[len(FILE_PREFIX) : -len(FILE_SUFFIX)])
    except ValueError:
        return None


@dataclass(slots=True)
class ExportResult:
    actions: int = 0
    files: int = 0
    removed_files: int = 0
    clusters: list[str] = field(default_factory=list)

    def describe(self) -> str:
        return (
            f"exported {self.actions:,} action(s) of {len(self.clusters)} cluster(s) into {self.files} daily file(s)"
            + (f", removed {self.removed_files} emptied day file(s)" if self.removed_files else "")
        )


def _ms(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp() * 1000.0


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    return None


def action_partitions(action: Action) -> list[dict[str, Any]]:
    """The partitions an action was about, as ``{"topic", "partition", "replicas"}``.

    Reassignments list them in ``parameters["partitions"]`` (with the requested replicas); a
    preferred election's preview lists the partitions it submitted (``electable``); other kinds name
    at most one partition in their parameters.
    """
    params = action.parameters if isinstance(action.parameters, dict) else {}
    preview = action.preview if isinstance(action.preview, dict) else {}
    raw: Iterable[Any]
    if isinstance(params.get("partitions"), list):
        raw = params["partitions"]
    elif action.kind == Action.Kind.PREFERRED_ELECTION and isinstance(preview.get("electable"), list):
        raw = preview["electable"]
    else:
        raw = [params]
    out: list[dict[str, Any]] = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        topic, partition = item.get("topic"), _int(item.get("partition"))
        if not isinstance(topic, str) or not topic or partition is None:
            continue
        replicas = item.get("replicas")
        out.append(
            {
                "topic": topic,
                "partition": partition,
                "replicas": [r for r in (_int(x) for x in replicas) if r is not None]
                if isinstance(replicas, list)
                else None,
            }
        )
    return out


def action_line(action: Action) -> dict[str, Any]:
    """One exported action (the fields the job reads, plus what an analyst needs to find it)."""
    return {
        "id": action.pk,
        "cluster": action.cluster,
        "kind": action.kind,
        "status": action.status,
        "username": action.username,
        "created_ms": _ms(action.created),
        "started_ms": _ms(action.started),
        "finished_ms": _ms(action.finished),
        "duration_ms": action.duration_ms,
        "controller_epoch": action.controller_epoch,
        "reason": action.reason,
        "partitions": action_partitions(action),
        "parameters": json.dumps(action.parameters, sort_keys=True, default=str),
    }


def _actions(since: date | None, clusters: Sequence[str]) -> Iterator[Action]:
    qs = Action.objects.exclude(cluster="")
    if since is not None:
        qs = qs.filter(created__gte=datetime.combine(since, time.min, tzinfo=UTC))
    if clusters:
        qs = qs.filter(cluster__in=list(clusters))
    return qs.order_by("cluster", "created", "id").iterator(chunk_size=2000)


def _write(path: Path, lines: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.writelines(lines)
        fh.flush()
        os.fsync(fh.fileno())
    tmp.replace(path)


def export_actions(out_dir: Path, since: date | None = None, clusters: Sequence[str] = ()) -> ExportResult:
    """Write every action created on or after ``since`` (all when None) as daily files under ``out_dir``."""
    for name in clusters:
        if not name or "/" in name or name.startswith((".", "_")):
            raise ValueError(f"{name!r} is not a cluster name")
    result = ExportResult()
    written: set[Path] = set()
    current: tuple[str, date] | None = None
    lines: list[str] = []

    def flush() -> None:
        if current is None or not lines:
            return
        path = out_dir / current[0] / file_name_for(current[1])
        _write(path, lines)
        written.add(path)
        result.files += 1

    for action in _actions(since, clusters):
        key = (action.cluster, action.created.astimezone(UTC).date())
        if key != current:
            flush()
            current, lines = key, []
            if action.cluster not in result.clusters:
                result.clusters.append(action.cluster)
        lines.append(json.dumps(action_line(action), separators=(",", ":"), default=str) + "\n")
        result.actions += 1
    flush()
    # Days in the exported range whose actions are gone (retention) must not keep an old file.
    roots = [out_dir / c for c in clusters] if clusters else [p for p in out_dir.iterdir() if p.is_dir()]
    for root in roots if out_dir.is_dir() else []:
        if not root.is_dir():
            continue
        for path in root.iterdir():
            day = day_of_file_name(path.name)
            if day is None or path in written or (since is not None and day < since):
                continue
            path.unlink()
            result.removed_files += 1
    return result
