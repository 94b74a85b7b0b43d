"""Helpers shared by the cluster pages: the cluster, its snapshot, pagination, the base context."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings
from django.http import HttpRequest
from django.shortcuts import get_object_or_404

from dashboard.clusters.hosting import ClusterHosting, cluster_hosting
from dashboard.clusters.models import Cluster
from dashboard.clusters.snapshot import ClusterSnapshot, get_redis

PER_PAGE_CHOICES = (25, 50, 100, 200)


def cluster_and_snapshot(name: str) -> tuple[Cluster, ClusterSnapshot]:
    cluster = get_object_or_404(Cluster, name=name)
    return cluster, ClusterSnapshot(get_redis(), cluster.name)


def int_param(request: HttpRequest, name: str, default: int, lo: int = 1, hi: int = 10**9) -> int:
    raw = request.GET.get(name, "")
    try:
        value = int(raw)
    except ValueError:
        return default
    return min(max(value, lo), hi)


def per_page(request: HttpRequest, default: int = 50) -> int:
    value = int_param(request, "per_page", default)
    return value if value in PER_PAGE_CHOICES else default


@dataclass(frozen=True, slots=True)
class Pager:
    page: int
    per_page: int
    total: int

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))

    @property
    def start(self) -> int:
        return (self.page - 1) * self.per_page

    @property
    def has_previous(self) -> bool:
        return self.page > 1

    @property
    def has_next(self) -> bool:
        return self.page < self.pages

    @property
    def first_index(self) -> int:
        return self.start + 1 if self.total else 0

    @property
    def last_index(self) -> int:
        return min(self.start + self.per_page, self.total)


def hosting_of(client: redis.Redis, cluster: Cluster) -> ClusterHosting:
    """Who hosts ``cluster``'s mirror and controller candidates, with the warnings its pages show."""
    return cluster_hosting(
        client,
        cluster.name,
        cluster.mode,
        int(cluster.created.timestamp() * 1000),
        mirror_ttl_s=float(settings.MIRROR_LOCK_TTL_S),
        controller_ttl_s=float(settings.CONTROLLER_SLOT_TTL_S),
        candidates_per_cluster=int(settings.CONTROLLER_CANDIDATES_PER_CLUSTER),
    )


def base_context(cluster: Cluster, snap: ClusterSnapshot, section: str, **extra: Any) -> dict[str, Any]:
    try:
        hosting: ClusterHosting | None = hosting_of(snap.client, cluster)
    except redis.RedisError:
        hosting = None
    return {"cluster": cluster, "status": snap.status(), "section": section, "hosting": hosting, **extra}
