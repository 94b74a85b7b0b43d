"""Cluster pages: list, overview, brokers, topics, a topic's partitions, one partition.

Each view reads only what it renders from the mirror's Redis snapshot (counters, one page of rows)
and hands the template what ``live.js`` needs to subscribe; nothing here scans all partitions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse

from controller_core.states import STATE_COLORS
from dashboard.clusters import layout
from dashboard.clusters.candidates import candidate_rows
from dashboard.clusters.models import Cluster
from dashboard.clusters.skew import balance, preferred_percent
from dashboard.clusters.snapshot import TOPIC_FILTERS, TOPIC_SORTS, ClusterSnapshot, TopicListing, get_redis
from dashboard.clusters.state_times import state_times
from dashboard.clusters.views.common import Pager, base_context, cluster_and_snapshot, int_param, per_page


def cluster_list(request: HttpRequest) -> HttpResponse:
    client = get_redis()
    rows = []
    for cluster in Cluster.objects.all():
        snap = ClusterSnapshot(client, cluster.name)
        try:
            counts, status = snap.counts(), snap.status()
        except Exception:  # Redis down: still list the clusters, marked unknown
            counts, status = {}, None
        rows.append({"cluster": cluster, "counts": counts, "status": status})
    return render(request, "clusters/list.html", {"rows": rows})


def overview(request: HttpRequest, name: str) -> HttpResponse:
    cluster, snap = cluster_and_snapshot(name)
    counts = snap.counts()
    brokers = snap.brokers()
    meta = snap.meta()
    controller_id = int(meta["controller_id"]) if meta.get("controller_id", "").lstrip("-").isdigit() else None
    epoch = int(meta["controller_epoch"]) if meta.get("controller_epoch", "").isdigit() else None
    partitions = counts.get(layout.PARTITIONS, 0)
    bal = balance(layout.per_broker(counts, "replicas"), layout.per_broker(counts, "leaders"), brokers, partitions)
    status = snap.controller_status(controller_id)
    context = base_context(
        cluster,
        snap,
        "overview",
        # Never mirrored (or ZooKeeper unreachable from the start): unknown, not an empty cluster.
        counts=counts if snap.status().present else _Unknown(),
        brokers=brokers,
        balance=bal,
        controller_id=controller_id,
        controller_epoch=epoch,
        failovers=max(epoch - 1, 0) if epoch is not None else None,
        preferred=preferred_percent(partitions, counts.get(layout.NON_PREFERRED, 0)),
        controller_status=status,
        controller_state_times=state_times(status),
        candidates=candidate_rows(snap.client, cluster.name),
        admin=snap.admin(),
        partition_state_rows=state_rows(counts, "p:", layout.PARTITION_STATES),
        replica_state_rows=state_rows(counts, "r:", layout.REPLICA_STATES),
        live_scope="cluster",
    )
    return render(request, "clusters/overview.html", context)


class _Unknown(dict[str, Any]):
    """Counters of a cluster with no snapshot yet: every figure reads as an en dash in the templates."""

    def __missing__(self, key: str) -> str:
        return "\u2013"


def state_rows(counts: dict[str, int], prefix: str, states: tuple[str, ...]) -> list[dict[str, Any]]:
    """Rows of a state table: counter key, name, colour (``STATE_COLORS``) and current count."""
    return [
        {"key": prefix + s, "name": s, "color": STATE_COLORS[s], "count": counts.get(prefix + s, 0)} for s in states
    ]


def broker_list(request: HttpRequest, name: str) -> HttpResponse:
    cluster, snap = cluster_and_snapshot(name)
    counts = snap.counts()
    brokers = snap.brokers()
    bal = balance(
        layout.per_broker(counts, "replicas"),
        layout.per_broker(counts, "leaders"),
        brokers,
        counts.get(layout.PARTITIONS, 0),
    )
    meta = snap.meta()
    rows = [
        {
            "load": load,
            "registration": brokers.get(load.broker),
            "offline_replicas": counts.get(layout.broker_counter(load.broker, "r:OfflineReplica"), 0),
        }
        for load in bal.brokers
    ]
    context = base_context(
        cluster, snap, "brokers", rows=rows, controller_id=meta.get("controller_id", ""), live_scope="cluster"
    )
    return render(request, "clusters/brokers.html", context)


def broker_detail(request: HttpRequest, name: str, broker: int) -> HttpResponse:
    cluster, snap = cluster_and_snapshot(name)
    counts = snap.counts()
    registration = snap.brokers().get(broker)
    scoped = layout.broker_scope_counts(counts, broker)
    if registration is None and not scoped:
        raise Http404(f"broker {broker} is neither registered nor hosting replicas")
    size = per_page(request)
    page = int_param(request, "page", 1)
    rows, total = snap.hosted(broker, page, size)
    context = base_context(
        cluster,
        snap,
        "brokers",
        broker=broker,
        registration=registration,
        counts=scoped,
        rows=[layout.row_view(r) for r in rows],
        pager=Pager(page, size, total),
        live_scope=f"broker:{broker}",
        partition_state_rows=state_rows(scoped, "p:", layout.PARTITION_STATES),
        replica_state_rows=state_rows(scoped, "r:", layout.REPLICA_STATES),
    )
    return render(request, "clusters/broker.html", context)


@dataclass(frozen=True, slots=True)
class TopicQuery:
    """The topics list's sort, filter, search and page, as the page and its JSON twin read them."""

    sort: str
    descending: bool
    only: str
    query: str
    page: int
    per_page: int

    @classmethod
    def from_request(cls, request: HttpRequest) -> TopicQuery:
        sort = request.GET.get("sort", "name")
        only = request.GET.get("only", "")
        return cls(
            sort=sort if sort in TOPIC_SORTS else "name",
            descending=request.GET.get("dir") == "desc",
            only=only if only in TOPIC_FILTERS else "",
            query=request.GET.get("q", "").strip()[:249],
            page=int_param(request, "page", 1),
            per_page=per_page(request),
        )

    def fetch(self, snap: ClusterSnapshot) -> tuple[list[TopicListing], Pager]:
        topics, total = snap.topics_page(self.sort, self.descending, self.only, self.query, self.page, self.per_page)
        return topics, Pager(self.page, self.per_page, total)


