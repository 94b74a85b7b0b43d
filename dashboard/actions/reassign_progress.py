"""Progress of a submitted reassignment, per partition (pure: the callers read ZooKeeper and agents).

Per partition the state is one of:

* ``waiting``: still only in ``/admin/reassign_partitions``; the controller has not started it;
* ``copying``: the topic znode has adding/removing replicas; each new replica's log end offset is
  compared with the leader's (from the broker agents) to show its lag, its catch-up rate (lag
  shrinking per second over the last ``RATE_WINDOW_S`` of samples) and an ETA (lag / rate), and the bytes it
  holds and its copy rate (bytes/s, averaged from the first sample that saw it copying), summed per
  receiving broker against the throttle;
* ``complete``: the replicas are the target and nothing is being added or removed;
* ``reverted``: back on the original replicas and no longer requested (cancelled, or refused by the
  controller);
* ``superseded``: something else than the target or the origin (another reassignment replaced it).

The sample of the previous call is passed back in (``previous``), so rates need no extra storage
than the action's ``outcome``. ``done`` is True when no partition is waiting or copying.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from controller_core.model import LeaderAndIsr, ReplicaAssignment, TopicPartition

AgentEntries = Mapping[int, Mapping[TopicPartition, Mapping[str, Any]] | None]

FINAL_STATES: Final = frozenset({"complete", "reverted", "superseded"})
#: The catch-up rate (and so the ETA) is measured over this many seconds of samples.
RATE_WINDOW_S: Final = 10.0


def _key(tp: TopicPartition, broker: int) -> str:
    return f"{tp.topic}/{tp.partition}/{broker}"


def _window(old: Any, prev_time: Any, now: float) -> list[list[float]]:
    """The previous samples ``[time, lag]`` of one replica within ``RATE_WINDOW_S`` of ``now``
    (a sample stored before windows existed counts as one at the previous time)."""
    if not isinstance(old, dict):
        return []
    points = old.get("window")
    if not isinstance(points, list):
        points = [[prev_time, old.get("lag")]] if isinstance(prev_time, int | float) else []
    kept = [
        [float(t), float(lag)]
        for t, lag in (p for p in points if isinstance(p, list) and len(p) == 2)
        if isinstance(t, int | float) and isinstance(lag, int | float) and now - RATE_WINDOW_S <= t < now
    ]
    return kept


def _leader_leo(entries: AgentEntries, leader: int, tp: TopicPartition) -> int | None:
    by_tp = entries.get(leader)
    entry = by_tp.get(tp) if by_tp else None
    leo = entry.get("log_end_offset") if entry else None
    return leo if isinstance(leo, int) and leo >= 0 else None


def _copied_bytes(entries: AgentEntries, leader: int, broker: int, tp: TopicPartition, leo: int) -> int | None:
    """Bytes the new replica holds: its log from its start to its end, times the message size its
    agent (or, failing that, the leader's) reports."""
    own = entries.get(broker)
    entry = own.get(tp) if own else None
    lead = entries.get(leader)
    lead_entry = lead.get(tp) if lead else None
    size = (entry or {}).get("message_size_bytes") or (lead_entry or {}).get("message_size_bytes")
    start = (entry or {}).get("log_start_offset")
    if not isinstance(start, int) or start < 0:
        start = (lead_entry or {}).get("log_start_offset")
    if not isinstance(size, int) or not isinstance(start, int) or start < 0:
        return None
    return max(0, leo - start) * size


def _follower_leo(
    entries: AgentEntries,
    leader: int,
    broker: int,
    tp: TopicPartition,
) -> int | None:
    """The new replica's log end: from its own agent, else as its leader last saw it."""
    own = entries.get(broker)
    entry = own.get(tp) if own else None
    leo = entry.get("log_end_offset") if entry else None
    if isinstance(leo, int) and leo >= 0:
        return leo
    lead = entries.get(leader)
    lead_entry = lead.get(tp) if lead else None
    for follower in (lead_entry or {}).get("followers") or []:
        if isinstance(follower, dict) and follower.get("broker_id") == broker:
            value = follower.get("log_end_offset")
            return value if isinstance(value, int) and value >= 0 else None
    return None


def compute(
    requested: Mapping[TopicPartition, Sequence[int]],
    origin: Mapping[TopicPartition, Sequence[int]],
    assignments: Mapping[TopicPartition, ReplicaAssignment],
    leaders: Mapping[TopicPartition, LeaderAndIsr],
    pending: Mapping[TopicPartition, Sequence[int]] | None,
    agents: AgentEntries,
    now: float,
    previous: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The progress document shown live and stored in the action's outcome (see module docstring)."""
    prev_samples: Mapping[str, Any] = (previous or {}).get("samples") or {}
    prev_time = (previous or {}).get("time")
    samples: dict[str, Any] = {}
    per_broker: dict[int, float] = {}
    rows: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for tp in sorted(requested, key=lambda t: (t.topic, t.partition)):
        target = tuple(requested[tp])
        orig = tuple(origin.get(tp, ()))
        current = assignments.get(tp)
        lai = leaders.get(tp)
        in_request = pending is not None and tuple(pending.get(tp, ())) == target
        rs = current.replicas if current is not None else ()
        if current is not None and current.is_being_reassigned:
            state = "copying" if tuple(current.target_replicas) == target else "superseded"
        elif current is not None and tuple(rs) == target:
            state = "complete"
        elif in_request:
            state = "waiting"
        elif current is not None and set(rs) == set(orig):
            state = "reverted"
        else:
            state = "superseded"
        leader = lai.leader if lai is not None else -1
        isr = list(lai.isr) if lai is not None else []
        new_replicas = []
        for broker in (r for r in target if r not in orig):
            item: dict[str, Any] = {"broker": broker, "in_isr": broker in isr}
            if state == "copying":
                leader_leo = _leader_leo(agents, leader, tp)
                leo = _follower_leo(agents, leader, broker, tp)
                item.update(log_end_offset=leo, leader_log_end_offset=leader_leo)
                if leo is not None and leader_leo is not None:
                    lag = max(leader_leo - leo, 0)
                    item["lag"] = lag
                    key = _key(tp, broker)
                    old = prev_samples.get(key)
                    rate = old.get("rate") if isinstance(old, dict) else None
                    # The catch-up rate over the last RATE_WINDOW_S of samples, not between two: a
                    # throttle grants whole messages in bursts, and a one-second rate (the monitor's
                    # period) jumps between fast and negative, the ETA between minutes and unknown.
                    window = _window(old, prev_time, now)
                    if window and now - window[0][0] >= 1.0:
                        rate = (window[0][1] - lag) / (now - window[0][0])
                    copied = _copied_bytes(agents, leader, broker, tp, leo)
                    # The copy rate is measured over the copy so far (from the first sample that saw
                    # this replica), not between two polls: a throttle grants whole messages in bursts.
                    since = old.get("since") if isinstance(old, dict) else None
                    if copied is not None and not (isinstance(since, list) and len(since) == 2):
                        since = [now, copied]
                    copy_rate = None
                    if copied is not None and since is not None and now - float(since[0]) >= 1.0:
                        copy_rate = max(0.0, (copied - float(since[1])) / (now - float(since[0])))
                    samples[key] = {
                        "lag": lag,
                        "rate": rate,
                        "copied": copied,
                        "since": since,
                        "window": [*window, [now, lag]],
                    }
                    item["copied_bytes"] = copied
                    item["copy_rate_bytes_s"] = None if copy_rate is None else round(copy_rate)
                    if copy_rate is not None:
                        per_broker[broker] = per_broker.get(broker, 0.0) + copy_rate
                    item["rate"] = None if rate is None else round(rate, 3)
                    if lag == 0:
                        item["eta_s"] = 0.0
                    elif rate is not None and rate > 0:
                        item["eta_s"] = round(lag / rate, 1)
                    else:
                        item["eta_s"] = None
                else:
                    item.update(lag=None, rate=None, eta_s=None)
            elif state == "complete":
                item.update(lag=0, eta_s=0.0)
            new_replicas.append(item)
        counts[state] = counts.get(state, 0) + 1
        etas: list[float | None] = [r.get("eta_s") for r in new_replicas]
        rows.append(
            {
                "topic": tp.topic,
                "partition": tp.partition,
                "state": state,
                "origin": list(orig),
                "target": list(target),
                "replicas": list(rs),
                "adding": list(current.adding_replicas) if current is not None else [],
                "removing": list(current.removing_replicas) if current is not None else [],
                "leader": leader,
                "isr": isr,
                "new_replicas": new_replicas,
                "eta_s": None if any(e is None for e in etas) else max((e for e in etas if e is not None), default=0.0),
            }
        )
    done = not any(r["state"] in ("waiting", "copying") for r in rows)
    etas_all = [r["eta_s"] for r in rows if r["state"] == "copying"]
    return {
        "time": now,
        "done": done,
        "counts": counts,
        "total": len(rows),
        "eta_s": None if any(e is None for e in etas_all) else max(etas_all, default=0.0),
        "partitions": rows,
        # Measured copy rate into each broker receiving new replicas (bytes/s), to set against the
        # per-broker throttle.
        "copy_rate_by_broker": {str(b): round(r) for b, r in sorted(per_broker.items())},
        "samples": samples,
    }


def final_status(progress: Mapping[str, Any]) -> tuple[str, str]:
    """``(status, error)`` for a finished reassignment: every partition complete -> succeeded; some
    -> partial; none -> failed. The error names the partitions that did not reach their target."""
    rows = progress.get("partitions") or []
    missed = [f"{r['topic']}-{r['partition']} {r['state']}" for r in rows if r["state"] != "complete"]
    if not missed:
        return "succeeded", ""
    status = "partial" if len(missed) < len(rows) else "failed"
    return status, "not moved to their target: " + ", ".join(missed[:50]) + (" ..." if len(missed) > 50 else "")
