"""The result tables of ``metrics`` and ``actions``, in Python, from the walk's rows.

Each function is the twin of the Spark function of the same name (same rows, same columns). Day
columns stay epoch days and minutes epoch minutes here; ``state.write_table`` converts them on
output as ``transforms.with_dates``/``minute_timestamps`` do.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from workers.analytics import actions as A
from workers.analytics import records as R
from workers.analytics.metrics import AUDIT_PREFIX
from workers.analytics.small.events import Record, day_of, rare
from workers.analytics.small.walk import Key, asc, by_time, coalesce, key_of, non_negative
from workers.analytics.transforms import DAY_MS, MINUTE_MS, ReportWindow


def _in_window(ts: float | None, window: ReportWindow) -> bool:
    return ts is not None and window.counted_from_ms <= ts < window.end_ms


def _sum(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _min(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _max(values: Iterable[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _first(values: Iterable[Any]) -> Any:
    return next((v for v in values if v is not None), None)


def _minus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a - b


# --- 4. unavailability per day -------------------------------------------------------------------------


def outage_facts(intervals: Sequence[Record], window: ReportWindow) -> list[Record]:
    """``metrics.outage_facts``."""
    counted = float(window.counted_from_ms)
    effective = float(window.effective_end_ms)
    facts: list[Record] = []

    def fact(i: Record, day: int, leaderless: float, outages: int, recoveries: int, recovery: float | None) -> None:
        facts.append(
            {
                "cluster": i["cluster"],
                "topic": i["topic"],
                "partition": i["partition"],
                "cause_broker": i["cause_broker"],
                "day": day,
                "leaderless_ms": leaderless,
                "outages": outages,
                "recoveries": recoveries,
                "recovery_ms": recovery,
            }
        )

    for i in intervals:
        start = i["outage_start_ms"]
        lower = counted if i["start_ms"] < counted else float(window.start_ms)
        clip_start = max(start, lower)
        end = i["end_ms"]
        clip_end = min(end if end is not None else effective, effective)
        if clip_end > clip_start:
            for day in range(day_of(clip_start), day_of(clip_end - 0.001) + 1):
                leaderless = min(clip_end, (day + 1) * DAY_MS) - max(clip_start, day * DAY_MS)
                fact(i, day, float(leaderless), 0, 0, 0.0)
    for i in intervals:
        start = i["outage_start_ms"]
        if window.start_ms <= start < window.end_ms and i["start_ms"] >= counted:
            fact(i, day_of(start), 0.0, 1, 0, 0.0)
    for i in intervals:
        if _in_window(i["end_ms"], window) and i["end_reason"] == "elected":
            fact(i, day_of(i["end_ms"]), 0.0, 0, 1, i["outage_ms"])
    return facts


def _outage_aggregates(rows: Sequence[Record]) -> Record:
    recoveries = sum(r["recoveries"] for r in rows)
    recovery_ms = _sum(r["recovery_ms"] for r in rows)
    return {
        "outages": sum(r["outages"] for r in rows),
        "recoveries": recoveries,
        "leaderless_ms": _sum(r["leaderless_ms"] for r in rows),
        "recovery_ms": recovery_ms,
        "mttr_ms": recovery_ms / recoveries if recoveries > 0 and recovery_ms is not None else None,
    }


def _group(rows: Iterable[Record], key: Any) -> dict[Any, list[Record]]:
    groups: dict[Any, list[Record]] = defaultdict(list)
    for row in rows:
        groups[key(row)].append(row)
    return groups


def partition_daily(facts: Sequence[Record]) -> list[Record]:
    groups = _group(facts, lambda f: (*key_of(f), f["day"]))
    return [
        {"cluster": k[0], "topic": k[1], "partition": k[2], "day": k[3], **_outage_aggregates(rows)}
        for k, rows in groups.items()
    ]


def broker_daily(facts: Sequence[Record]) -> list[Record]:
    groups = _group(facts, lambda f: (f["cluster"], f["cause_broker"], f["day"]))
    return [{"cluster": k[0], "broker": k[1], "day": k[2], **_outage_aggregates(rows)} for k, rows in groups.items()]


def topic_daily(facts: Sequence[Record], inventory: Sequence[Key], window: ReportWindow) -> list[Record]:
    """``metrics.topic_daily``: every known topic, every day of the window that has covered time."""
    partitions: dict[tuple[str, str | None], int] = defaultdict(int)
    for cluster, topic, _ in inventory:
        partitions[(cluster, topic)] += 1
    stats = _group(facts, lambda f: (f["cluster"], f["topic"], f["day"]))
    out = []
    for (cluster, topic), count in partitions.items():
        for day in range(window.start_day, window.end_day + 1):
            start_of_day = day * DAY_MS
            covered = min(start_of_day + DAY_MS, window.effective_end_ms) - max(start_of_day, window.start_ms)
            if covered <= 0:
                continue
            rows = stats.get((cluster, topic, day), []) if topic is not None else []
            agg = _outage_aggregates(rows) if rows else None
            leaderless = agg["leaderless_ms"] if agg and agg["leaderless_ms"] is not None else 0.0
            recovery = agg["recovery_ms"] if agg and agg["recovery_ms"] is not None else 0.0
            recoveries = agg["recoveries"] if agg else 0
            out.append(
                {
                    "cluster": cluster,
                    "topic": topic,
                    "day": day,
                    "partitions": count,
                    "outages": agg["outages"] if agg else 0,
                    "recoveries": recoveries,
                    "leaderless_ms": leaderless,
                    "recovery_ms": recovery,
                    "covered_ms": covered,
                    "availability": max(0.0, 1.0 - leaderless / (count * covered)),
                    "mttr_ms": recovery / recoveries if recoveries > 0 else None,
                }
            )
    return out


# --- 5. elections --------------------------------------------------------------------------------------


def elections_daily(special: Sequence[Record], window: ReportWindow) -> list[Record]:
    elections = [e for e in rare(special, R.KIND_ELECTION) if _in_window(e["ts"], window)]
    groups = _group(
        elections,
        lambda e: (e["cluster"], e["day"], coalesce(e["strategy"], "unknown"), coalesce(e["cause"], "unknown")),
    )
    return [
        {
            "cluster": k[0],
            "day": k[1],
            "strategy": k[2],
            "cause": k[3],
            "elections": len(rows),
            "unclean": sum(1 for r in rows if r["unclean"]),
        }
        for k, rows in groups.items()
    ]


UNCLEAN_COLUMNS = (
    "cluster",
    "ts",
    "day",
    "epoch",
    "topic",
    "partition",
    "strategy",
    "cause",
    "leader_before",
    "leader_after",
    "isr_before",
    "isr_after",
)


def unclean_elections(special: Sequence[Record], window: ReportWindow) -> list[Record]:
    return [
        {c: e[c] for c in UNCLEAN_COLUMNS}
        for e in rare(special, R.KIND_ELECTION)
        if e["unclean"] and _in_window(e["ts"], window)
    ]


# --- 6. leaders per broker over time ----------------------------------------------------------------------


def leader_deltas(walked: Sequence[Record], window: ReportWindow) -> list[Record]:
    """``metrics.leader_deltas``."""
    initial = window.counted_from_ms // MINUTE_MS - 1
    sums: dict[tuple[str, int, int], int] = defaultdict(int)
    for w in walked:
        changed = w["first"] or w["leader"] != w["prev_leader"]
        if not changed or w["ts"] is None or not w["ts"] < window.end_ms:
            continue
        minute = max(math.floor(w["ts"] / MINUTE_MS), initial)
        prev = non_negative(w["leader_before"]) if w["first"] else w["prev_leader"]
        entries = [
            (prev if w["first"] else None, initial, 1),
            (prev, minute, -1),
            (w["leader"], minute, 1),
        ]
        for broker, at, delta in entries:
            if broker is not None and broker >= 0:
                sums[(w["cluster"], broker, at)] += delta
    return [{"cluster": c, "broker": b, "minute": m, "delta": d} for (c, b, m), d in sums.items()]


def known_brokers(special: Sequence[Record], deltas: Sequence[Record], seeds: Sequence[Record]) -> list[Record]:
    found: dict[tuple[str, int | None], None] = {}
    for d in deltas:
        found[(d["cluster"], d["broker"])] = None
    for e in special:
        if e["extra"]["kind"] in (R.KIND_BROKER_CHANGE, R.KIND_FAILOVER):
            for broker in e["extra"]["brokers"]:
                if broker is not None and broker >= 0:
                    found[(e["cluster"], broker)] = None
    for s in seeds:
        found[(s["cluster"], s["broker"])] = None
    return [{"cluster": c, "broker": b} for c, b in found]


def leader_counts(deltas: Sequence[Record], brokers: Sequence[Record], window: ReportWindow) -> list[Record]:
    """``metrics.leader_counts``: each broker's count at the end of every minute of the window."""
    first = window.counted_from_ms // MINUTE_MS
    last = -(-window.effective_end_ms // MINUTE_MS)
    per_broker = _group(deltas, lambda d: (d["cluster"], d["broker"]))
    out = []
    for b in brokers:
        changes = sorted(per_broker.get((b["cluster"], b["broker"]), []), key=lambda d: d["minute"])
        running, index = 0, 0
        for minute in range(first, max(first + 1, last)):
            while index < len(changes) and changes[index]["minute"] <= minute:
                running += changes[index]["delta"]
                index += 1
            out.append({"cluster": b["cluster"], "broker": b["broker"], "minute": minute, "leaders": running})
    return out


def leader_skew(counts: Sequence[Record]) -> list[Record]:
    out = []
    for (cluster, minute), rows in _group(counts, lambda c: (c["cluster"], c["minute"])).items():
        leaders = [r["leaders"] for r in rows]
        mean = sum(leaders) / len(leaders)
        out.append(
            {
                "cluster": cluster,
                "minute": minute,
                "max_leaders": max(leaders),
                "min_leaders": min(leaders),
                "mean_leaders": mean,
                "brokers": len(leaders),
                "skew": max(leaders) / mean if mean > 0 else None,
            }
        )
    return out


# --- 7. controller failovers --------------------------------------------------------------------------------


def controller_epochs(events: Sequence[Record], seeds: Sequence[Record]) -> list[Record]:
    """``metrics.controller_epochs``: per (cluster, epoch), the controller and first and last record."""
    rows = [
        {
            "cluster": e["cluster"],
            "epoch": e["epoch"],
            "controller_id": e["controller_id"],
            "ts": e["ts"],
            "seed": False,
        }
        for e in events
        if e["epoch"] >= 0
    ]
    rows += [
        {
            "cluster": s["cluster"],
            "epoch": s["epoch"],
            "controller_id": s["controller_id"],
            "ts": s["last_ms"],
            "seed": True,
        }
        for s in seeds
    ]
    out = []
    for (cluster, epoch), group in _group(rows, lambda r: (r["cluster"], r["epoch"])).items():
        records = [r["ts"] for r in group if not r["seed"]]
        out.append(
            {
                "cluster": cluster,
                "epoch": epoch,
                "controller_id": _max(r["controller_id"] for r in group),
                "first_ms": _min(records),
                "last_ms": _max(r["ts"] for r in group),
            }
        )
    return out


def failovers(special: Sequence[Record], epochs: Sequence[Record], window: ReportWindow) -> list[Record]:
    records = _group(rare(special, R.KIND_FAILOVER), lambda e: (e["cluster"], e["epoch"]))
    out = []
    for cluster, group in _group(epochs, lambda e: e["cluster"]).items():
        ordered = sorted(group, key=lambda e: asc(e["epoch"]))
        for previous, epoch in pairwise(ordered):
            if previous["epoch"] is None or not _in_window(epoch["first_ms"], window):
                continue
            failover = records.get((cluster, epoch["epoch"]), [])
            elected = _min(f["elected_at_ms"] for f in failover)
            completed = _max(f["completed_at_ms"] for f in failover)
            out.append(
                {
                    "cluster": cluster,
                    "controller_epoch": epoch["epoch"],
                    "controller_id": epoch["controller_id"],
                    "previous_epoch": previous["epoch"],
                    "previous_controller_id": previous["controller_id"],
                    "previous_last_ms": previous["last_ms"],
                    "first_ms": epoch["first_ms"],
                    "gap_ms": _minus(epoch["first_ms"], previous["last_ms"]),
                    "elected_at_ms": elected,
                    "completed_at_ms": completed,
                    "failover_ms": coalesce(_minus(completed, elected), _max(f["duration_ms"] for f in failover)),
                }
            )
    return out


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
    for group in _group(rows, key_of).values():
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
                    "duration_ms": _minus(ended, row["ts"]),
                }
            )
    return out


