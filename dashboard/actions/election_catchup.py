"""Preferred elections that wait for catch-up (issue #29, item 4).

Moving leadership back to a replica that has only just rejoined the ISR puts a cold leader in front
of producers and consumers. With the option on, a partition's leadership moves only when its
preferred replica

* has been in the ISR for at least ``min_isr_s`` seconds, and
* is fewer than ``max_lag`` messages behind the leader (the issue's "lag under N": strictly under, so
  ``max_lag`` must be at least 1, and ``max_lag`` = 1 means fully caught up).

How long: the partition's state znode (``/brokers/topics/<t>/partitions/<p>/state``) is rewritten on
every ISR or leader change, so "in the ISR and the znode unchanged for T s" means "in the ISR for at
least T s" (conservative: any other ISR change restarts the count). It needs nothing but ZooKeeper,
so it holds for an observed Kafka cluster too.

How far behind: the leader's broker agent reports each follower's lag (its log end against the
leader's, ``GET /v1/state``). Without an agent (an observed Kafka cluster) the lag is unknown and a
``max_lag`` check cannot pass: the partition waits, and says so.

``assess`` is pure; ``read_conditions`` reads ZooKeeper and the agents. Partitions whose preferred
replica is live but out of the ISR are waited for too (they may rejoin); a down preferred replica
is not waited for.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller_core.model import TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore

DEFAULT_TIMEOUT_S: Final = 600.0
MAX_TIMEOUT_S: Final = 24 * 3600.0


@dataclass(frozen=True, slots=True)
class CatchUp:
    """The option: wait until the preferred replica is in the ISR ``min_isr_s`` and fewer than
    ``max_lag`` messages behind (``max_lag`` >= 1), giving up after ``timeout_s``."""

    min_isr_s: float
    max_lag: int
    timeout_s: float = DEFAULT_TIMEOUT_S

    def as_dict(self) -> dict[str, Any]:
        return {"min_isr_s": self.min_isr_s, "max_lag": self.max_lag, "timeout_s": self.timeout_s}

    def describe(self) -> str:
        return (
            f"wait until the preferred replica has been in the ISR for {self.min_isr_s:g} s and is fewer than "
            f"{self.max_lag} messages behind (giving up after {self.timeout_s:g} s)"
        )


def _number(data: Mapping[str, Any], key: str, what: str, *, whole: bool, default: float | None = None) -> float:
    raw = data.get(key)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        if default is not None:
            return default
        raise ValueError(f"{what} is required for an election that waits for catch-up")
    if isinstance(raw, bool):
        raise ValueError(f"{what} must be a number, got {raw!r}")
    try:
        value = float(raw)
    except (TypeError, ValueError):
        raise ValueError(f"{what} must be a number, got {raw!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {raw!r}")
    if value < 0:
        raise ValueError(f"{what} must not be negative, got {raw!r}")
    if whole and value != int(value):
        raise ValueError(f"{what} must be a whole number, got {raw!r}")
    return value


def parse(data: Mapping[str, Any]) -> CatchUp | None:
    """The option from form or JSON fields: ``catch_up`` (true/"1"/"on") with ``min_isr_s`` (T),
    ``max_lag`` (N) and optional ``timeout_s``; None when off. ``ValueError`` names a bad field."""
    flag = data.get("catch_up")
    if flag is None or flag is False or (isinstance(flag, str) and flag.strip().lower() in ("", "0", "false", "off")):
        return None
    if not (flag is True or (isinstance(flag, str) and flag.strip().lower() in ("1", "true", "on", "yes"))):
        raise ValueError(f"catch_up must be true or false, got {flag!r}")
    min_isr_s = _number(data, "min_isr_s", "the time in the ISR (min_isr_s, seconds)", whole=False)
    max_lag = int(_number(data, "max_lag", "the lag (max_lag, messages)", whole=True))
    if max_lag < 1:
        raise ValueError(
            f"the lag (max_lag, messages) must be at least 1: the lag must be under it, and 1 means fully "
            f"caught up; got {max_lag}"
        )
    timeout_s = _number(data, "timeout_s", "the timeout (timeout_s, seconds)", whole=False, default=DEFAULT_TIMEOUT_S)
    if timeout_s <= 0 or timeout_s > MAX_TIMEOUT_S:
        raise ValueError(f"the timeout must be more than 0 and at most {MAX_TIMEOUT_S:g} s, got {timeout_s:g}")
    return CatchUp(min_isr_s, max_lag, timeout_s)


@dataclass(frozen=True, slots=True)
class Condition:
    """What is known of one partition's preferred replica now."""

    isr: tuple[int, ...]
    unchanged_s: float | None  # how long the state znode has been unchanged
    lag: int | None  # messages behind the leader, from the leader's agent


