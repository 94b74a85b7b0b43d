"""The reassignment and action-attribution tables of ``actions``, in Python, from the walk's rows.

Twins of the Spark functions of the same names in ``workers.analytics.actions`` (same rows, same
columns): reassignments paired from their start and end records, the exported audit actions read
back, and each reassignment or election attributed to the operator action that asked for it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from workers.analytics import actions as A
from workers.analytics import records as R
from workers.analytics.metrics import AUDIT_PREFIX
from workers.analytics.small.events import Record, json_lines, rare
from workers.analytics.small.folds import group_by, sql_first, sql_max, sql_min, sql_minus
from workers.analytics.small.walk import by_time, coalesce, key_of
from workers.analytics.transforms import ReportWindow

# --- 8. reassignments ---------------------------------------------------------------------------------------

_MOVE = (
    "cluster",
    "topic",
    "partition",
    "ts",
    "epoch",
    "seq",
    "phase",
    "action_id",
    "origin_replicas",
    "target_replicas",
)


def reassignment_rows(special: Sequence[Record], seeds: Sequence[Record]) -> list[Record]:
    rows = [
        {c: e[c] for c in _MOVE}
        for e in rare(special, R.KIND_REASSIGNMENT)
        if e["topic"] is not None and e["partition"] is not None and e["phase"] is not None
    ]
    rows += [
        {
            "cluster": s["cluster"],
            "topic": s["topic"],
            "partition": s["partition"],
            "ts": s["started_ms"],
            "epoch": -1,
            "seq": -1,
            "phase": R.PHASE_STARTED,
            "action_id": s["action_id"],
            "origin_replicas": s["origin_replicas"],
            "target_replicas": s["target_replicas"],
        }
        for s in seeds
    ]
    return rows


def reassignments(rows: Sequence[Record]) -> list[Record]:
    out = []
    for group in group_by(rows, key_of).values():
        ordered = sorted(group, key=by_time)
        for i, row in enumerate(ordered):
            if row["phase"] != R.PHASE_STARTED:
                continue
            following = ordered[i + 1] if i + 1 < len(ordered) else None
            next_phase = None if following is None else following["phase"]
            if next_phase in (R.PHASE_COMPLETED, R.PHASE_CANCELLED):
                status = next_phase
            elif next_phase == R.PHASE_STARTED:
                status = "superseded"
            elif next_phase is None:
                status = "in_progress"
            else:
                status = f"unknown:{next_phase}"
            ended = following["ts"] if following is not None and status != "in_progress" else None
            out.append(
                {
                    "cluster": row["cluster"],
                    "topic": row["topic"],
                    "partition": row["partition"],
                    "action_id": row["action_id"],
                    "started_ms": row["ts"],
                    "status": status,
                    "origin_replicas": row["origin_replicas"],
                    "target_replicas": row["target_replicas"],
                    "ended_ms": ended,
                    "duration_ms": sql_minus(ended, row["ts"]),
                }
            )
    return out


def reassignment_actions(moves: Sequence[Record]) -> list[Record]:
    def action_key(m: Record) -> tuple[str, str | None]:
        audit = m["audit_action_id"]
        return (m["cluster"], f"{AUDIT_PREFIX}{audit}" if audit is not None else m["action_id"])

    out = []
    for (cluster, action_id), rows in group_by(moves, action_key).items():
        in_progress = sum(1 for r in rows if r["status"] == "in_progress")
        started = sql_min(r["started_ms"] for r in rows)
        ended = sql_max(r["ended_ms"] for r in rows) if in_progress == 0 else None
        requested = sql_first(r["requested_ms"] for r in rows)
        out.append(
            {
                "cluster": cluster,
                "action_id": action_id,
                "audit_action_id": sql_first(r["audit_action_id"] for r in rows),
                "requested_by": sql_first(r["requested_by"] for r in rows),
                "requested_ms": requested,
                "requested_partitions": sql_first(r["requested_partitions"] for r in rows),
                "partitions": len(rows),
                "completed": sum(1 for r in rows if r["status"] == R.PHASE_COMPLETED),
                "cancelled": sum(1 for r in rows if r["status"] == R.PHASE_CANCELLED),
                "in_progress": in_progress,
                "started_ms": started,
                "topics": sorted({r["topic"] for r in rows if r["topic"] is not None}),
                "ended_ms": ended,
                "duration_ms": sql_minus(ended, started),
                "start_delay_ms": sql_minus(started, requested),
                "request_to_end_ms": sql_minus(ended, requested),
            }
        )
    return out


# --- the operator actions (actions.py) ------------------------------------------------------------------------


def read_actions(actions_dir: Path | None, clusters: Sequence[str]) -> list[Record]:
    """``actions.read_actions``: the exported actions (lines without an id are dropped)."""
    actions = map(_action, json_lines(A.action_files(actions_dir, clusters)))  # a line not JSON gives None
    return [action for action in actions if action is not None]


def _action(raw: Any) -> Record | None:
    if not isinstance(raw, dict):
        return None

    def integer(name: str) -> int | None:
        v = raw.get(name)
        return v if isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 else None

    def double(name: str) -> float | None:
        v = raw.get(name)
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None

    def string(name: str) -> str | None:
        v = raw.get(name)
        return v if isinstance(v, str) or v is None else json.dumps(v, separators=(",", ":"))

    if integer("id") is None:
        return None
    partitions = raw.get("partitions")
    parts: list[Record | None] | None = None
    if isinstance(partitions, list):
        parts = []
        for p in partitions:
            if not isinstance(p, dict):
                parts.append(None)
                continue
            number = p.get("partition")
            parts.append(
                {
                    "topic": p.get("topic") if isinstance(p.get("topic"), str) else None,
                    "partition": number
                    if isinstance(number, int) and not isinstance(number, bool) and -(2**31) <= number < 2**31
                    else None,
                }
            )
    return {
        "id": integer("id"),
        "cluster": string("cluster"),
        "kind": string("kind"),
        "status": string("status"),
        "username": string("username"),
        "created_ms": double("created_ms"),
        "started_ms": double("started_ms"),
        "finished_ms": double("finished_ms"),
        "partitions": parts,
    }


def action_partitions(actions: Sequence[Record], kind: str) -> list[Record]:
    """``actions.action_partitions``: one row per (submitted action of ``kind``, partition it names)."""
    out = []
    for a in actions:
        if a["kind"] != kind or a["status"] is None or a["status"] in A.NOT_SUBMITTED:
            continue
        finished = coalesce(a["finished_ms"], a["started_ms"], a["created_ms"])
        created = a["created_ms"]
        for p in a["partitions"] or []:
            out.append(
                {
                    "cluster": a["cluster"],
                    "audit_action_id": a["id"],
                    "requested_by": a["username"],
                    "requested_ms": created,
                    "_from_ms": None if created is None else created - A.CLOCK_SKEW_MS,
                    "_to_ms": None if finished is None else finished + A.START_WITHIN_MS,
                    "requested_partitions": len(a["partitions"]),
                    "topic": None if p is None else p["topic"],
                    "partition": None if p is None else p["partition"],
                }
            )
    return out


def _desc_nulls_last(value: Any) -> tuple[int, Any]:
    return (1, 0) if value is None else (0, -value)


def _attribute(
    facts: Sequence[Record], candidates: Sequence[Record], time_column: str, key: Sequence[str]
) -> list[Record]:
    """``actions._attribute``: each fact with the latest candidate whose bounds hold its time."""
    out: dict[tuple[Any, ...], Record] = {}
    for f in facts:
        at = f[time_column]
        found = [
            a
            for a in candidates
            if a["cluster"] == f["cluster"]
            and a["topic"] is not None
            and a["topic"] == f["topic"]
            and a["partition"] is not None
            and a["partition"] == f["partition"]
            and at is not None
            and a["_from_ms"] is not None
            and a["_to_ms"] is not None
            and a["_from_ms"] <= at <= a["_to_ms"]
        ]
        best = min(
            found,
            key=lambda a: (_desc_nulls_last(a["requested_ms"]), _desc_nulls_last(a["audit_action_id"])),
            default=None,
        )
        row = {
            **f,
            "audit_action_id": None if best is None else best["audit_action_id"],
            "requested_by": None if best is None else best["requested_by"],
            "requested_ms": None if best is None else best["requested_ms"],
            "requested_partitions": None if best is None else best["requested_partitions"],
        }
        out.setdefault(tuple(f[k] for k in key), row)  # row_number() == 1 per key
    return list(out.values())


def attribute_reassignments(moves: Sequence[Record], actions: Sequence[Record]) -> list[Record]:
    candidates = action_partitions(actions, A.KIND_REASSIGNMENT)
    rows = _attribute(moves, candidates, "started_ms", ("cluster", "topic", "partition", "started_ms"))
    for row in rows:
        row["start_delay_ms"] = sql_minus(row["started_ms"], row["requested_ms"])
    return rows


def election_actions(special: Sequence[Record], actions: Sequence[Record], window: ReportWindow) -> list[Record]:
    """``actions.election_actions`` of the preferred elections, for actions requested in the window."""
    elections = [e for e in rare(special, R.KIND_ELECTION) if e["strategy"] == A.STRATEGY_PREFERRED]
    candidates = action_partitions(actions, A.KIND_PREFERRED_ELECTION)
    attributed = _attribute(elections, candidates, "ts", ("cluster", "topic", "partition", "ts", "epoch", "seq"))
    per_action = group_by(
        (a for a in attributed if a["audit_action_id"] is not None), lambda a: (a["cluster"], a["audit_action_id"])
    )
    asked = group_by(candidates, lambda c: (c["cluster"], c["audit_action_id"], c["requested_by"], c["requested_ms"]))
    out = []
    for (cluster, action_id, requested_by, requested_ms), rows in asked.items():
        if requested_ms is None or not window.counted_from_ms <= requested_ms < window.end_ms:
            continue
        elected = per_action.get((cluster, action_id), []) if cluster is not None and action_id is not None else []
        first = sql_min(e["ts"] for e in elected)
        last = sql_max(e["ts"] for e in elected)
        out.append(
            {
                "cluster": cluster,
                "audit_action_id": action_id,
                "requested_by": requested_by,
                "requested_ms": requested_ms,
                "requested_partitions": len(rows),
                "elected": len(
                    {
                        (e["topic"], e["partition"])
                        for e in elected
                        if e["topic"] is not None and e["partition"] is not None
                    }
                ),
                "first_election_ms": first,
                "last_election_ms": last,
                "first_delay_ms": sql_minus(first, requested_ms),
                "last_delay_ms": sql_minus(last, requested_ms),
            }
        )
    return out