def topic_list(request: HttpRequest, name: str) -> HttpResponse:
    cluster, snap = cluster_and_snapshot(name)
    q = TopicQuery.from_request(request)
    topics, pager = q.fetch(snap)
    context = base_context(
        cluster,
        snap,
        "topics",
        topics=topics,
        pager=pager,
        sort=q.sort,
        descending=q.descending,
        only=q.only,
        query=q.query,
        per_page=q.per_page,
        filters=[
            ("", "All"),
            ("offline", "Offline"),
            ("urp", "Under-replicated"),
            ("umi", "Under min ISR"),
            ("nonpref", "Non-preferred leader"),
            ("reassigning", "Reassigning"),
        ],
        columns=[
            ("name", "Topic"),
            ("partitions", "Partitions"),
            ("rf", "RF"),
            ("offline", "Offline"),
            ("urp", "Under-replicated"),
            ("umi", "Under min ISR"),
            ("nonpref", "Non-preferred"),
            ("reassigning", "Reassigning"),
        ],
        live_scope="cluster",
    )
    return render(request, "clusters/topics.html", context)


def topic_list_rows(request: HttpRequest, name: str) -> JsonResponse:
    """The topics list's visible page as JSON: what ``live.js`` refetches when topic counters change.

    Same parameters as the page (``q``, ``only``, ``sort``, ``dir``, ``page``, ``per_page``); sorting
    and filtering stay on the server, so the browser only ever holds one page of rows.
    """
    cluster, snap = cluster_and_snapshot(name)
    q = TopicQuery.from_request(request)
    topics, pager = q.fetch(snap)
    status = snap.status()
    return JsonResponse(
        {
            "gen": status.gen,
            "seq": status.seq,
            "total": pager.total,
            "page": pager.page,
            "pages": pager.pages,
            "per_page": pager.per_page,
            "rows": [topic_row_view(cluster.name, t) for t in topics],
        }
    )