def reassignment_actions(moves: Sequence[Record]) -> list[Record]:
    def action_key(m: Record) -> tuple[str, str | None]:
        audit = m["audit_action_id"]
        return (m["cluster"], f"{AUDIT_PREFIX}{audit}" if audit is not None else m["action_id"])

    out = []
    for (cluster, action_id), rows in _group(moves, action_key).items():
        in_progress = sum(1 for r in rows if r["status"] == "in_progress")
        started = _min(r["started_ms"] for r in rows)
        ended = _max(r["ended_ms"] for r in rows) if in_progress == 0 else None
        requested = _first(r["requested_ms"] for r in rows)
        out.append(
            {
                "cluster": cluster,
                "action_id": action_id,
                "audit_action_id": _first(r["audit_action_id"] for r in rows),
                "requested_by": _first(r["requested_by"] for r in rows),
                "requested_ms": requested,
                "requested_partitions": _first(r["requested_partitions"] for r in rows),
                "partitions": len(rows),
                "completed": sum(1 for r in rows if r["status"] == R.PHASE_COMPLETED),
                "cancelled": sum(1 for r in rows if r["status"] == R.PHASE_CANCELLED),
                "in_progress": in_progress,
                "started_ms": started,
                "topics": sorted({r["topic"] for r in rows if r["topic"] is not None}),
                "ended_ms": ended,
                "duration_ms": _minus(ended, started),
                "start_delay_ms": _minus(started, requested),
                "request_to_end_ms": _minus(ended, requested),
            }
        )
    return out


