"""Reassignment operations shared by the pages, the JSON API and the worker (issue #7, item 3).

One place for: generating a proposal, validating a request, submitting it (idempotency, the audit
record, queuing the task), submitting a cancellation, and refreshing a running reassignment's
progress (which also records completion in the action). Permissions are checked by the callers
(``roles.can_operate`` for everything that acts, ``roles.can_view`` for progress).

Idempotency: every submission may carry a client key (form hidden input, API ``Idempotency-Key``
header). A second submission with the same key by the same user returns the first action and
has no other effect, whether the first was queued or rejected. Two submissions with the same key at
the same instant both pass the first look-up, so an action is created *then* checked against the
others with its key (``idempotency.create_first``, as ``election_submit`` does): the later one is recorded as a
rejected duplicate, answered with the first action, and never queued.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from django.utils import timezone

from controller_core.model import TopicPartition
from controller_core.reassign_plan import (
    ClusterView,
    Move,
    Proposal,
    Validation,
    data_to_copy,
    parse_document,
    propose,
    validate,
)
from controller_core.zk.store import ZkStore
from dashboard.actions import reassign_progress, reassign_push, reassign_rf, reassign_throttle
from dashboard.actions.idempotency import create_first, first_with_key
from dashboard.actions.reassign_cluster import (
    agent_replicas,
    partition_sizes,
    read_assignments,
    read_brokers,
    read_cluster_view,
    read_leaders,
)
from dashboard.actions.zk import cluster_store
from dashboard.audit import movement as movement_audit
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster

logger = logging.getLogger(__name__)

EXECUTE_TASK: Final = "workers.reassign.execute"
CANCEL_TASK: Final = "workers.reassign.cancel"
MAX_REASON: Final = 2000
MAX_KEY: Final = 100
MAX_STORED_INPUT: Final = 64 * 1024
RUNNING_STATES: Final = (Action.Status.QUEUED, Action.Status.RUNNING)


class BadRequest(ValueError):
    """Input the operator must fix; the message says how."""


def _tp_name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def parse_ints(values: Sequence[Any], what: str) -> list[int]:
    out = []
    for raw in values:
        text = str(raw).strip()
        if not text.isdigit():
            raise BadRequest(f"{what} must be non-negative whole numbers (got {raw!r})")
        out.append(int(text))
    return sorted(set(out))


# ------------------------------------------------------------------------------------------------
# generate
# ------------------------------------------------------------------------------------------------
def _chosen(topics: Collection[str]) -> list[str]:
    names = sorted({t.strip() for t in topics if t and t.strip()})
    if not names:
        raise BadRequest("choose at least one topic")
    return names


@dataclass(slots=True)
class _Topics:
    """The chosen topics as ZooKeeper has them: partitions being reassigned and each partition's
    current replicas (the target of a move in flight, so a proposal builds on it)."""

    busy: list[str]
    current: dict[TopicPartition, tuple[int, ...]]


def _read_topics(store: ZkStore, names: list[str]) -> _Topics:
    """``BadRequest`` naming the topics that do not exist."""
    existing = store.get_all_topics()
    missing = [t for t in names if t not in existing]
    if missing:
        raise BadRequest(f"unknown topic(s) {', '.join(missing)}")
    assignments = read_assignments(store, names)
    busy = sorted(_tp_name(tp) for tp, a in assignments.items() if a.is_being_reassigned)
    current = {tp: tuple(a.target_replicas if a.is_being_reassigned else a.replicas) for tp, a in assignments.items()}
    return _Topics(busy, current)


def generate(cluster: Cluster, topics: Collection[str], brokers: Collection[int]) -> dict[str, Any]:
    """A balanced proposal for ``topics`` onto ``brokers`` with the data to copy; ``BadRequest`` for
    unknown topics or brokers and impossible requests."""
    names = _chosen(topics)
    if not brokers:
        raise BadRequest("choose at least one target broker")
    with cluster_store(cluster.zookeeper_connect) as store:
        registered = read_brokers(store)
        unknown_brokers = sorted(set(brokers) - set(registered))
        if unknown_brokers:
            raise BadRequest(
                f"unknown broker(s) {', '.join(map(str, unknown_brokers))} "
                f"(registered brokers: {', '.join(map(str, sorted(registered))) or 'none'})"
            )
        chosen = _read_topics(store, names)
        try:
            proposal = propose(chosen.current, {b: registered[b].rack for b in brokers})
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        return _shown(proposal, store, registered, names, chosen)


def generate_rf(cluster: Cluster, topics: Collection[str], factor: Any) -> dict[str, Any]:
    """A replication-factor change of ``topics`` to ``factor`` (``reassign_rf``), in the proposal's
    shape; ``BadRequest`` for unknown topics, a factor below 1 or above the live brokers, mixed racks."""
    names = _chosen(topics)
    with cluster_store(cluster.zookeeper_connect) as store:
        registered = read_brokers(store)
        try:
            rf = reassign_rf.check_factor(factor, len(registered))
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        chosen = _read_topics(store, names)
        try:
            proposal = reassign_rf.plan(chosen.current, rf, {b: info.rack for b, info in registered.items()})
        except ValueError as exc:
            raise BadRequest(str(exc)) from None
        shown = _shown(proposal, store, registered, names, chosen)
    return {**shown, "replication_factor": rf, "change_replication_factor": True}


def _shown(
    proposal: Proposal, store: ZkStore, registered: Mapping[int, Any], names: list[str], chosen: _Topics
) -> dict[str, Any]:
    """A proposal as the wizard shows it: with the data its moves copy, the partitions already being
    reassigned and each broker's rack."""
    changed = proposal.changed
    sizes = partition_sizes(store, registered, [TopicPartition(m.topic, m.partition) for m in changed])
    out = proposal.as_dict()
    out.update(
        topics=names,
        data_to_copy=data_to_copy(changed, sizes),
        being_reassigned=chosen.busy,
        racks={str(b): registered[b].rack if b in registered else None for b in proposal.brokers},
    )
    return out


