"""JSON API for elections, impact previews and the audit history (``/api/v1/``, docs/api.md).

Same rules as the pages: roles from ``roles`` (viewers read, operators act), session authentication
with CSRF on every POST (Django's middleware), actions only by POST (405 otherwise). Unlike the pages,
an anonymous client gets a JSON 401 instead of a redirect to the login form.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any, Final

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase

from dashboard.actions import history, history_views, listing, roles, views
from dashboard.actions.election_submit import MAX_REASON, ZooKeeperUnavailable, compute_plan, params_of, reject, submit
from dashboard.actions.impact_views import impact_json, run_impact
from dashboard.actions.models import Action
from dashboard.clusters.models import Cluster

View = Callable[..., HttpResponseBase]
CHECKS: Final = {roles.VIEWER: roles.can_view, roles.OPERATOR: roles.can_operate, roles.ADMIN: roles.can_administer}


def error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, "status": status, **extra}, status=status)


def api(role: str, methods: tuple[str, ...] = ("GET",)) -> Callable[[View], View]:
    """Authenticate (401), check the HTTP method (405) and the role (403), all answered as JSON."""

    def wrap(view: View) -> View:
        @login_not_required
        @wraps(view)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not getattr(request.user, "is_authenticated", False):
                return error(401, "log in first: the API uses the dashboard's session (see docs/api.md)")
            if request.method not in methods:
                response = error(405, f"method {request.method} not allowed; use {', '.join(methods)}")
                response["Allow"] = ", ".join(methods)
                return response
            if not CHECKS[role](request.user):
                return error(403, f"your role ({roles.role_of(request.user) or 'none'}) may not do this: {role}s only")
            return view(request, *args, **kwargs)

        return inner

    return wrap


def _body(request: HttpRequest) -> dict[str, Any]:
    """A JSON object body, or form fields; ``ValueError`` for anything else."""
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"{}")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"the body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError("the body must be a JSON object")
        return data
    return {k: request.POST.get(k) for k in request.POST}


def _as_json(request: HttpRequest) -> HttpRequest:
    """Histories answer JSON unless the client asked for CSV."""
    if "format" not in request.GET:
        query = request.GET.copy()
        query["format"] = "json"
        request.GET = query  # type: ignore[assignment]
    return request


@api(roles.OPERATOR)
def election_preview(request: HttpRequest, name: str) -> HttpResponse:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        return error(404, f"no cluster named {name!r}")
    try:
        scope, plan = compute_plan(cluster, request.GET)
    except ValueError as exc:
        return error(400, str(exc))
    except ZooKeeperUnavailable as exc:
        return error(503, str(exc))
    return JsonResponse({"cluster": cluster.name, "scope": scope.as_dict(), **plan.as_dict()})


@login_not_required
def election_execute(request: HttpRequest, name: str) -> HttpResponse:
    """POST: run a preferred election. The operator check records refused attempts, like the form."""
    if not getattr(request.user, "is_authenticated", False):
        return error(401, "log in first: the API uses the dashboard's session (see docs/api.md)")
    if request.method != "POST":
        response = error(405, f"method {request.method} not allowed; use POST")
        response["Allow"] = "POST"
        return response
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        return error(404, f"no cluster named {name!r}")
    try:
        data = _body(request)
    except ValueError as exc:
        reject(request.user, cluster.name, {}, "", str(exc))
        return error(400, str(exc))
    if not roles.can_operate(request.user):
        reason = str(data.get("reason", "") or "")[:MAX_REASON]
        reject(request.user, cluster.name, params_of(data), reason, "not allowed: operators only")
        return error(403, f"your role ({roles.role_of(request.user) or 'none'}) may not run preferred leader elections")
    key = request.headers.get("Idempotency-Key", "") or data.get("idempotency_key", "")
    outcome = submit(request.user, cluster, data, key)
    if outcome.action is None:
        body: dict[str, Any] = {}
        if outcome.plan is not None:
            body["preview"] = outcome.plan.as_dict()
        return error(outcome.status, outcome.error, **body)
    payload = views.action_json(outcome.action)
    payload["replayed"] = outcome.replayed
    response = JsonResponse(payload, status=outcome.status)
    response["Location"] = f"/api/v1/actions/{outcome.action.pk}/"
    return response


@api(roles.VIEWER)
def impact(request: HttpRequest, name: str) -> HttpResponse:
    cluster = Cluster.objects.filter(name=name).first()
    if cluster is None:
        return error(404, f"no cluster named {name!r}")
    try:
        target, result = run_impact(cluster, request.GET)
    except ValueError as exc:
        return error(400, str(exc))
    except ZooKeeperUnavailable as exc:
        return error(503, str(exc))
    return JsonResponse(impact_json(cluster, target, result))


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
    return history_views.broker_history(_as_json(request), name, broker)


@api(roles.VIEWER)
def failovers(request: HttpRequest, name: str) -> HttpResponseBase:
    return history_views.failovers(_as_json(request), name)
