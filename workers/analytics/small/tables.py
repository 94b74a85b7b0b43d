"""The result tables of ``metrics`` and ``actions``, in Python, from the walk's rows.

Each function is the twin of the Spark function of the same name (same rows, same columns). Day
columns stay epoch days and minutes epoch minutes here; ``state.write_table`` converts them on
output as ``transforms.with_dates``/``minute_timestamps`` do.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise

from workers.analytics import records as R
from workers.analytics.metrics import UNCLEAN_COLUMNS
from workers.analytics.small.events import Record, day_of, rare
from workers.analytics.small.folds import group_by, in_window, sql_max, sql_min, sql_minus, sql_sum
from workers.analytics.small.walk import Key, asc, coalesce, key_of, non_negative
from workers.analytics.transforms import DAY_MS, MINUTE_MS, ReportWindow

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
        if in_window(i["end_ms"], window) and i["end_reason"] == "elected":
            fact(i, day_of(i["end_ms"]), 0.0, 0, 1, i["outage_ms"])
    return facts


def _outage_aggregates(rows: Sequence[Record]) -> Record:
    recoveries = sum(r["recoveries"] for r in rows)
    recovery_ms = sql_sum(r["recovery_ms"] for r in rows)
    return {
        "outages": sum(r["outages"] for r in rows),
        "recoveries": recoveries,
        "leaderless_ms": sql_sum(r["leaderless_ms"] for r in rows),
        "recovery_ms": recovery_ms,
        "mttr_ms": recovery_ms / recoveries if recoveries > 0 and recovery_ms is not None else None,
    }


def partition_daily(facts: Sequence[Record]) -> list[Record]:
    groups = group_by(facts, lambda f: (*key_of(f), f["day"]))
    return [
        {"cluster": k[0], "topic": k[1], "partition": k[2], "day": k[3], **_outage_aggregates(rows)}
        for k, rows in groups.items()
    ]


def broker_daily(facts: Sequence[Record]) -> list[Record]:
    groups = group_by(facts, lambda f: (f["cluster"], f["cause_broker"], f["day"]))
    return [{"cluster": k[0], "broker": k[1], "day": k[2], **_outage_aggregates(rows)} for k, rows in groups.items()]


def topic_daily(facts: Sequence[Record], inventory: Sequence[Key], window: ReportWindow) -> list[Record]:
    """``metrics.topic_daily``: every known topic, every day of the window that has covered time."""
    partitions: dict[tuple[str, str | None], int] = defaultdict(int)
    for cluster, topic, _ in inventory:
        partitions[(cluster, topic)] += 1
    stats = group_by(facts, lambda f: (f["cluster"], f["topic"], f["day"]))
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
    elections = [e for e in rare(special, R.KIND_ELECTION) if in_window(e["ts"], window)]
    groups = group_by(
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


def unclean_elections(special: Sequence[Record], window: ReportWindow) -> list[Record]:
    return [
        {c: e[c] for c in UNCLEAN_COLUMNS}
        for e in rare(special, R.KIND_ELECTION)
        if e["unclean"] and in_window(e["ts"], window)
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
    per_broker = group_by(deltas, lambda d: (d["cluster"], d["broker"]))
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
    for (cluster, minute), rows in group_by(counts, lambda c: (c["cluster"], c["minute"])).items():
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
    for (cluster, epoch), group in group_by(rows, lambda r: (r["cluster"], r["epoch"])).items():
        records = [r["ts"] for r in group if not r["seed"]]
        out.append(
            {
                "cluster": cluster,
                "epoch": epoch,
                "controller_id": sql_max(r["controller_id"] for r in group),
                "first_ms": sql_min(records),
                "last_ms": sql_max(r["ts"] for r in group),
            }
        )
    return out


def failovers(special: Sequence[Record], epochs: Sequence[Record], window: ReportWindow) -> list[Record]:
    records = group_by(rare(special, R.KIND_FAILOVER), lambda e: (e["cluster"], e["epoch"]))
    out = []
    for cluster, group in group_by(epochs, lambda e: e["cluster"]).items():
        ordered = sorted(group, key=lambda e: asc(e["epoch"]))
        for previous, epoch in pairwise(ordered):
            if previous["epoch"] is None or not in_window(epoch["first_ms"], window):
                continue
            failover = records.get((cluster, epoch["epoch"]), [])
            elected = sql_min(f["elected_at_ms"] for f in failover)
            completed = sql_max(f["completed_at_ms"] for f in failover)
            out.append(
                {
                    "cluster": cluster,
                    "controller_epoch": epoch["epoch"],
                    "controller_id": epoch["controller_id"],
                    "previous_epoch": previous["epoch"],
                    "previous_controller_id": previous["controller_id"],
                    "previous_last_ms": previous["last_ms"],
                    "first_ms": epoch["first_ms"],
                    "gap_ms": sql_minus(epoch["first_ms"], previous["last_ms"]),
                    "elected_at_ms": elected,
                    "completed_at_ms": completed,
                    "failover_ms": coalesce(sql_minus(completed, elected), sql_max(f["duration_ms"] for f in failover)),
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
    for rows in group_by(counts, lambda c: (c["cluster"], c["day"])).values():
        ranked = sorted(
            rows, key=lambda r: (-r["flaps"], -(r["shrinks"] + r["expands"]), asc(r["topic"]), asc(r["partition"]))
        )
        for rank, row in enumerate(ranked[:top], start=1):
            out.append({**row, "rank": rank})
    return out
