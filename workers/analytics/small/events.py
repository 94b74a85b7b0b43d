"""Read a tiny input and project it as ``transforms.prepare_events`` does, with Spark's semantics.

Records are dicts. Reading follows ``spark.read.schema(RECORD_SCHEMA).json`` in PERMISSIVE mode: a
line that is not a JSON object becomes a record of nulls (then dropped: no ``ts``), a field whose
value does not fit its type is null, unknown fields are ignored. The projection keeps SQL's
three-valued logic where the Spark expression has it (``None`` is SQL's null), because records
with a null ``kind`` or ``to_state`` are classified by exactly those rules.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from workers.analytics import records as R
from workers.analytics.transforms import DAY_MS, GONE, LEADERLESS, LED

Record = dict[str, Any]

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)
_INT_FIELDS = {"controller_id", "partition", "leader_before", "leader_after"}
_LONG_FIELDS = {"controller_epoch", "seq"}
_DOUBLE_FIELDS = {"ts", "elected_at_ms", "completed_at_ms", "duration_ms", "session_lost_ms"}
_STRING_FIELDS = {"kind", "event_id", "cause", "entity", "topic", "to_state", "strategy", "phase", "action_id"}
_INT_ARRAYS = {
    "isr_before",
    "isr_after",
    "new_brokers",
    "dead_brokers",
    "live_brokers",
    "session_lost_brokers",
    "origin_replicas",
    "target_replicas",
}
FIELDS = tuple(f.name for f in R.RECORD_SCHEMA.fields)


def _integer(value: Any, bounds: tuple[int, int]) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value if bounds[0] <= value <= bounds[1] else None


def _double(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _string(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    # Spark keeps a non-string JSON value's text for a string field.
    return json.dumps(value, separators=(",", ":"))


def _int_array(value: Any) -> list[int | None] | None:
    if not isinstance(value, list):
        return None
    return [_integer(v, _INT32) for v in value]


def _entities(value: Any) -> dict[str, list[str | None] | None] | None:
    if not isinstance(value, dict):
        return None
    return {k: [_string(v) for v in vs] if isinstance(vs, list) else None for k, vs in value.items()}


def coerce(raw: Any) -> Record:
    """One parsed line as ``RECORD_SCHEMA`` reads it (a non-object: every field null)."""
    if not isinstance(raw, dict):
        return dict.fromkeys(FIELDS)
    out: Record = {}
    for name in FIELDS:
        value = raw.get(name)
        if name in _INT_FIELDS:
            out[name] = _integer(value, _INT32)
        elif name in _LONG_FIELDS:
            out[name] = _integer(value, _INT64)
        elif name in _DOUBLE_FIELDS:
            out[name] = _double(value)
        elif name in _STRING_FIELDS:
            out[name] = _string(value)
        elif name in _INT_ARRAYS:
            out[name] = _int_array(value)
        elif name == "unclean":
            out[name] = value if isinstance(value, bool) else None
        else:  # partition_states
            out[name] = _entities(value)
    return out


def json_lines(paths: Iterable[str | Path]) -> Iterator[Any]:
    """Each non-blank line of the files, parsed; None for a line that is not JSON (a torn last line),
    as Spark's PERMISSIVE JSON reader gives a row of nulls for it."""
    for path in paths:
        with open(path, "rb") as src:
            for line in src:
                if not line.strip():
                    continue
                try:
                    yield json.loads(line)
                except ValueError:
                    yield None


def read_lines(paths: Iterable[Path]) -> Iterator[Record]:
    """Every line of the files as a record; a line that is not JSON (a torn last line) is all nulls."""
    return map(coerce, json_lines(paths))


# --- three-valued logic (None is SQL's null) ----------------------------------------------------------


