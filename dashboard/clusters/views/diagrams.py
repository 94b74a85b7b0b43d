"""Live state-diagram pages (cluster, topic, broker) and the paginated member lists behind a click."""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from dashboard.clusters import layout
from dashboard.clusters.diagram import specs
from dashboard.clusters.views.common import base_context, cluster_and_snapshot, int_param
from dashboard.live.scopes import parse_scope

MEMBERS_PER_PAGE = 50


def _diagram(request: HttpRequest, name: str, scope: str, heading: str) -> HttpResponse:
    cluster, snap = cluster_and_snapshot(name)
    context = base_context(
        cluster,
        snap,
        "diagrams",
        specs=specs(),
        live_scope=scope,
        heading=heading,
        members_url=reverse("clusters:members", args=[cluster.name]),
    )
    return render(request, "live/diagram.html", context)


def cluster_diagram(request: HttpRequest, name: str) -> HttpResponse:
    return _diagram(request, name, "cluster", "whole cluster")


def topic_diagram(request: HttpRequest, name: str, topic: str) -> HttpResponse:
    _cluster, snap = cluster_and_snapshot(name)
    if snap.topic(topic) is None:
        raise Http404(f"no topic {topic!r}")
    return _diagram(request, name, f"topic:{topic}", f"topic {topic}")


def broker_diagram(request: HttpRequest, name: str, broker: int) -> HttpResponse:
    return _diagram(request, name, f"broker:{broker}", f"broker {broker}")


def members(request: HttpRequest, name: str) -> JsonResponse:
    """``?machine=partition|replica&state=<State>&scope=cluster|topic:t|broker:n&page=N``."""
    cluster, snap = cluster_and_snapshot(name)
    try:
        scope = parse_scope(request.GET.get("scope", "cluster"))
        page = int_param(request, "page", 1)
        names, total = snap.members(
            request.GET.get("machine", ""), request.GET.get("state", ""), scope, page, MEMBERS_PER_PAGE
        )
    except ValueError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    items = []
    for member in names:
        topic, partition, broker = layout.parse_member(member)
        label = layout.display_name(topic, partition) + (f" on broker {broker}" if broker is not None else "")
        items.append({"label": label, "url": reverse("clusters:partition", args=[cluster.name, topic, partition])})
    return JsonResponse({"total": total, "page": page, "per_page": MEMBERS_PER_PAGE, "items": items})
