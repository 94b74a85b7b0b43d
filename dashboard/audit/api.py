"""JSON API of the audit history (``/api/v1/actions/``, the partition, broker and failover histories).

The same views as the pages (``dashboard.audit.views``), answered as JSON unless the client asks for
CSV; viewers and up may read (``dashboard.accounts.access.api``).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase

from dashboard.accounts import roles
from dashboard.accounts.access import api, error
from dashboard.audit import history, listing, views
from dashboard.audit.models import Action


def _as_json(request: HttpRequest) -> HttpRequest:
    """Histories answer JSON unless the client asked for CSV."""
    if "format" not in request.GET:
        query = request.GET.copy()
        query["format"] = "json"
        request.GET = query  # type: ignore[assignment]
    return request


@api(roles.VIEWER)
def action_list(request: HttpRequest) -> HttpResponse:
    try:
        since, until = listing.time_range(request.GET)
    except ValueError as exc:
        return error(400, str(exc))
    page = listing.page_of(history.actions(request.GET, since, until), request, 50)
    return listing.json_page(page, views.action_json)


@api(roles.VIEWER)
def action_detail(request: HttpRequest, pk: int) -> HttpResponse:
    action = Action.objects.filter(pk=pk).first()
    if action is None:
        return error(404, f"no action #{pk}")
    return JsonResponse(views.action_json(action, with_changes=True))


@api(roles.VIEWER)
def partition_history(request: HttpRequest, name: str, topic: str, partition: int) -> HttpResponseBase:
    return views.partition_history(_as_json(request), name, topic, partition)


@api(roles.VIEWER)
def broker_history(request: HttpRequest, name: str, broker: int) -> HttpResponseBase:
    return views.broker_history(_as_json(request), name, broker)


@api(roles.VIEWER)
def failovers(request: HttpRequest, name: str) -> HttpResponseBase:
    return views.failovers(_as_json(request), name)
