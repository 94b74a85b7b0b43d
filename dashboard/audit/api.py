"""JSON API of the audit history (``/api/v1/actions/``, the partition, broker and failover histories).

The same views as the pages (``dashboard.audit.views``), answered as JSON unless the client asks for
CSV; viewers and up may read (``dashboard.accounts.access.api``).
"""

from __future__ import annotations

from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase

from dashboard.accounts import roles
from dashboard.accounts.access import View, api, error
from dashboard.audit import history, listing, views
from dashboard.audit.models import Action


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


def _json_of(page: View) -> View:
    """The API form of an audit page: viewers and up (JSON 401 / 403), JSON unless CSV was asked for."""

    @api(roles.VIEWER)
    @wraps(page)
    def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if "format" not in request.GET:
            query = request.GET.copy()
            query["format"] = "json"
            request.GET = query  # type: ignore[assignment]
        return page(request, *args, **kwargs)

    return inner


partition_history = _json_of(views.partition_history)
broker_history = _json_of(views.broker_history)
failovers = _json_of(views.failovers)
