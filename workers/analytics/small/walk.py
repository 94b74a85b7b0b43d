"""The per-partition walk of ``transforms``, in Python: days, inventory, the walk, intervals, estimates.

Each function is the Python twin of the ``transforms`` function of the same name and returns the
same rows (dicts with the same column names). Sorting follows Spark's default ascending order with
nulls first; rows Spark would order arbitrarily (equal keys) keep their input order.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from workers.analytics import records as R
from workers.analytics.small.events import Record, day_of, ge0
from workers.analytics.small.folds import sql_min
from workers.analytics.transforms import GONE, LEADERLESS, LED, LOSS_MATCH_MS, ReportWindow

Key = tuple[str, str | None, int | None]


def key_of(row: Record) -> Key:
    return (row["cluster"], row["topic"], row["partition"])


def asc(value: Any) -> tuple[int, Any]:
    """A sort key for one column: Spark's ascending order, nulls first."""
    return (0, 0) if value is None else (1, value)


def by_time(row: Record) -> tuple[tuple[int, Any], ...]:
    return (asc(row["ts"]), asc(row["epoch"]), asc(row["seq"]))


def non_negative(value: int | None) -> int | None:
    return value if value is not None and value >= 0 else None


def coalesce(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def min_by(pairs: Iterable[tuple[Any, Any]]) -> Any:
    """Spark's ``min_by(value, order)``: the value at the least non-null order (first one on ties)."""
    best: tuple[Any, Any] | None = None
    for value, order in pairs:
        if order is not None and (best is None or order < best[1]):
            best = (value, order)
    return None if best is None else best[0]


def max_by(pairs: Iterable[tuple[Any, Any]]) -> Any:
    best: tuple[Any, Any] | None = None
    for value, order in pairs:
        if order is not None and (best is None or order > best[1]):
            best = (value, order)
    return None if best is None else best[0]


# --- 2. inventory -----------------------------------------------------------------------------------------


def partition_days(events: Sequence[Record]) -> list[Record]:
    """``transforms.partition_days``."""
    groups: dict[tuple[Key, int], list[Record]] = defaultdict(list)
    for e in events:
        if e["topic"] is not None and e["partition"] is not None:
            groups[(key_of(e), day_of(e["ts"]))].append(e)
    out = []
    for (key, day), rows in groups.items():
        names = [
            (e["leader_before"], e["ts"] if ge0(e["leader_before"]) is True or ge0(e["leader_after"]) is True else None)
            for e in rows
        ]
        out.append(
            {
                "cluster": key[0],
                "topic": key[1],
                "partition": key[2],
                "day": day,
                "shrinks": sum(1 for e in rows if e["isr_shrink"]),
                "expands": sum(1 for e in rows if e["isr_expand"]),
                "min_ts": min(e["ts"] for e in rows),
                "first_ts": sql_min(order for _, order in names),
                "first_leader_before": min_by(names),
            }
        )
    return out


_SNAPSHOT_ENTITY = re.compile(r"^(.+)-(\d+)$", re.ASCII)


def partition_inventory(special: Sequence[Record], days: Sequence[Record], known: Sequence[Record]) -> list[Key]:
    """``transforms.partition_inventory``: every partition seen, distinct, in first-seen order."""
    found: dict[Key, None] = {}
    for d in days:
        found[key_of(d)] = None
    for e in special:
        extra = e["extra"]
        if extra["kind"] != R.KIND_STATE_SNAPSHOT or extra["snapshot_entities"] is None:
            continue
        for entity in extra["snapshot_entities"]:
            match = None if entity is None else _SNAPSHOT_ENTITY.match(entity)
            if match is None:
                continue
            number = int(match.group(2))
            found[(e["cluster"], match.group(1), number if number <= 2**31 - 1 else None)] = None
    for k in known:
        found[key_of(k)] = None
    return list(found)


# --- 3. the walk -------------------------------------------------------------------------------------------


def leadership_stream(events: Sequence[Record], days: Sequence[Record], seeds: Sequence[Record]) -> list[Record]:
    """``transforms.leadership_stream``."""
    stream = []
    for e in events:
        if e["topic"] is None or e["partition"] is None:
            continue
        soft = e["soft_leader"]
        moves = soft is not None and soft != e["leader_before"]
        if e["state"] is not None or moves:
            stream.append(
                {
                    k: e[k]
                    for k in (
                        "cluster",
                        "topic",
                        "partition",
                        "ts",
                        "epoch",
                        "seq",
                        "state",
                        "soft_leader",
                        "leader_before",
                        "leader_after",
                    )
                }
            )
    per_partition: dict[Key, list[Record]] = defaultdict(list)
    for d in days:
        per_partition[key_of(d)].append(d)
    for key, rows in per_partition.items():
        leader = min_by((d["first_leader_before"], d["first_ts"]) for d in rows)
        if leader is None or leader < 0:
            continue
        stream.append(
            {
                "cluster": key[0],
                "topic": key[1],
                "partition": key[2],
                "ts": min(d["min_ts"] for d in rows),
                "epoch": -2,
                "seq": -2,
                "state": None,
                "soft_leader": leader,
                "leader_before": leader,
                "leader_after": None,
            }
        )
    for s in seeds:
        state = s["state"]
        if state is None:
            continue
        stream.append(
            {
                "cluster": s["cluster"],
                "topic": s["topic"],
                "partition": s["partition"],
                "ts": s["state_ms"],
                "epoch": -3,
                "seq": -3,
                "state": state,
                "soft_leader": None,
                "leader_before": s["cause_broker"] if state == LEADERLESS else None,
                "leader_after": s["leader"] if state == LED else R.NO_LEADER,
            }
        )
    return stream


def walk_partitions(stream: Sequence[Record]) -> list[Record]:
    """``transforms.walk_partitions`` (by name: small inputs never use the hashed key)."""
    per_partition: dict[Key, list[Record]] = defaultdict(list)
    for row in stream:
        per_partition[key_of(row)].append(row)
    out = []
    for unordered in per_partition.values():
        rows = sorted(unordered, key=by_time)
        carried: int | None = None
        prev_leader: int | None = None
        prev_state: int | None = None
        n = len(rows)
        for i, row in enumerate(rows):
            if row["state"] is not None:
                carried = row["state"]
            own = row["state"]
            if own is not None:
                leader = row["leader_after"] if own == LED else R.NO_LEADER
            elif carried is None or carried == LED:
                leader = row["soft_leader"]
            else:
                leader = R.NO_LEADER
            first = i == 0 or rows[i - 1]["ts"] is None
            last = i == n - 1 or rows[i + 1]["ts"] is None
            boundary = carried is not None and (prev_state is None or carried != prev_state)
            changed = leader != prev_leader
            if boundary or changed or first or last:
                out.append(
                    {
                        "cluster": row["cluster"],
                        "topic": row["topic"],
                        "partition": row["partition"],
                        "ts": row["ts"],
                        "epoch": row["epoch"],
                        "seq": row["seq"],
                        "leader_before": row["leader_before"],
                        "next_leader_before": rows[i + 1]["leader_before"] if i + 1 < n else None,
                        "first": first,
                        "last": last,
                        "state": carried,
                        "leader": leader,
                        "prev_leader": prev_leader,
                        "prev_state": prev_state,
                        "boundary": boundary,
                    }
                )
            prev_leader, prev_state = leader, carried
    return out


def unavailability_intervals(walked: Sequence[Record]) -> list[Record]:
    """``transforms.unavailability_intervals``."""
    per_partition: dict[Key, list[Record]] = defaultdict(list)
    for row in walked:
        if row["boundary"]:
            per_partition[key_of(row)].append(row)
    out = []
    for unordered in per_partition.values():
        rows = sorted(unordered, key=by_time)
        for i, row in enumerate(rows):
            if row["state"] != LEADERLESS:
                continue
            following = rows[i + 1] if i + 1 < len(rows) else None
            end = None if following is None else following["ts"]
            next_state = None if following is None else following["state"]
            out.append(
                {
                    "cluster": row["cluster"],
                    "topic": row["topic"],
                    "partition": row["partition"],
                    "start_ms": row["ts"],
                    "end_ms": end,
                    "duration_ms": None if end is None or row["ts"] is None else end - row["ts"],
                    "cause_broker": coalesce(
                        non_negative(row["leader_before"]),
                        non_negative(row["prev_leader"]),
                        non_negative(row["next_leader_before"]),
                    ),
                    "end_reason": "elected" if next_state == LED else ("deleted" if next_state == GONE else None),
                }
            )
    return out


def session_losses(special: Sequence[Record]) -> list[Record]:
    """``transforms.session_losses``."""
    out = []
    for e in special:
        extra = e["extra"]
        if extra["kind"] != R.KIND_BROKER_CHANGE or extra["session_lost_ms"] is None:
            continue
        for broker in extra["session_lost_brokers"] or []:
            out.append(
                {"cluster": e["cluster"], "broker": broker, "detected_ms": e["ts"], "lost_ms": extra["session_lost_ms"]}
            )
    return out


def with_estimated_starts(
    intervals: Sequence[Record], losses: Sequence[Record], carried: Sequence[Record]
) -> list[Record]:
    """``transforms.with_estimated_starts``."""
    known = {
        (*key_of(c), c["state_ms"]): c["estimated_ms"]
        for c in carried
        if c["estimated_ms"] is not None and c["state_ms"] is not None
    }
    out = []
    for i in intervals:
        start = i["start_ms"]
        carried_ms = known.get((*key_of(i), start))
        matches = [
            (loss["lost_ms"], loss["detected_ms"])
            for loss in losses
            if loss["cluster"] == i["cluster"]
            and i["cause_broker"] is not None
            and loss["broker"] == i["cause_broker"]
            and start is not None
            and loss["detected_ms"] <= start
            and start - loss["detected_ms"] <= LOSS_MATCH_MS
        ]
        lost = max_by(matches)
        estimated = coalesce(carried_ms, None if lost is None else min(lost, start))
        outage_start = coalesce(estimated, start)
        end = i["end_ms"]
        out.append(
            {
                **i,
                "estimated_start_ms": estimated,
                "outage_start_ms": outage_start,
                "outage_ms": None if end is None or outage_start is None else end - outage_start,
            }
        )
    return out


def overlapping(
    rows: Iterable[Record], window: ReportWindow, start: str = "start_ms", end: str = "end_ms"
) -> list[Record]:
    """``transforms.overlapping``."""
    return [
        r
        for r in rows
        if r[start] is not None and r[start] < window.end_ms and (r[end] is None or r[end] > window.counted_from_ms)
    ]
