"""Operator actions: the preferred election form (preview, reason, submit) and the audit pages."""

from __future__ import annotations

import csv
import json
import logging
import time
from typing import Any, Final

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render

from dashboard.actions import roles
from dashboard.actions.election import Plan, Scope, parse_scope, read_plan
from dashboard.actions.models import Action, StateChange
from dashboard.actions.zk import cluster_store
from dashboard.clusters.models import Cluster

logger = logging.getLogger(__name__)

TASK_NAME: Final = "workers.actions.preferred_election"
MAX_REASON: Final = 2000
CSV_FIELDS: Final = (
    "id", "created", "username", "cluster", "kind", "status", "reason", "parameters", "outcome", "error",
    "duration_ms", "controller_epoch",
)  # fmt: skip


def _forbidden(request: HttpRequest, what: str) -> HttpResponse:
    return HttpResponseForbidden(f"Your role ({roles.role_of(request.user) or 'none'}) may not {what}.")


def _record_rejection(request: HttpRequest, cluster: str, params: dict[str, Any], reason: str, error: str) -> Action:
    return Action.objects.create(
        user=request.user if request.user.is_authenticated else None,
        username=request.user.get_username(),
        cluster=cluster,
        kind=Action.Kind.PREFERRED_ELECTION,
        parameters=params,
        reason=reason,
        status=Action.Status.REJECTED,
        error=error,
    )


def _compute(cluster: Cluster, scope: Scope) -> Plan:
    with cluster_store(cluster.zookeeper_connect) as store:
        return read_plan(store, scope)


