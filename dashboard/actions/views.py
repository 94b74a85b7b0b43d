"""Operator actions: the preferred election form (preview, reason, submit) and the audit pages.

Permissions come from ``roles`` only; the JSON API (``api_ops``) calls the same helpers.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any, Final

from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods

from dashboard.actions import history, listing, movement_audit, roles
from dashboard.actions.election_submit import (
    MAX_REASON,
    TASK_NAME,
    ZooKeeperUnavailable,
    compute_plan,
    params_of,
    reject,
    submit,
)
from dashboard.actions.models import Action
from dashboard.clusters.models import Cluster

logger = logging.getLogger(__name__)

__all__ = ["MAX_REASON", "TASK_NAME", "action_detail", "action_list", "partition_history", "preferred_election"]
SCOPES: Final = ("partition", "topic", "broker", "imbalanced")
ACTION_FILTERS: Final = ("cluster", "kind", "status", "username", "q", "since", "until")
HISTORY_FILTERS: Final = ("kind", "q", "since", "until")


def forbidden(request: HttpRequest, what: str) -> HttpResponse:
    return HttpResponseForbidden(f"Your role ({roles.role_of(request.user) or 'none'}) may not {what}.")


@require_http_methods(["GET", "POST"])
def preferred_election(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    source = request.POST if request.method == "POST" else request.GET
    params = params_of(source)
    reason = str(request.POST.get("reason", "")).strip()
    if not roles.can_operate(request.user):
        if request.method == "POST":
            reject(request.user, cluster.name, params, reason[:MAX_REASON], "not allowed: operators only")
        return forbidden(request, "run preferred leader elections")
    context: dict[str, Any] = {
        "cluster": cluster,
        "params": params,
        "reason": reason,
        "scopes": SCOPES,
        "idempotency_key": uuid.uuid4().hex,
    }
    if request.method == "POST":
        outcome = submit(request.user, cluster, request.POST, request.POST.get("idempotency_key", ""))
        if outcome.action is not None:
            return redirect("actions:detail", pk=outcome.action.pk)
        context.update(error=outcome.error, scope=outcome.scope, plan=outcome.plan)
        return render(request, "actions/preferred_election.html", context, status=outcome.status)
    if not request.GET.get("scope"):
        return render(request, "actions/preferred_election.html", context)
    try:
        scope, plan = compute_plan(cluster, request.GET)
    except ValueError as exc:
        context["error"] = str(exc)
        return render(request, "actions/preferred_election.html", context, status=400)
    except ZooKeeperUnavailable as exc:
        context["error"] = str(exc)
        return render(request, "actions/preferred_election.html", context, status=503)
    if request.GET.get("format") == "json":
        return JsonResponse({"cluster": cluster.name, "scope": scope.as_dict(), **plan.as_dict()})
    context.update(scope=scope, plan=plan)
    return render(request, "actions/preferred_election.html", context)


@require_GET
def action_list(request: HttpRequest) -> HttpResponseBase:
    if not roles.can_view(request.user):
        return forbidden(request, "read the audit history")
    try:
        fmt = listing.wanted_format(request)
        since, until = listing.time_range(request.GET)
    except ValueError as exc:
        return listing.bad_request(str(exc), request.GET.get("format") == "json")
    qs = history.actions(request.GET, since, until)
    if fmt == "csv":
        return listing.csv_response(
            (history.action_row(a) for a in qs.iterator()), history.ACTION_FIELDS, f"actions-{int(time.time())}"
        )
    page = listing.page_of(qs, request, 50)
    if fmt == "json":
        return listing.json_page(page, action_json)
    filters = {k: request.GET.get(k, "") for k in ACTION_FILTERS}
    names = list(Cluster.objects.values_list("name", flat=True))
    return render(
        request,
        "actions/list.html",
        {
            "page": page,
            "filters": filters,
            "query": listing.query_string(filters),
            "statuses": Action.Status.choices,
            "kinds": Action.Kind.choices,
            "clusters": names if roles.can_operate(request.user) else [],
            "cluster_names": names,
            "can_administer": roles.can_administer(request.user),
        },
    )


def action_json(action: Action, with_changes: bool = False) -> dict[str, Any]:
    """An action as the API and ``?format=json`` answer it; ``final`` tells a poller to stop."""
    outcome = action.outcome or {}
    journal = outcome.get("journal") or {}
    data: dict[str, Any] = {
        "id": action.pk,
        "created": action.created.isoformat() if action.created else None,
        "username": action.username,
        "cluster": action.cluster,
        "kind": action.kind,
        "status": action.status,
        "final": action.status not in (Action.Status.QUEUED, Action.Status.RUNNING),
        "reason": action.reason,
        "parameters": action.parameters,
        "preview": action.preview,
        "outcome": {k: v for k, v in outcome.items() if k != "journal"},
        "partitions": outcome.get("partitions", []),
        "batches": outcome.get("batches", []),
        "batches_planned": len(journal.get("plan", [])) or None,
        "error": action.error,
        "started": action.started.isoformat() if action.started else None,
        "finished": action.finished.isoformat() if action.finished else None,
        "duration_ms": action.duration_ms,
        "controller_epoch": action.controller_epoch,
        "attempts": action.attempts,
        "idempotency_key": action.idempotency_key,
    }
    if with_changes:
        data["state_changes"] = [
            listing.json_rows([history.change_row(c) | {"topic": c.topic, "partition": c.partition}])[0][0]
            for c in action.state_changes.order_by("controller_epoch", "seq")[:1000]
        ]
    return data


@require_GET
def action_detail(request: HttpRequest, pk: int) -> HttpResponse:
    if not roles.can_view(request.user):
        return forbidden(request, "read the audit history")
    action = get_object_or_404(Action, pk=pk)
    if request.GET.get("format") == "json":
        return JsonResponse(action_json(action, with_changes=True))
    outcome = action.outcome or {}
    changes = action.state_changes.order_by("controller_epoch", "seq")
    return render(
        request,
        "actions/detail.html",
        {
            "action": action,
            "preview": action.preview or {},
            "results": outcome.get("partitions", []),
            "batches": outcome.get("batches", []),
            "parameters_json": json.dumps(action.parameters, indent=2, sort_keys=True),
            "live": action.status in (Action.Status.QUEUED, Action.Status.RUNNING),
            "changes": changes[:500],
            "changes_total": changes.count(),
            "movement": movement_audit.rows(action),
            "throttle_events": movement_audit.throttle_events(action),
        },
    )


@require_GET
def partition_history(request: HttpRequest, name: str, topic: str, partition: int) -> HttpResponseBase:
    """Every ingested state change of one partition (and its replicas), oldest first."""
    if not roles.can_view(request.user):
        return forbidden(request, "read the audit history")
    as_json = request.GET.get("format") == "json"
    try:
        fmt = listing.wanted_format(request)
        since, until = listing.time_range(request.GET)
    except ValueError as exc:
        return listing.bad_request(str(exc), as_json)
    kind = request.GET.get("kind", "").strip()
    qs = history.partition_changes(
        name, topic, partition, kind=kind, q=request.GET.get("q", ""), since=since, until=until
    )
    if fmt == "csv":
        return listing.csv_response(
            (history.change_row(c) for c in qs.iterator()),
            history.CHANGE_EXPORT_FIELDS,
            f"{name}-{topic}-{partition}-history",
        )
    page = listing.page_of(qs, request, 100)
    if fmt == "json":
        return listing.json_page(page, history.change_row, cluster=name, topic=topic, partition=partition)
    filters = {k: request.GET.get(k, "") for k in HISTORY_FILTERS}
    return render(
        request,
        "actions/partition_history.html",
        {
            "cluster_name": name,
            "topic": topic,
            "partition": partition,
            "page": page,
            "filters": filters,
            "query": listing.query_string(filters),
        },
    )