def and3(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    if a is None or b is None:
        return None
    return True


def or3(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    if a is None or b is None:
        return None
    return False


def not3(a: bool | None) -> bool | None:
    return None if a is None else not a


def eq3(a: Any, b: Any) -> bool | None:
    return None if a is None or b is None else a == b


def ge0(a: int | float | None) -> bool | None:
    return None if a is None else a >= 0


def day_of(ts: float) -> int:
    """``floor(ts / DAY_MS)`` as an int (Spark's ``day_of``)."""
    return math.floor(ts / DAY_MS)


_ENTITY = re.compile(r"^(.+)-(\d+)(@\d+)?$", re.ASCII)
_EXTRA_KINDS = (R.KIND_ELECTION, R.KIND_FAILOVER, R.KIND_REASSIGNMENT, R.KIND_STATE_SNAPSHOT, R.KIND_BROKER_CHANGE)


def _try_int(text: str) -> int | None:
    value = int(text)
    return value if _INT32[0] <= value <= _INT32[1] else None


def _flatten(states: dict[str, list[str | None] | None] | None) -> list[str | None] | None:
    if states is None:
        return None
    out: list[str | None] = []
    for values in states.values():
        if values is None:
            return None  # Spark's flatten: any null inner array makes the result null
        out.extend(values)
    return out


def prepare(record: Record, cluster: str) -> Record | None:
    """``transforms.prepare_events`` for one record (None when it has no ``ts``), plus ``cluster``."""
    ts = record["ts"]
    if ts is None:
        return None
    kind = record["kind"]
    to_state = record["to_state"]
    failed = eq3(kind, R.KIND_FAILED_CHANGE)
    transition = eq3(kind, R.KIND_PARTITION_TRANSITION)
    election = eq3(kind, R.KIND_ELECTION)
    defines_leader = or3(election, and3(transition, eq3(to_state, R.STATE_ONLINE)))
    leader_after = record["leader_after"]
    state: int | None
    if failed is True:
        state = None
    elif eq3(leader_after, R.NO_LEADER) is True:
        state = LEADERLESS
    elif and3(defines_leader, ge0(leader_after)) is True:
        state = LED
    elif and3(transition, eq3(to_state, R.STATE_OFFLINE)) is True:
        state = LEADERLESS
    elif and3(transition, eq3(to_state, R.STATE_NON_EXISTENT)) is True:
        state = GONE
    else:
        state = None
    soft = and3(and3(not3(failed), not3(defines_leader)), ge0(leader_after))
    topic, partition = record["topic"], record["partition"]
    entity = record["entity"]
    if entity is not None and (topic is None or partition is None):
        match = _ENTITY.match(entity)
        if topic is None and match is not None:
            topic = match.group(1)
        if partition is None and match is not None:
            partition = _try_int(match.group(2))
    before, after = record["isr_before"], record["isr_after"]
    has_isr = before is not None and after is not None
    extra = None
    if kind in _EXTRA_KINDS:
        unclean = bool(record["unclean"]) and kind == R.KIND_ELECTION
        reassignment = kind == R.KIND_REASSIGNMENT
        extra = {
            "kind": kind,
            "strategy": record["strategy"],
            "cause": record["cause"],
            "unclean": unclean,
            "isr_before": before if unclean else None,
            "isr_after": after if unclean else None,
            "elected_at_ms": record["elected_at_ms"],
            "completed_at_ms": record["completed_at_ms"],
            "duration_ms": record["duration_ms"],
            "phase": record["phase"] if reassignment else None,
            "action_id": (record["action_id"] if record["action_id"] is not None else record["event_id"])
            if reassignment
            else None,
            "origin_replicas": record["origin_replicas"] if reassignment else None,
            "target_replicas": record["target_replicas"] if reassignment else None,
            "snapshot_entities": _flatten(record["partition_states"]) if kind == R.KIND_STATE_SNAPSHOT else None,
            "brokers": [
                *(record["new_brokers"] or []),
                *(record["dead_brokers"] or []),
                *(record["live_brokers"] or []),
            ],
            "session_lost_brokers": record["session_lost_brokers"],
            "session_lost_ms": record["session_lost_ms"],
        }
    epoch, seq = record["controller_epoch"], record["seq"]
    return {
        "cluster": cluster,
        "ts": ts,
        "epoch": -1 if epoch is None else epoch,
        "seq": -1 if seq is None else seq,
        "controller_id": record["controller_id"],
        "topic": topic,
        "partition": partition,
        "state": state,
        "soft_leader": leader_after if soft is True else None,
        "leader_before": record["leader_before"],
        "leader_after": leader_after,
        "isr_shrink": has_isr and bool(set(before) - set(after)),
        "isr_expand": has_isr and bool(set(after) - set(before)),
        "extra": extra,
    }


def rare(events: Iterable[Record], kind: str) -> list[Record]:
    """``transforms.rare``: the events of one ``extra`` kind, the struct's fields flattened, plus ``day``."""
    out = []
    for event in events:
        extra = event["extra"]
        if extra is not None and extra["kind"] == kind:
            row = {k: v for k, v in event.items() if k != "extra"}
            row.update(extra)
            row["day"] = day_of(event["ts"])
            out.append(row)
    return out
