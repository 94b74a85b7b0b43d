"""The preferred leader election form: preview, reason, submit (the audit pages are ``dashboard.audit``).

Permissions come from ``dashboard.accounts.roles`` only; the JSON API (``api_ops``) calls the same helpers.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Final

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from dashboard.accounts import roles
from dashboard.accounts.access import forbidden
from dashboard.actions.election_submit import (
    MAX_REASON,
    TASK_NAME,
    ZooKeeperUnavailable,
    compute_plan,
    params_of,
    reject,
    submit,
)
from dashboard.clusters.models import Cluster

logger = logging.getLogger(__name__)

__all__ = ["MAX_REASON", "TASK_NAME", "preferred_election"]
SCOPES: Final = ("partition", "topic", "broker", "imbalanced")


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
            return redirect("audit:detail", pk=outcome.action.pk)
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