def preferred_election(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    source = request.POST if request.method == "POST" else request.GET
    params = {k: source.get(k, "") for k in ("scope", "topic", "partition", "broker")}
    reason = str(request.POST.get("reason", "")).strip()
    if not roles.can_operate(request.user):
        if request.method == "POST":
            _record_rejection(request, cluster.name, params, reason, "not allowed: operators only")
        return _forbidden(request, "run preferred leader elections")
    context: dict[str, Any] = {
        "cluster": cluster,
        "params": params,
        "reason": reason,
        "scopes": ("partition", "topic", "broker", "imbalanced"),
    }
    if request.method == "GET" and not request.GET.get("scope"):
        return render(request, "actions/preferred_election.html", context)
    try:
        scope = parse_scope(source)
        plan = _compute(cluster, scope)
    except ValueError as exc:
        return _reject(request, cluster, params, reason, str(exc), context)
    except Exception as exc:  # ZooKeeper unreachable, timeouts
        logger.warning("preview on %s failed: %s", cluster.name, exc)
        return _reject(
            request, cluster, params, reason, f"could not read ZooKeeper: {exc.__class__.__name__} {exc}", context, 503
        )
    context.update(scope=scope, plan=plan)
    if request.method == "GET" and request.GET.get("format") == "json":
        return JsonResponse({"cluster": cluster.name, "scope": scope.as_dict(), **plan.as_dict()})
    if request.method == "GET":
        return render(request, "actions/preferred_election.html", context)
    if not reason:
        return _reject(request, cluster, params, reason, "a reason is required", context)
    if len(reason) > MAX_REASON:
        return _reject(
            request, cluster, params, reason[:MAX_REASON], f"the reason is longer than {MAX_REASON} characters", context
        )
    if not plan.electable:
        return _reject(
            request,
            cluster,
            params,
            reason,
            "nothing to elect: no partition in scope can get its preferred leader",
            context,
        )
    action = Action.objects.create(
        user=request.user if request.user.is_authenticated else None,
        username=request.user.get_username(),
        cluster=cluster.name,
        kind=Action.Kind.PREFERRED_ELECTION,
        parameters=scope.as_dict(),
        reason=reason,
        preview=plan.as_dict(),
        status=Action.Status.QUEUED,
    )
    from dashboard.celery import app

    try:
        result = app.send_task(TASK_NAME, args=[action.pk])
    except Exception as exc:
        Action.objects.filter(pk=action.pk).update(
            status=Action.Status.FAILED, error=f"could not queue the task: {exc}"
        )
    else:
        Action.objects.filter(pk=action.pk).update(task_id=result.id or "")
    return redirect("actions:detail", pk=action.pk)


def _reject(
    request: HttpRequest,
    cluster: Cluster,
    params: dict[str, Any],
    reason: str,
    error: str,
    context: dict[str, Any],
    status: int = 400,
) -> HttpResponse:
    if request.method == "POST":
        _record_rejection(request, cluster.name, params, reason, error)
    context["error"] = error
    return render(request, "actions/preferred_election.html", context, status=status)


def _filtered(request: HttpRequest) -> QuerySet[Action]:
    qs = Action.objects.all()
    for field in ("cluster", "kind", "status", "username"):
        value = request.GET.get(field, "").strip()
        if value:
            qs = qs.filter(**{field: value})
    query = request.GET.get("q", "").strip()
    if query:
        qs = qs.filter(reason__icontains=query)
    return qs


def action_list(request: HttpRequest) -> HttpResponse:
    if not roles.can_view(request.user):
        return _forbidden(request, "read the audit history")
    qs = _filtered(request)
    if request.GET.get("format") == "csv":
        return _csv(qs)
    page = Paginator(qs, 50).get_page(request.GET.get("page"))
    filters = {k: request.GET.get(k, "") for k in ("cluster", "kind", "status", "username", "q")}
    query = "&".join(f"{k}={v}" for k, v in filters.items() if v)
    return render(
        request,
        "actions/list.html",
        {
            "page": page,
            "filters": filters,
            "query": query,
            "statuses": Action.Status.choices,
            "kinds": Action.Kind.choices,
            "clusters": list(Cluster.objects.values_list("name", flat=True)) if roles.can_operate(request.user) else [],
        },
    )


def _cell(value: Any) -> Any:
    """A CSV cell; text that a spreadsheet would run as a formula is quoted with a leading '."""
    if value is None:
        return ""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def _csv(qs: QuerySet[Action]) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="actions-{int(time.time())}.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_FIELDS)
    for a in qs.iterator():
        row = []
        for field in CSV_FIELDS:
            value = getattr(a, field)
            if field in ("parameters", "outcome"):
                value = json.dumps(value, sort_keys=True)
            elif field == "created":
                value = value.isoformat()
            row.append(_cell(value))
        writer.writerow(row)
    return response


def action_detail(request: HttpRequest, pk: int) -> HttpResponse:
    if not roles.can_view(request.user):
        return _forbidden(request, "read the audit history")
    action = get_object_or_404(Action, pk=pk)
    if request.GET.get("format") == "json":
        fields = ("id", "username", "cluster", "kind", "status", "reason", "parameters", "preview", "outcome")
        data: dict[str, Any] = {f: getattr(action, f) for f in fields}
        data.update(
            error=action.error,
            created=action.created.isoformat(),
            duration_ms=action.duration_ms,
            controller_epoch=action.controller_epoch,
        )
        return JsonResponse(data)
    outcome = action.outcome or {}
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
        },
    )


HISTORY_FIELDS: Final = (
    "controller_epoch", "seq", "ts", "kind", "cause", "entity", "from_state", "to_state", "leader_before",
    "leader_after", "leader_epoch_before", "leader_epoch_after", "isr_before", "isr_after", "error",
)  # fmt: skip


def partition_history(request: HttpRequest, name: str, topic: str, partition: int) -> HttpResponse:
    """Every ingested state change of one partition (and its replicas), oldest first."""
    if not roles.can_view(request.user):
        return _forbidden(request, "read the audit history")
    qs = StateChange.objects.filter(cluster=name, topic=topic, partition=partition).order_by("controller_epoch", "seq")
    if request.GET.get("format") == "csv":
        response = HttpResponse(content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{name}-{topic}-{partition}-history.csv"'
        writer = csv.writer(response)
        writer.writerow(HISTORY_FIELDS)
        for change in qs.iterator():
            values = [getattr(change, f) for f in HISTORY_FIELDS]
            writer.writerow(
                [
                    "" if v is None else (v.isoformat() if f == "ts" else v)
                    for f, v in zip(HISTORY_FIELDS, values, strict=True)
                ]
            )
        return response
    page = Paginator(qs, 100).get_page(request.GET.get("page"))
    return render(
        request,
        "actions/partition_history.html",
        {"cluster_name": name, "topic": topic, "partition": partition, "page": page},
    )