def current_table(cluster: Cluster, topics: Collection[str]) -> dict[str, Any]:
    """The topics' current assignment in the proposal's shape (nothing moved), to edit by hand."""
    names = _chosen(topics)
    with cluster_store(cluster.zookeeper_connect) as store:
        chosen = _read_topics(store, names)
        registered = read_brokers(store)
    moves = [Move(tp.topic, tp.partition, r, r) for tp, r in sorted(chosen.current.items())]
    brokers = tuple(sorted({r for m in moves for r in m.current} | set(registered)))
    out = Proposal(moves, brokers).as_dict()
    out.update(
        topics=names,
        data_to_copy={"known": True, "messages": 0, "bytes": 0, "partial_messages": 0, "unknown_partitions": []},
        being_reassigned=chosen.busy,
        racks={str(b): registered[b].rack if b in registered else None for b in brokers},
    )
    return out


# ------------------------------------------------------------------------------------------------
# validate
# ------------------------------------------------------------------------------------------------
@dataclass(slots=True)
class Checked:
    validation: Validation
    document: Any
    view: ClusterView | None


def check(cluster: Cluster, raw: str | bytes | Mapping[str, Any], replace: bool, rf_change: bool = False) -> Checked:
    """Parse and validate a request against the cluster as ZooKeeper has it now (``rf_change``: the
    operator asked for a replication-factor change, so replica counts may differ)."""
    document, error = parse_document(raw)
    if error is not None:
        v = Validation()
        v.add(error)
        return Checked(v, None, None)
    topics: set[str] | None = None
    if isinstance(document, Mapping) and isinstance(document.get("partitions"), list):
        named = (e.get("topic") for e in document["partitions"] if isinstance(e, Mapping))
        topics = {t for t in named if isinstance(t, str) and t}
    with cluster_store(cluster.zookeeper_connect) as store:
        view = read_cluster_view(store, topics)
    return Checked(validate(document, view, replace=replace, allow_rf_change=rf_change), document, view)


def summary(checked: Checked) -> dict[str, Any]:
    out = checked.validation.as_dict()
    if checked.validation.ok and checked.view is not None:
        moves = []
        moved = 0
        for tp, target in sorted(checked.validation.partitions.items()):
            current = checked.view.assignments[tp]
            origin = current.origin_replicas if current.is_being_reassigned else current.replicas
            adding = [r for r in target if r not in origin]
            moved += len(adding)
            moves.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "current": list(origin),
                    "proposed": list(target),
                    "adding": adding,
                    "removing": [r for r in origin if r not in target],
                }
            )
        out.update(moved_replicas=moved, moves=moves)
    return out


