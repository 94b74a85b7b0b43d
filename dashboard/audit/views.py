"""The audit pages: operator actions, a partition's and a broker's state changes, controller failovers.

Each answers HTML, ``?format=csv`` (the whole filtered set, streamed) and ``?format=json`` (one page);
the JSON API (``dashboard.audit.api``) answers the same views as JSON. Viewers and up may read them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from functools import wraps
from typing import Any, Final

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from dashboard.accounts import roles
from dashboard.accounts.access import forbidden
from dashboard.audit import history, listing, movement
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster

View = Callable[..., HttpResponseBase]


def readable(view: View) -> View:
    """GET only, viewers and up (403 otherwise); a filter that cannot be read is a 400 naming it
    (JSON when JSON was asked for), raised by ``listing`` as ``BadFilter``."""

    @require_GET
    @wraps(view)
    def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not roles.can_view(request.user):
            return forbidden(request, "read the audit history")
        try:
            return view(request, *args, **kwargs)
        except listing.BadFilter as exc:
            return listing.bad_request(str(exc), request.GET.get("format") == "json")

    return inner


def _filtered_page(request: HttpRequest, template: str, filter_keys: tuple[str, ...], **context: Any) -> HttpResponse:
    """An HTML list page with its filters filled in as sent and the query string its pager links keep."""
    filters = {k: request.GET.get(k, "") for k in filter_keys}
    return render(request, template, {**context, "filters": filters, "query": listing.query_string(filters)})


ACTION_FILTERS: Final = ("cluster", "kind", "status", "username", "q", "since", "until")
HISTORY_FILTERS: Final = ("kind", "q", "since", "until")
BROKER_FILTERS: Final = ("event", "since", "until")
FAILOVER_FILTERS: Final = ("since", "until")


def broker_rows(request: HttpRequest, name: str, broker: int) -> tuple[str, Any]:
    """(format, rows or page) for a broker's history; ``listing.BadFilter`` on bad filters."""
    fmt = listing.wanted_format(request)
    since, until = listing.time_range(request.GET)
    event = request.GET.get("event", "").strip()
    qs = history.broker_changes(name, broker, event=event, since=since, until=until)
    if fmt == "csv":
        streamed = (history.broker_row(c, broker) for c in qs.iterator())
        return fmt, (r for r in streamed if not event or r["event"] == event)
    page = listing.page_of(qs, request, 100)
    rows = history.filter_events([history.broker_row(c, broker) for c in page.object_list], event)
    return fmt, (page, rows)


@readable
def broker_history(request: HttpRequest, name: str, broker: int) -> HttpResponseBase:
    fmt, data = broker_rows(request, name, broker)
    if fmt == "csv":
        return listing.csv_response(data, history.BROKER_FIELDS, f"{name}-broker-{broker}-history")
    page, rows = data
    if fmt == "json":
        return listing.page_json(page, rows, cluster=name, broker=broker)
    return _filtered_page(
        request,
        "audit/broker_history.html",
        BROKER_FILTERS,
        cluster_name=name,
        broker=broker,
        page=page,
        rows=rows,
        events=history.BROKER_EVENTS,
    )


def failover_rows(request: HttpRequest, name: str) -> tuple[str, Any]:
    fmt = listing.wanted_format(request)
    since, until = listing.time_range(request.GET)
    qs = history.failovers(name, since=since, until=until)
    if fmt == "csv":
        return fmt, (history.failover_of(c).as_row() for c in qs.iterator())
    page = listing.page_of(qs, request, 50)
    return fmt, (page, [history.failover_of(c).as_row() for c in page.object_list])


@readable
def failovers(request: HttpRequest, name: str) -> HttpResponseBase:
    fmt, data = failover_rows(request, name)
    if fmt == "csv":
        return listing.csv_response(data, history.FAILOVER_FIELDS, f"{name}-failovers")
    page, rows = data
    if fmt == "json":
        return listing.page_json(page, rows, cluster=name)
    return _filtered_page(request, "audit/failovers.html", FAILOVER_FILTERS, cluster_name=name, page=page, rows=rows)


@readable
def action_list(request: HttpRequest) -> HttpResponseBase:
    fmt = listing.wanted_format(request)
    since, until = listing.time_range(request.GET)
    qs = history.actions(request.GET, since, until)
    if fmt == "csv":
        return listing.csv_response(
            (history.action_row(a) for a in qs.iterator()), history.ACTION_FIELDS, f"actions-{int(time.time())}"
        )
    page = listing.page_of(qs, request, 50)
    if fmt == "json":
        return listing.json_page(page, action_json)
    names = list(Cluster.objects.values_list("name", flat=True))
    return _filtered_page(
        request,
        "audit/list.html",
        ACTION_FILTERS,
        page=page,
        statuses=Action.Status.choices,
        kinds=Action.Kind.choices,
        clusters=names if roles.can_operate(request.user) else [],
        cluster_names=names,
        can_administer=roles.can_administer(request.user),
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


@readable
def action_detail(request: HttpRequest, pk: int) -> HttpResponseBase:
    action = get_object_or_404(Action, pk=pk)
    if request.GET.get("format") == "json":
        return JsonResponse(action_json(action, with_changes=True))
    outcome = action.outcome or {}
    changes = action.state_changes.order_by("controller_epoch", "seq")
    return render(
        request,
        "audit/detail.html",
        {
            "action": action,
            "preview": action.preview or {},
            "results": outcome.get("partitions", []),
            "batches": outcome.get("batches", []),
            "parameters_json": json.dumps(action.parameters, indent=2, sort_keys=True),
            "live": action.status in (Action.Status.QUEUED, Action.Status.RUNNING),
            "changes": changes[:500],
            "changes_total": changes.count(),
            "movement": movement.rows(action),
            "throttle_events": movement.throttle_events(action),
        },
    )


@readable
def partition_history(request: HttpRequest, name: str, topic: str, partition: int) -> HttpResponseBase:
    """Every ingested state change of one partition (and its replicas), oldest first."""
    fmt = listing.wanted_format(request)
    since, until = listing.time_range(request.GET)
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
    return _filtered_page(
        request,
        "audit/partition_history.html",
        HISTORY_FILTERS,
        cluster_name=name,
        topic=topic,
        partition=partition,
        page=page,
    )
