"""Submitting a preferred leader election: the one code path behind the form and the JSON API.

Validates the scope and reason, recomputes the preview from ZooKeeper (what was shown may be stale),
records the ``Action`` and queues the Celery task by name. Every refusal is recorded as a *rejected*
action and writes nothing to ZooKeeper. A request carrying an idempotency key the same user already
used returns the first action instead of acting twice (double click, client retry after a timeout).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from dashboard.actions import election_catchup
from dashboard.actions.election import Plan, Scope, parse_scope, read_plan
from dashboard.actions.idempotency import create_first, first_with_key
from dashboard.actions.zk import cluster_store
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster

logger = logging.getLogger(__name__)

TASK_NAME: Final = "workers.actions.preferred_election"
MAX_REASON: Final = 2000
MAX_KEY: Final = 100
PARAM_FIELDS: Final = ("scope", "topic", "partition", "broker", "catch_up", "min_isr_s", "max_lag", "timeout_s")


class ZooKeeperUnavailable(Exception):
    """The cluster's ZooKeeper could not be read (answered 503)."""


@dataclass
class Outcome:
    """What a submission did: ``action`` is the recorded (or replayed) action; ``status`` the HTTP code."""

    status: int
    action: Action | None = None
    error: str = ""
    scope: Scope | None = None
    plan: Plan | None = None
    replayed: bool = False
    params: dict[str, Any] = field(default_factory=dict)


def params_of(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: data.get(k, "") if data.get(k) is not None else "" for k in PARAM_FIELDS}


def compute_plan(cluster: Cluster, data: Mapping[str, Any]) -> tuple[Scope, Plan]:
    """Parse and preview; ``ValueError`` for bad input, ``ZooKeeperUnavailable`` when ZooKeeper fails.
    With the catch-up option, the plan also says which partitions would move now and which wait."""
    scope = parse_scope(data)
    catch_up = election_catchup.parse(data)
    try:
        with cluster_store(cluster.zookeeper_connect) as store:
            plan = read_plan(store, scope)
            if catch_up is None:
                return scope, plan
            rows = candidates(plan)
            conditions = election_catchup.read_conditions(store, rows)
            return scope, replace(plan, catch_up=election_catchup.preview(catch_up, rows, conditions))
    except ValueError:
        raise
    except Exception as exc:  # connection loss, timeouts, no such chroot
        logger.warning("preview on %s failed: %s", cluster.name, exc)
        raise ZooKeeperUnavailable(f"could not read ZooKeeper: {exc.__class__.__name__} {exc}") from exc


def candidates(plan: Plan) -> list[dict[str, Any]]:
    """What a catch-up election may move: the electable partitions and those whose preferred replica
    is live but not in the ISR yet (it may rejoin while the election waits)."""
    rows = [r.as_dict() for r in plan.electable]
    rows += [r.as_dict() for r in plan.blocked if election_catchup.waitable(r.blocked, r.preferred, plan.live_brokers)]
    return sorted(rows, key=lambda r: (r["topic"], r["partition"]))


def clean_key(raw: Any) -> str:
    key = str(raw or "").strip()
    if len(key) > MAX_KEY:
        raise ValueError(f"the idempotency key is longer than {MAX_KEY} characters")
    return key


def reject(user: Any, cluster: str, params: Mapping[str, Any], reason: str, error: str, key: str = "") -> Action:
    return Action.objects.create(
        user=user if getattr(user, "is_authenticated", False) else None,
        username=user.get_username() if getattr(user, "is_authenticated", False) else "",
        cluster=cluster,
        kind=Action.Kind.PREFERRED_ELECTION,
        parameters=dict(params),
        reason=reason,
        status=Action.Status.REJECTED,
        error=error,
        idempotency_key=key,
    )


def submit(user: Any, cluster: Cluster, data: Mapping[str, Any], raw_key: Any = "") -> Outcome:
    """Validate, preview and queue; the caller has already checked the operator role."""
    params = params_of(data)
    reason = str(data.get("reason", "") or "").strip()
    try:
        key = clean_key(raw_key)
    except ValueError as exc:
        reject(user, cluster.name, params, reason[:MAX_REASON], str(exc))
        return Outcome(400, error=str(exc), params=params)
    first = first_with_key(user, key, Action.Kind.PREFERRED_ELECTION)
    if first is not None:
        return Outcome(200, action=first, replayed=True, params=params, error=first.error)
    try:
        scope, plan = compute_plan(cluster, data)
    except ValueError as exc:
        reject(user, cluster.name, params, reason[:MAX_REASON], str(exc), key)
        return Outcome(400, error=str(exc), params=params)
    except ZooKeeperUnavailable as exc:
        reject(user, cluster.name, params, reason[:MAX_REASON], str(exc))
        return Outcome(503, error=str(exc), params=params)
    outcome = Outcome(400, scope=scope, plan=plan, params=params)
    if not reason:
        outcome.error = "a reason is required"
    elif len(reason) > MAX_REASON:
        outcome.error = f"the reason is longer than {MAX_REASON} characters"
    elif not plan.electable and not (plan.catch_up and (plan.catch_up["now"] or plan.catch_up["waiting"])):
        outcome.error = "nothing to elect: no partition in scope can get its preferred leader"
    if outcome.error:
        reject(user, cluster.name, params, reason[:MAX_REASON], outcome.error, key)
        return outcome
    action, earlier = create_first(
        user,
        key,
        cluster=cluster.name,
        kind=Action.Kind.PREFERRED_ELECTION,
        parameters={**scope.as_dict(), **({"catch_up": plan.catch_up["option"]} if plan.catch_up else {})},
        reason=reason,
        preview=_preview_of(plan),
    )
    if earlier is not None:  # a concurrent duplicate won the race
        return Outcome(200, action=earlier, replayed=True, params=params)
    _queue(action)
    action.refresh_from_db()
    return Outcome(201, action=action, scope=scope, plan=plan, params=params)


def _preview_of(plan: Plan) -> dict[str, Any]:
    preview = plan.as_dict()
    if plan.catch_up is not None:
        # every partition the election may move, now or once caught up
        preview["electable"] = sorted(
            plan.catch_up["now"] + [{k: v for k, v in w.items() if k != "why"} for w in plan.catch_up["waiting"]],
            key=lambda r: (r["topic"], r["partition"]),
        )
    return preview


def _queue(action: Action) -> None:
    from dashboard.celery import app

    try:  # the one task for every preferred election; it honours the action's catch-up option
        result = app.send_task(TASK_NAME, args=[action.pk])
    except Exception as exc:
        Action.objects.filter(pk=action.pk).update(
            status=Action.Status.FAILED, error=f"could not queue the task: {exc}"
        )
    else:
        Action.objects.filter(pk=action.pk).update(task_id=result.id or "")