def assess(preferred: int, condition: Condition, catch_up: CatchUp) -> str:
    """ "" when the leadership may move now, else why it waits."""
    if preferred not in condition.isr:
        return f"preferred replica {preferred} is not in the ISR {list(condition.isr)} yet"
    if condition.unchanged_s is None:
        return "unknown how long the ISR has been unchanged (the state znode could not be read)"
    if condition.unchanged_s < catch_up.min_isr_s:
        return (
            f"preferred replica {preferred} has been in the ISR for {condition.unchanged_s:.0f} s "
            f"of the {catch_up.min_isr_s:g} s required"
        )
    if condition.lag is None:
        return f"the lag of replica {preferred} is unknown (the leader's broker agent did not answer)"
    if condition.lag >= catch_up.max_lag:
        return f"replica {preferred} is {condition.lag} messages behind the leader (must be under {catch_up.max_lag})"
    return ""


def read_conditions(
    store: ZkStore, rows: Iterable[Mapping[str, Any]], now: float | None = None
) -> dict[TopicPartition, Condition]:
    """ISR, znode age and the preferred replica's lag for each row (``topic``, ``partition``,
    ``preferred``), read from ZooKeeper and the leaders' agents."""
    from dashboard.actions.reassign_cluster import agent_replicas, read_brokers

    wall = time.time() if now is None else now
    wanted = [(TopicPartition(str(r["topic"]), int(r["partition"])), r.get("preferred")) for r in rows]
    client = store.client
    pending = {tp: client.get_async(paths.partition_state_path(tp)) for tp, _ in wanted}
    states: dict[TopicPartition, tuple[int, tuple[int, ...], float]] = {}
    for tp, result in pending.items():
        try:
            data, stat = result.get(timeout=15)
        except Exception:  # a vanished or unreadable state reads as unknown
            continue
        try:
            lai = codecs.decode_partition_state(data, stat.version).leader_and_isr
        except ValueError:
            continue
        states[tp] = (lai.leader, tuple(lai.isr), max(0.0, wall - stat.mtime / 1000.0))
    leaders = sorted({leader for leader, _, _ in states.values() if leader >= 0})
    agents = agent_replicas(read_brokers(store), leaders, {tp.topic for tp, _ in wanted}) if leaders else {}
    out: dict[TopicPartition, Condition] = {}
    for tp, preferred in wanted:
        if tp not in states:
            out[tp] = Condition((), None, None)
            continue
        leader, isr, age = states[tp]
        lag: int | None = None
        entry = (agents.get(leader) or {}).get(tp)
        for follower in (entry or {}).get("followers") or []:
            if isinstance(follower, dict) and follower.get("broker_id") == preferred:
                value = follower.get("lag")
                lag = value if isinstance(value, int) and value >= 0 else None
        if preferred == leader:
            lag = 0
        out[tp] = Condition(isr, age, lag)
    return out


def waitable(blocked_reason: str, preferred: int | None, live: Iterable[int]) -> bool:
    """Whether a partition the plain election blocks may still be waited for: its preferred replica
    is live but out of the ISR (it may catch up and rejoin)."""
    return preferred is not None and preferred in set(live) and "is not in the ISR" in blocked_reason


def preview(
    catch_up: CatchUp, rows: list[dict[str, Any]], conditions: Mapping[TopicPartition, Condition]
) -> dict[str, Any]:
    """Which of ``rows`` (plan rows as dicts) would move now and which wait, and why."""
    now: list[dict[str, Any]] = []
    waiting: list[dict[str, Any]] = []
    for row in rows:
        tp = TopicPartition(str(row["topic"]), int(row["partition"]))
        condition = conditions.get(tp, Condition((), None, None))
        why = assess(int(row["preferred"]), condition, catch_up)
        entry = {
            **row,
            "in_isr_s": None if condition.unchanged_s is None else round(condition.unchanged_s, 1),
            "lag": condition.lag,
        }
        if why:
            waiting.append({**entry, "why": why})
        else:
            now.append(entry)
    return {"option": catch_up.as_dict(), "describe": catch_up.describe(), "now": now, "waiting": waiting}
