"""The impact preview page: pick brokers or a rack, failure or controlled shutdown, see the effect.

A read: every role that reads may look (an operator sees it before a controlled shutdown, a viewer
when planning maintenance). ``?format=json`` answers the same data as the API.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from controller_core.impact import Impact
from dashboard.accounts import roles
from dashboard.accounts.access import forbidden
from dashboard.actions.election_submit import ZooKeeperUnavailable
from dashboard.actions.impact import Target, impact_of, parse_target, racks_of
from dashboard.actions.zk import cluster_store
from dashboard.clusters.models import Cluster


def run_impact(cluster: Cluster, data: Any) -> tuple[Target, Impact]:
    """Parse and compute; ``ValueError`` for bad input, ``ZooKeeperUnavailable`` when ZooKeeper fails."""
    target = parse_target(data)
    try:
        with cluster_store(cluster.zookeeper_connect) as store:
            return target, impact_of(store, target)
    except ValueError:
        raise
    except Exception as exc:
        raise ZooKeeperUnavailable(f"could not read ZooKeeper: {exc.__class__.__name__} {exc}") from exc


def impact_json(cluster: Cluster, target: Target, impact: Impact) -> dict[str, Any]:
    return {"cluster": cluster.name, "target": target.as_dict(), "describe": target.describe(), **impact.as_dict()}


@require_GET
def impact_page(request: HttpRequest, name: str) -> HttpResponse:
    if not roles.can_view(request.user):
        return forbidden(request, "see impact previews")
    cluster = get_object_or_404(Cluster, name=name)
    as_json = request.GET.get("format") == "json"
    params = {k: request.GET.get(k, "") for k in ("broker", "rack", "mode")}
    context: dict[str, Any] = {"cluster": cluster, "params": params, "brokers": [], "racks": []}
    status = 200
    try:
        if params["broker"] or params["rack"]:
            target, impact = run_impact(cluster, request.GET)
            if as_json:
                return JsonResponse(impact_json(cluster, target, impact))
            context.update(target=target, impact=impact, summary=impact.summary())
        with cluster_store(cluster.zookeeper_connect) as store:
            racks = racks_of(store)
        context["brokers"] = sorted(racks)
        context["racks"] = sorted({r for r in racks.values() if r})
    except ValueError as exc:
        context["error"], status = str(exc), 400
    except ZooKeeperUnavailable as exc:
        context["error"], status = str(exc), 503
    except Exception as exc:  # the picker's read of the registrations
        context["error"], status = f"could not read ZooKeeper: {exc.__class__.__name__} {exc}", 503
    if as_json:
        return JsonResponse(
            {"error": context.get("error", "name a broker or a rack")}, status=status if status != 200 else 400
        )
    return render(request, "actions/impact.html", context, status=status)