# ------------------------------------------------------------------------------------------------
# submit
# ------------------------------------------------------------------------------------------------
def clean_key(raw: str | None) -> str:
    key = (raw or "").strip()
    if len(key) > MAX_KEY:
        raise BadRequest(f"the idempotency key is longer than {MAX_KEY} characters")
    return key


def _stored_input(raw: str | bytes | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(raw, Mapping):
        text = json.dumps(raw, sort_keys=True, default=str)
    else:
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
    if len(text) > MAX_STORED_INPUT:
        return {"input_bytes": len(text.encode()), "input": text[:MAX_STORED_INPUT], "input_truncated": True}
    return {"input": text}


def record_rejection(
    user: Any, cluster: str, kind: str, params: dict[str, Any], reason: str, error: str, key: str
) -> Action:
    return Action.objects.create(
        user=user if getattr(user, "is_authenticated", False) else None,
        username=user.get_username() if user is not None else "",
        cluster=cluster,
        kind=kind,
        parameters=params,
        reason=reason[:MAX_REASON],
        status=Action.Status.REJECTED,
        error=error,
        idempotency_key=key,
    )


@dataclass(slots=True)
class Submitted:
    action: Action
    created: bool
    errors: list[str]
    summary: dict[str, Any] | None = None


def submit(
    user: Any,
    cluster: Cluster,
    raw: str | bytes | Mapping[str, Any],
    reason: str,
    replace: bool,
    key: str,
    throttle: int | None = None,
    rf_change: bool = False,
) -> Submitted:
    """Validate and queue a reassignment; a rejected request is recorded (status rejected) and
    nothing is written. ``BadRequest`` is never raised for the request's content: every problem
    comes back in ``errors`` with the rejected action."""
    earlier = first_with_key(user, key, Action.Kind.REASSIGNMENT)
    if earlier is not None:
        return Submitted(earlier, False, [earlier.error] if earlier.error else [])
    reason = reason.strip()
    errors: list[str] = []
    if not reason:
        errors.append("a reason is required")
    elif len(reason) > MAX_REASON:
        errors.append(f"the reason is longer than {MAX_REASON} characters")
    checked = check(cluster, raw, replace, rf_change)
    errors.extend(checked.validation.errors)
    if errors:
        params = {**_stored_input(raw), "replace": replace}
        action = record_rejection(user, cluster.name, Action.Kind.REASSIGNMENT, params, reason, "; ".join(errors), key)
        return Submitted(action, True, errors)
    assert checked.view is not None
    info = summary(checked)
    partitions = [
        {"topic": m["topic"], "partition": m["partition"], "replicas": m["proposed"], "origin": m["current"]}
        for m in info["moves"]
    ]
    preview: dict[str, Any] = {"moved_replicas": info["moved_replicas"], "moves": info["moves"]}
    try:
        with cluster_store(cluster.zookeeper_connect) as store:
            tps = [TopicPartition(m["topic"], m["partition"]) for m in info["moves"]]
            sizes = partition_sizes(store, read_brokers(store), tps)
        moves = [Move(m["topic"], m["partition"], tuple(m["current"]), tuple(m["proposed"])) for m in info["moves"]]
        preview["data_to_copy"] = data_to_copy(moves, sizes)
    except Exception as exc:  # sizes are informative; their absence must not block the action
        logger.warning("reassignment preview sizes on %s: %s", cluster.name, exc)
        preview["data_to_copy"] = {"known": False, "messages": None, "bytes": None}
    action, first = create_first(
        user,
        key,
        cluster=cluster.name,
        kind=Action.Kind.REASSIGNMENT,
        parameters={
            "partitions": partitions,
            "replace": replace,
            "replacing": checked.validation.as_dict()["replacing"],
            **({"change_replication_factor": True} if rf_change else {}),
            **(
                {"throttle": reassign_throttle.initial(throttle, user.get_username(), reason)}
                if throttle is not None
                else {}
            ),
        },
        reason=reason,
        preview=preview,
    )
    if first is not None:
        return Submitted(first, False, [first.error] if first.error else [])
    _send(action, EXECUTE_TASK)
    return Submitted(action, True, [], info)


def _send(action: Action, task: str) -> None:
    from dashboard.celery import app

    try:
        result = app.send_task(task, args=[action.pk])
    except Exception as exc:
        Action.objects.filter(pk=action.pk).update(
            status=Action.Status.FAILED, error=f"could not queue the task: {exc}"
        )
        action.refresh_from_db()
    else:
        Action.objects.filter(pk=action.pk).update(task_id=result.id or "")


# ------------------------------------------------------------------------------------------------
# cancel
# ------------------------------------------------------------------------------------------------
def cancel_unavailable(cluster: Cluster) -> str:
    """Why cancel cannot be offered for this cluster ("" when it can)."""
    if cluster.mode != Cluster.Mode.MANAGED:
        return (
            "Cancel is not available for an observed cluster: Kafka cancels through the controller's "
            "AlterPartitionReassignments API (kafka-reassign-partitions --cancel), which this dashboard "
            "only reaches on clusters run by our controller."
        )
    return ""


def submit_cancel(user: Any, cluster: Cluster, target: Action, reason: str, key: str) -> Submitted:
    earlier = first_with_key(user, key, Action.Kind.REASSIGNMENT_CANCEL)
    if earlier is not None:
        return Submitted(earlier, False, [earlier.error] if earlier.error else [])
    reason = reason.strip()
    params = {"reassignment": target.pk}
    errors = []
    unavailable = cancel_unavailable(cluster)
    if unavailable:
        errors.append(unavailable)
    if target.kind != Action.Kind.REASSIGNMENT or target.cluster != cluster.name:
        errors.append(f"action #{target.pk} is not a reassignment on {cluster.name}")
    elif target.status not in RUNNING_STATES:
        errors.append(f"reassignment #{target.pk} is {target.status}: nothing to cancel")
    if not reason:
        errors.append("a reason is required")
    elif len(reason) > MAX_REASON:
        errors.append(f"the reason is longer than {MAX_REASON} characters")
    if errors:
        action = record_rejection(
            user, cluster.name, Action.Kind.REASSIGNMENT_CANCEL, params, reason, "; ".join(errors), key
        )
        return Submitted(action, True, errors)
    action, first = create_first(
        user,
        key,
        cluster=cluster.name,
        kind=Action.Kind.REASSIGNMENT_CANCEL,
        parameters={**params, "partitions": target.parameters.get("partitions", [])},
        reason=reason,
    )
    if first is not None:
        return Submitted(first, False, [first.error] if first.error else [])
    _send(action, CANCEL_TASK)
    return Submitted(action, True, [])


# ------------------------------------------------------------------------------------------------
# throttle, changed live
# ------------------------------------------------------------------------------------------------
def change_throttle(user: Any, cluster: Cluster, target: Action, rate: Any, reason: str) -> dict[str, Any]:
    """Change the replication throttle of a running reassignment to ``rate`` bytes/s (audited on
    the reassignment with who and why). ``BadRequest`` (nothing written) for a rate that is not a
    positive whole number, a missing reason, or a reassignment that is not running."""
    try:
        value = reassign_throttle.parse_rate(rate)
    except reassign_throttle.ThrottleError as exc:
        raise BadRequest(str(exc)) from None
    reason = (reason or "").strip()
    if not reason:
        raise BadRequest("a reason is required")
    if len(reason) > MAX_REASON:
        raise BadRequest(f"the reason is longer than {MAX_REASON} characters")
    if target.kind != Action.Kind.REASSIGNMENT or target.cluster != cluster.name:
        raise BadRequest(f"action #{target.pk} is not a reassignment on {cluster.name}")
    target.refresh_from_db()
    if target.status not in RUNNING_STATES:
        raise BadRequest(f"reassignment #{target.pk} is {target.status}: there is no throttle to change")
    with cluster_store(cluster.zookeeper_connect) as store:
        try:
            changed = reassign_throttle.change_rate(target, store, value, user.get_username(), reason)
        except reassign_throttle.ThrottleError as exc:
            raise BadRequest(str(exc)) from None
    target.refresh_from_db()
    push(target)  # the open progress pages show the new rate and its audit line at once
    return changed


# ------------------------------------------------------------------------------------------------
# progress
# ------------------------------------------------------------------------------------------------
def requested_of(action: Action) -> tuple[dict[TopicPartition, tuple[int, ...]], dict[TopicPartition, tuple[int, ...]]]:
    requested: dict[TopicPartition, tuple[int, ...]] = {}
    origin: dict[TopicPartition, tuple[int, ...]] = {}
    for p in action.parameters.get("partitions") or []:
        tp = TopicPartition(str(p["topic"]), int(p["partition"]))
        requested[tp] = tuple(int(r) for r in p["replicas"])
        origin[tp] = tuple(int(r) for r in p.get("origin") or ())
    return requested, origin


def read_progress(store: ZkStore, action: Action, now: float | None = None) -> dict[str, Any]:
    """The live progress of ``action`` (ZooKeeper + agents), given its previous sample."""
    requested, origin = requested_of(action)
    topics = {tp.topic for tp in requested}
    assignments = read_assignments(store, topics)
    leaders = read_leaders(store, [tp for tp in requested if tp in assignments])
    pending = store.get_partition_reassignment()
    copying = [tp for tp, a in assignments.items() if tp in requested and a.is_being_reassigned]
    wanted: set[int] = set()
    for tp in copying:
        wanted.update(assignments[tp].adding_replicas)
        if tp in leaders and leaders[tp].leader >= 0:
            wanted.add(leaders[tp].leader)
    agents = agent_replicas(read_brokers(store), sorted(wanted), topics) if wanted else {}
    previous = (action.outcome or {}).get("progress")
    return reassign_progress.compute(
        requested, origin, assignments, leaders, pending, agents, time.time() if now is None else now, previous
    )


def refresh(action: Action, store: ZkStore) -> dict[str, Any]:
    """Read progress, store it in the outcome while the action runs, and record completion."""
    progress = read_progress(store, action)
    if action.status != Action.Status.RUNNING or not (action.outcome or {}).get("written"):
        return progress
    outcome = {**(action.outcome or {}), "progress": progress}
    updates: dict[str, Any] = {"outcome": outcome}
    if progress["done"]:
        # Never left behind: the throttle goes first, so a finished reassignment has none (a failure
        # here leaves it running and the next refresh tries again).
        reassign_throttle.remove_for(
            action, store, reassign_throttle.SYSTEM_USER, "the reassignment finished (all partitions settled)"
        )
        outcome["after"] = movement_audit.from_rows(progress["partitions"])
        status, error = reassign_progress.final_status(progress)
        finished = timezone.now()
        updates.update(status=status, error=error, finished=finished)
        if action.started is not None:
            updates["duration_ms"] = int((finished - action.started).total_seconds() * 1000)
    if Action.objects.filter(pk=action.pk, status=Action.Status.RUNNING).update(**updates):
        for field, value in updates.items():
            setattr(action, field, value)
    return progress


def progress_document(cluster: Cluster, action: Action) -> dict[str, Any]:
    """The progress document (``reassign_push.document``) with progress read now while it runs: the
    JSON API, and the page's fallback when its WebSocket is down."""
    progress: dict[str, Any] | None = None
    stale = ""
    if action.status == Action.Status.RUNNING:
        try:
            with cluster_store(cluster.zookeeper_connect) as store:
                progress = refresh(action, store)
        except Exception as exc:
            logger.warning("progress of #%s: %s", action.pk, exc)
            stale = f"could not read the cluster: {exc.__class__.__name__}"
    return reassign_push.document(action, progress, cancel_unavailable(cluster), stale)


def push(action: Action, progress: Mapping[str, Any] | None = None) -> bool:
    """Push the progress document of ``action`` (``progress`` just measured, else the stored one) to
    its open progress pages (``reassign_push``); False when it could not."""
    cluster = Cluster.objects.filter(name=action.cluster).first()
    note = cancel_unavailable(cluster) if cluster is not None else ""
    return reassign_push.publish(reassign_push.document(action, progress, note))
