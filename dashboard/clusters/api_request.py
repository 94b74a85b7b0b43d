"""The cluster an ``/api/v1/`` request names, and its body, answered as JSON when either is wrong.

Why one place: every cluster-scoped API view starts the same way (404 for an unknown cluster, 400
for a body that is not a JSON object or form), and the ones that audit refusals must record a bad
body before answering it, which ``on_bad_body`` lets them do without restating the checks.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, JsonResponse

from dashboard.accounts.access import error, request_data
from dashboard.clusters.models import Cluster


def find_cluster(name: str) -> Cluster | JsonResponse:
    """The registered cluster called ``name``, or the JSON 404 to answer."""
    cluster = Cluster.objects.filter(name=name).first()
    return cluster if cluster is not None else error(404, f"no cluster named {name!r}")


def cluster_and_body(
    request: HttpRequest, name: str, on_bad_body: Callable[[Cluster, str], object] | None = None
) -> tuple[Cluster, dict[str, Any]] | JsonResponse:
    """The named cluster and the request's body, or the JSON 404/400 to answer (``on_bad_body``
    sees the cluster and the reason first, to record the refusal)."""
    cluster = find_cluster(name)
    if isinstance(cluster, JsonResponse):
        return cluster
    try:
        return cluster, request_data(request)
    except ValueError as exc:
        if on_bad_body is not None:
            on_bad_body(cluster, str(exc))
        return error(400, str(exc))
