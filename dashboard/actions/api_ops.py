"""JSON API for elections and impact previews (``/api/v1/``, docs/api.md; the history is ``dashboard.audit.api``).

Same rules as the pages: roles from ``roles`` (viewers read, operators act), session authentication
with CSRF on every POST (Django's middleware), actions only by POST (405 otherwise). Unlike the pages,
an anonymous client gets a JSON 401 instead of a redirect to the login form.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse

from dashboard.accounts import roles
from dashboard.accounts.access import api, error
from dashboard.actions.election_submit import MAX_REASON, ZooKeeperUnavailable, compute_plan, params_of, reject, submit
from dashboard.actions.impact_views import impact_json, run_impact
from dashboard.audit.views import action_json
from dashboard.clusters.api_request import cluster_and_body, find_cluster
from dashboard.clusters.models import Cluster


def _preview(name: str, answer: Callable[[Cluster], dict[str, Any]]) -> HttpResponse:
    """A read-only preview as JSON: 404 for an unknown cluster, 400 for bad parameters, 503 when
    ZooKeeper cannot be read."""
    cluster = find_cluster(name)
    if isinstance(cluster, JsonResponse):
        return cluster
    try:
        return JsonResponse(answer(cluster))
    except ValueError as exc:
        return error(400, str(exc))
    except ZooKeeperUnavailable as exc:
        return error(503, str(exc))


@api(roles.OPERATOR)
def election_preview(request: HttpRequest, name: str) -> HttpResponse:
    def answer(cluster: Cluster) -> dict[str, Any]:
        scope, plan = compute_plan(cluster, request.GET)
        return {"cluster": cluster.name, "scope": scope.as_dict(), **plan.as_dict()}

    return _preview(name, answer)


@login_not_required
def election_execute(request: HttpRequest, name: str) -> HttpResponse:
    """POST: run a preferred election. The operator check records refused attempts, like the form."""
    if not getattr(request.user, "is_authenticated", False):
        return error(401, "log in first: the API uses the dashboard's session (see docs/api.md)")
    if request.method != "POST":
        response = error(405, f"method {request.method} not allowed; use POST")
        response["Allow"] = "POST"
        return response
    found = cluster_and_body(request, name, lambda c, reason: reject(request.user, c.name, {}, "", reason))
    if isinstance(found, JsonResponse):
        return found
    cluster, data = found
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
    payload = action_json(outcome.action)
    payload["replayed"] = outcome.replayed
    response = JsonResponse(payload, status=outcome.status)
    response["Location"] = f"/api/v1/actions/{outcome.action.pk}/"
    return response


@api(roles.VIEWER)
def impact(request: HttpRequest, name: str) -> HttpResponse:
    def answer(cluster: Cluster) -> dict[str, Any]:
        target, result = run_impact(cluster, request.GET)
        return impact_json(cluster, target, result)

    return _preview(name, answer)
