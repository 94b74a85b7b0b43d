"""What a data-movement action did, per partition, for its audit page (issue #29, item 5).

Reassignments, replication-factor changes and preferred elections record each affected partition's
replicas, leader and ISR *before* (when the worker is about to write the request) and *after* (when
the action finishes), as ZooKeeper had them then; ``snapshot`` reads them. ``rows`` turns what an
action recorded into the page's table: ``before`` from ``outcome["before"]`` or, for elections
submitted without it, the preview shown at submission; ``after`` from ``outcome["after"]`` or, for
a reassignment, its last progress sample, or, for a plain election, the leader it recorded (replicas
unchanged by an election; an ISR not recorded shows as unknown). Throttle events come from the
reassignment's ``parameters["throttle"]`` (``reassign_throttle``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from controller_core.model import TopicPartition
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action

MOVEMENT_KINDS = (Action.Kind.REASSIGNMENT, Action.Kind.PREFERRED_ELECTION)


def _name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def snapshot(store: ZkStore, partitions: Iterable[TopicPartition]) -> dict[str, dict[str, Any]]:
    """``"topic-p" -> {"replicas", "leader", "isr"}`` as ZooKeeper has them now (missing: -1/[])."""
    tps = sorted(set(partitions))
    if not tps:
        return {}
    topics = sorted({tp.topic for tp in tps})
    assignments = store.get_replica_assignments(topics)
    states = store.get_partition_states(tps)
    out: dict[str, dict[str, Any]] = {}
    for tp in tps:
        ta = assignments.get(tp.topic)
        assignment = ta.partitions.get(tp.partition) if ta is not None else None
        read = states.get(tp)
        lai = read.state.leader_and_isr if read is not None and read.state is not None else None
        out[_name(tp.topic, tp.partition)] = {
            "replicas": list(assignment.replicas) if assignment is not None else [],
            "leader": lai.leader if lai is not None else -1,
            "isr": list(lai.isr) if lai is not None else [],
        }
    return out


def from_rows(rows: Iterable[Mapping[str, Any]], leader_key: str = "leader") -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        if "topic" in r and "partition" in r:
            out[_name(str(r["topic"]), int(r["partition"]))] = {
                "replicas": list(r.get("replicas") or []),
                "leader": r.get(leader_key),
                "isr": list(r["isr"]) if r.get("isr") is not None else None,
            }
    return out


def rows(action: Action) -> list[dict[str, Any]]:
    """The before/after table of ``action`` (empty for other kinds or nothing recorded)."""
    if action.kind not in MOVEMENT_KINDS:
        return []
    outcome = action.outcome or {}
    preview = action.preview or {}
    before: dict[str, dict[str, Any]] = dict(outcome.get("before") or {})
    if not before and action.kind == Action.Kind.PREFERRED_ELECTION:
        before = from_rows(list(preview.get("electable") or []))
    after: dict[str, dict[str, Any]] = dict(outcome.get("after") or {})
    if not after and action.kind == Action.Kind.REASSIGNMENT:
        after = from_rows((outcome.get("progress") or {}).get("partitions") or [])
    if not after and action.kind == Action.Kind.PREFERRED_ELECTION:
        results = list(outcome.get("partitions") or []) + list((outcome.get("elected") or {}).values())
        for r in results:
            name = _name(str(r["topic"]), int(r["partition"]))
            then = before.get(name) or {}
            after[name] = {"replicas": then.get("replicas"), "leader": r.get("leader"), "isr": None}
    if action.status in (Action.Status.QUEUED, Action.Status.RUNNING) and "after" not in outcome:
        # still running: a progress sample is "now", not "after"
        after = {k: {**v, "live": True} for k, v in after.items()}
    names = sorted(set(before) | set(after), key=lambda n: (n.rsplit("-", 1)[0], int(n.rsplit("-", 1)[1])))
    return [{"partition": n, "before": before.get(n), "after": after.get(n)} for n in names]


def throttle_events(action: Action) -> list[dict[str, Any]]:
    return list(((action.parameters or {}).get("throttle") or {}).get("events") or [])