# --- the operator actions (actions.py) ------------------------------------------------------------------------


def read_actions(actions_dir: Path | None, clusters: Sequence[str]) -> list[Record]:
    """``actions.read_actions``: the exported actions (lines without an id are dropped)."""
    out = []
    for path in A.action_files(actions_dir, clusters):
        with open(path, "rb") as src:
            for line in src:
                if not line.strip():
                    continue
                try:
                    raw = json.loads(line)
                except ValueError:
                    continue
                action = _action(raw)
                if action is not None:
                    out.append(action)
    return out


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
        row["start_delay_ms"] = _minus(row["started_ms"], row["requested_ms"])
    return rows


def election_actions(special: Sequence[Record], actions: Sequence[Record], window: ReportWindow) -> list[Record]:
    """``actions.election_actions`` of the preferred elections, for actions requested in the window."""
    elections = [e for e in rare(special, R.KIND_ELECTION) if e["strategy"] == A.STRATEGY_PREFERRED]
    candidates = action_partitions(actions, A.KIND_PREFERRED_ELECTION)
    attributed = _attribute(elections, candidates, "ts", ("cluster", "topic", "partition", "ts", "epoch", "seq"))
    per_action = _group(
        (a for a in attributed if a["audit_action_id"] is not None), lambda a: (a["cluster"], a["audit_action_id"])
    )
    asked = _group(candidates, lambda c: (c["cluster"], c["audit_action_id"], c["requested_by"], c["requested_ms"]))
    out = []
    for (cluster, action_id, requested_by, requested_ms), rows in asked.items():
        if requested_ms is None or not window.counted_from_ms <= requested_ms < window.end_ms:
            continue
        elected = per_action.get((cluster, action_id), []) if cluster is not None and action_id is not None else []
        first = _min(e["ts"] for e in elected)
        last = _max(e["ts"] for e in elected)
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
                "first_delay_ms": _minus(first, requested_ms),
                "last_delay_ms": _minus(last, requested_ms),
            }
        )
    return out


# --- 9. ISR flapping -----------------------------------------------------------------------------------------


def isr_flapping(days: Sequence[Record], window: ReportWindow, top: int) -> list[Record]:
    counts = [
        {
            **{k: d[k] for k in ("cluster", "topic", "partition", "day", "shrinks", "expands")},
            "flaps": min(d["shrinks"], d["expands"]),
        }
        for d in days
        if window.start_day <= d["day"] <= window.end_day and (d["shrinks"] > 0 or d["expands"] > 0)
    ]
    out = []
    for rows in _group(counts, lambda c: (c["cluster"], c["day"])).values():
        ranked = sorted(
            rows, key=lambda r: (-r["flaps"], -(r["shrinks"] + r["expands"]), asc(r["topic"]), asc(r["partition"]))
        )
        for rank, row in enumerate(ranked[:top], start=1):
            out.append({**row, "rank": rank})
    return out
