"""Pages of a broker's history and of controller failovers (HTML, ``?format=csv`` and ``?format=json``)."""

from __future__ import annotations

from typing import Any, Final

from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.actions import history, listing, roles
from dashboard.actions.views import forbidden

BROKER_FILTERS: Final = ("event", "since", "until")
FAILOVER_FILTERS: Final = ("since", "until")


def broker_rows(request: HttpRequest, name: str, broker: int) -> tuple[str, Any]:
    """(format, rows or page) for a broker's history; ``ValueError`` on bad filters."""
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


@require_GET
def broker_history(request: HttpRequest, name: str, broker: int) -> HttpResponseBase:
    if not roles.can_view(request.user):
        return forbidden(request, "read the audit history")
    as_json = request.GET.get("format") == "json"
    try:
        fmt, data = broker_rows(request, name, broker)
    except ValueError as exc:
        return listing.bad_request(str(exc), as_json)
    if fmt == "csv":
        return listing.csv_response(data, history.BROKER_FIELDS, f"{name}-broker-{broker}-history")
    page, rows = data
    if fmt == "json":
        return _json(page, rows, cluster=name, broker=broker)
    filters = {k: request.GET.get(k, "") for k in BROKER_FILTERS}
    return render(
        request,
        "actions/broker_history.html",
        {
            "cluster_name": name,
            "broker": broker,
            "page": page,
            "rows": rows,
            "events": history.BROKER_EVENTS,
            "filters": filters,
            "query": listing.query_string(filters),
        },
    )


def _json(page: Any, rows: list[dict[str, Any]], **extra: Any) -> HttpResponse:
    from django.http import JsonResponse

    converted, _ = listing.json_rows(rows)
    return JsonResponse(
        {
            **extra,
            "count": page.paginator.count,
            "page": page.number,
            "pages": page.paginator.num_pages,
            "next_page": page.next_page_number() if page.has_next() else None,
            "results": converted,
        }
    )


def failover_rows(request: HttpRequest, name: str) -> tuple[str, Any]:
    fmt = listing.wanted_format(request)
    since, until = listing.time_range(request.GET)
    qs = history.failovers(name, since=since, until=until)
    if fmt == "csv":
        return fmt, (history.failover_of(c).as_row() for c in qs.iterator())
    page = listing.page_of(qs, request, 50)
    return fmt, (page, [history.failover_of(c).as_row() for c in page.object_list])


@require_GET
def failovers(request: HttpRequest, name: str) -> HttpResponseBase:
    if not roles.can_view(request.user):
        return forbidden(request, "read the audit history")
    as_json = request.GET.get("format") == "json"
    try:
        fmt, data = failover_rows(request, name)
    except ValueError as exc:
        return listing.bad_request(str(exc), as_json)
    if fmt == "csv":
        return listing.csv_response(data, history.FAILOVER_FIELDS, f"{name}-failovers")
    page, rows = data
    if fmt == "json":
        return _json(page, rows, cluster=name)
    filters = {k: request.GET.get(k, "") for k in FAILOVER_FILTERS}
    return render(
        request,
        "actions/failovers.html",
        {"cluster_name": name, "page": page, "rows": rows, "filters": filters, "query": listing.query_string(filters)},
    )
