"""The cluster registry as JSON (``/api/v1/clusters/``, docs/api.md "Clusters"): list, register, edit, remove.

The same form, checks and audit as the admin pages (``dashboard.clusters.views.admin``): registering connects to the
ZooKeeper given and refuses, with every problem named and nothing registered, a connect string that
does not parse, a name already used, a ZooKeeper that cannot be reached and a chroot without Kafka's
layout. Reads (with who hosts each cluster) are for viewers; changes for admins.
"""

from __future__ import annotations

from typing import Any

import redis
from django.http import HttpRequest, JsonResponse
from django.http.response import HttpResponseBase

from dashboard.accounts import roles
from dashboard.accounts.access import api, error, request_data
from dashboard.accounts.user_admin import MAX_NOTE
from dashboard.audit.models import Action
from dashboard.audit.signals import cluster_snapshot, record_refusal
from dashboard.clusters.api_request import cluster_and_body, find_cluster
from dashboard.clusters.models import Cluster
from dashboard.clusters.snapshot import get_redis
from dashboard.clusters.views.admin import ClusterForm, remove_cluster, save_cluster
from dashboard.clusters.views.common import hosting_of

FIELDS = ("name", "zookeeper_connect", "mode", "description")


def cluster_json(cluster: Cluster, with_hosting: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {f: getattr(cluster, f) for f in FIELDS} | {"created": cluster.created.isoformat()}
    if with_hosting:
        try:
            body["hosting"] = hosting_of(get_redis(), cluster).as_dict()
        except redis.RedisError as exc:
            body["hosting"] = {"error": f"Redis unavailable: {exc}"}
    return body


def _save(request: HttpRequest, instance: Cluster | None) -> HttpResponseBase:
    subject = instance.name if instance is not None else ""
    try:
        data = request_data(request)
    except ValueError as exc:
        return error(400, str(exc))
    if instance is not None:  # an edit may send only what changes
        data = {**cluster_snapshot(instance), **{k: v for k, v in data.items() if v is not None}}
    else:
        subject = str(data.get("name", ""))[:50]
    form = ClusterForm({k: "" if data.get(k) is None else str(data[k]) for k in (*FIELDS, "note")}, instance=instance)
    before = cluster_snapshot(instance) if instance is not None else None
    if not form.is_valid():
        errors = {f: [str(m) for m in msgs] for f, msgs in form.errors.items()}
        message = "; ".join(f"{f}: {' '.join(m)}" for f, m in errors.items())
        record_refusal(request, Action.Kind.CLUSTER_CHANGE, subject, message, {})
        return error(400, "the cluster was not registered" if instance is None else "nothing saved", errors=errors)
    cluster = save_cluster(form, before, request.user)
    body = cluster_json(cluster, with_hosting=False)
    if form.probe is not None:
        body["zookeeper"] = form.probe.summary
    return JsonResponse(body, status=201 if instance is None else 200)


@api(roles.VIEWER, methods=("GET", "POST"))
def cluster_collection(request: HttpRequest) -> HttpResponseBase:
    if request.method == "GET":
        return JsonResponse({"clusters": [cluster_json(c) for c in Cluster.objects.all()]})
    if not roles.can_administer(request.user):
        record_refusal(request, Action.Kind.CLUSTER_CHANGE, "", "not allowed: admins only", {})
        return error(403, "only admins may register clusters")
    return _save(request, None)


@api(roles.VIEWER, methods=("GET", "POST"))
def cluster_item(request: HttpRequest, name: str) -> HttpResponseBase:
    cluster = find_cluster(name)
    if isinstance(cluster, JsonResponse):
        return cluster
    if request.method == "GET":
        return JsonResponse(cluster_json(cluster))
    if not roles.can_administer(request.user):
        record_refusal(request, Action.Kind.CLUSTER_CHANGE, name, "not allowed: admins only", {})
        return error(403, "only admins may change clusters")
    return _save(request, cluster)


@api(roles.ADMIN, methods=("POST",))
def cluster_remove(request: HttpRequest, name: str) -> HttpResponseBase:
    found = cluster_and_body(request, name)
    if isinstance(found, JsonResponse):
        return found
    cluster, data = found
    if data.get("confirm") != cluster.name:
        message = f'send {{"confirm": "{cluster.name}"}} to remove this cluster'
        record_refusal(request, Action.Kind.CLUSTER_CHANGE, name, message, {"operation": "remove"})
        return error(400, message)
    managed = cluster.mode == Cluster.Mode.MANAGED
    remove_cluster(cluster, request.user, str(data.get("note") or "")[:MAX_NOTE])
    return JsonResponse({"removed": name, "controller_candidates_resign": managed})