def topic_row_view(cluster: str, t: TopicListing) -> dict[str, Any]:
    """One row of the topics list (the same cells as templates/clusters/topics.html)."""
    return {
        "name": t.name,
        "url": reverse("clusters:topic", args=[cluster, t.name]),
        "deleting": t.marked_for_deletion,
        "partitions": t.partitions,
        "rf": t.replication_factor,
        "offline": t.count(layout.OFFLINE),
        "urp": t.count(layout.UNDER_REPLICATED),
        "umi": t.count(layout.UNDER_MIN_ISR),
        "nonpref": t.count(layout.NON_PREFERRED),
        "reassigning": t.count(layout.REASSIGNING),
        "preferred_percent": t.preferred_percent,
    }


def _topic_or_404(snap: ClusterSnapshot, topic: str) -> Any:
    listing = snap.topic(topic)
    if listing is None:
        raise Http404(f"no topic {topic!r} in the mirror of {snap.cluster}")
    return listing


def topic_detail(request: HttpRequest, name: str, topic: str) -> HttpResponse:
    cluster, snap = cluster_and_snapshot(name)
    listing = _topic_or_404(snap, topic)
    size = per_page(request, 100)
    page = int_param(request, "page", 1)
    pager = Pager(page, size, listing.partitions)
    rows = snap.partitions(topic, range(pager.start, min(pager.start + size, listing.partitions)))
    brokers = snap.brokers()
    cluster_counts = snap.counts()
    bal = balance(
        layout.per_broker(listing.counts, "replicas"),
        layout.per_broker(listing.counts, "leaders"),
        brokers,
        listing.partitions,
        cluster_partitions=cluster_counts.get(layout.PARTITIONS, 0),
    )
    context = base_context(
        cluster,
        snap,
        "topics",
        topic=listing,
        rows=[layout.row_view(r) for r in rows],
        pager=pager,
        balance=bal,
        partition_state_rows=state_rows(listing.counts, "p:", layout.PARTITION_STATES),
        replica_state_rows=state_rows(listing.counts, "r:", layout.REPLICA_STATES),
        live_scope=f"topic:{topic}",
    )
    return render(request, "clusters/topic.html", context)


def topic_rows(request: HttpRequest, name: str, topic: str) -> JsonResponse:
    """One page of a topic's partitions as JSON (the page refetches after a truncated delta)."""
    _cluster, snap = cluster_and_snapshot(name)
    listing = _topic_or_404(snap, topic)
    size = per_page(request, 100)
    pager = Pager(int_param(request, "page", 1), size, listing.partitions)
    rows = snap.partitions(topic, range(pager.start, min(pager.start + size, listing.partitions)))
    status = snap.status()
    return JsonResponse({"seq": status.seq, "gen": status.gen, "rows": [layout.row_view(r) for r in rows]})


def partition_detail(request: HttpRequest, name: str, topic: str, partition: int) -> HttpResponse:
    cluster, snap = cluster_and_snapshot(name)
    row = snap.partition(topic, partition)
    if row is None:
        raise Http404(f"no partition {topic}-{partition} in the mirror of {cluster.name}")
    brokers = snap.brokers()
    context = base_context(
        cluster,
        snap,
        "topics",
        topic_name=topic,
        row=layout.row_view(row),
        live_brokers=sorted(brokers),
        admin=snap.admin(),
        rows_url=reverse("clusters:topic-rows", args=[cluster.name, topic])
        + f"?page={partition // 100 + 1}&per_page=100",
        live_scope=f"topic:{topic}",
    )
    return render(request, "clusters/partition.html", context)
