"""Who hosts what: per cluster, the mirror's holder, lag and last sync, the controller candidates and
which one is active, and the workers of each role with what they hold (issue #32).

Admins only (it names hosts and processes); ``?format=json`` gives the same for scripts, and
``/healthz?detail=1`` carries the per-cluster part for machines (``hosting_detail``).
"""

from __future__ import annotations

from typing import Any

import redis
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from dashboard.accounts import roles
from dashboard.accounts.access import forbidden
from dashboard.clusters import hosting
from dashboard.clusters.models import Cluster
from dashboard.clusters.snapshot import get_redis
from dashboard.clusters.views.common import hosting_of


def hosting_detail(client: redis.Redis) -> dict[str, Any]:
    """Every registered cluster's hosting and every live worker of each role, as JSON-ready dicts."""
    clusters = [hosting_of(client, c) for c in Cluster.objects.all()]
    return {
        "clusters": [h.as_dict() for h in clusters],
        "workers": [w.as_dict() for role in hosting.ROLES for w in hosting.live_workers(client, role)],
        "warnings": [f"{h.cluster}: {w}" for h in clusters for w in h.warnings],
    }


@require_GET
def hosting_page(request: HttpRequest) -> HttpResponse:
    if not roles.can_administer(request.user):
        return forbidden(request, "see which workers host the clusters")
    client = get_redis()
    try:
        detail = hosting_detail(client)
    except redis.RedisError as exc:
        if request.GET.get("format") == "json":
            return JsonResponse({"error": f"Redis unavailable: {exc}"}, status=503)
        return render(request, "clusters/hosting.html", {"redis_error": str(exc)}, status=503)
    if request.GET.get("format") == "json":
        return JsonResponse(detail)
    connects = dict(Cluster.objects.values_list("name", "zookeeper_connect"))
    rows = [dict(c, connect=connects.get(c["cluster"], "")) for c in detail["clusters"]]
    return render(request, "clusters/hosting.html", {"rows": rows, "workers": detail["workers"]})
