"""Read a cluster's mirror snapshot from Redis for pages, live consumers and the metrics endpoint.

Every read is bounded by what a page shows: counters (small hashes), one page of topics or
partitions (``HMGET`` of known members), one page of a state's members (``ZRANGE`` by rank). No
request scans the partitions hash. Reads that must agree with a sequence number (a live snapshot)
run in one ``MULTI`` so counters and ``seq`` belong to the same flush (see ``workers/mirror``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from django.conf import settings

from dashboard.clusters import layout
from dashboard.clusters.layout import PartitionRow
from dashboard.lib.redis_keys import controller_status_key
from dashboard.lib.redis_pools import shared_redis
from dashboard.live.scopes import CLUSTER, Scope


def get_redis() -> redis.Redis:
    """A client on the shared pool for ``settings.REDIS_URL`` (one pool per URL per process)."""
    return shared_redis(socket_timeout=5, connect_timeout=2)


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value.decode() if isinstance(value, bytes) else value


def _int_map(raw: Mapping[Any, Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for k, v in raw.items():
        try:
            out[_text(k)] = int(v)
        except ValueError:
            continue
    return out


def _str_map(raw: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in raw.items()}


#: ``zk_state`` values of a mirror that cannot reach its cluster's ZooKeeper (``UNREACHABLE``: never
#: connected since it started; ``SUSPENDED``/``LOST``: the connection or session went away).
ZK_UNREACHABLE = frozenset({"UNREACHABLE", "SUSPENDED", "LOST"})


@dataclass(frozen=True, slots=True)
class MirrorStatus:
    """How fresh the snapshot is, as a page must show it."""

    present: bool
    mode: str
    zk_state: str
    synced_at_ms: int
    heartbeat_at_ms: int
    lag_ms: int
    seq: int
    gen: str
    resync_pending: bool
    now_ms: int

    @property
    def heartbeat_age_s(self) -> float | None:
        return (self.now_ms - self.heartbeat_at_ms) / 1000.0 if self.heartbeat_at_ms else None

    @property
    def synced_age_s(self) -> float | None:
        return (self.now_ms - self.synced_at_ms) / 1000.0 if self.synced_at_ms else None

    @property
    def stale(self) -> bool:
        age = self.heartbeat_age_s
        synced = self.synced_age_s
        limit = float(settings.MIRROR_STALE_AFTER_S)
        return (
            not self.present
            or age is None
            or age > limit
            or synced is None
            or synced > limit
            or self.zk_state != "CONNECTED"
            or self.resync_pending
        )

    @property
    def label(self) -> str:
        """A short reason, read after "stale ·" and in "What you see may be out of date: <label>"."""
        fresh = self.heartbeat_age_s is not None and self.heartbeat_age_s <= float(settings.MIRROR_STALE_AFTER_S)
        if fresh and self.zk_state in ZK_UNREACHABLE:
            return "ZooKeeper unreachable"  # the mirror runs but cannot read the cluster: not an empty cluster
        if not self.present:
            return "not mirrored yet"
        if not fresh:
            return "mirror not running"
        if self.zk_state != "CONNECTED":
            return f"ZooKeeper {self.zk_state.lower()}"
        if self.resync_pending:
            return "mirror resyncing"
        return "live"

    def as_dict(self) -> dict[str, Any]:
        return {
            "present": self.present,
            "mode": self.mode,
            "zk_state": self.zk_state,
            "synced_at": self.synced_at_ms,
            "heartbeat_at": self.heartbeat_at_ms,
            "lag_ms": self.lag_ms,
            "seq": self.seq,
            "gen": self.gen,
            "resync_pending": self.resync_pending,
            "stale": self.stale,
            "label": self.label,
            "now": self.now_ms,
        }


def status_from_meta(meta: Mapping[str, str], now_ms: int | None = None) -> MirrorStatus:
    def num(key: str) -> int:
        value = meta.get(key, "")
        return int(value) if value.lstrip("-").isdigit() else 0

    return MirrorStatus(
        present=bool(meta.get("gen")),
        mode=meta.get("mode", ""),
        zk_state=meta.get("zk_state", "UNKNOWN") or "UNKNOWN",
        synced_at_ms=num("synced_at"),
        heartbeat_at_ms=num("heartbeat_at"),
        lag_ms=num("lag_ms"),
        seq=num("seq"),
        gen=meta.get("gen", ""),
        resync_pending=meta.get("resync_pending") == "1",
        now_ms=now_ms if now_ms is not None else int(time.time() * 1000),
    )


@dataclass(frozen=True, slots=True)
class TopicListing:
    name: str
    partitions: int
    replication_factor: int
    counts: dict[str, int]
    marked_for_deletion: bool
    min_isr: int

    def count(self, key: str) -> int:
        return self.counts.get(key, 0)

    @property
    def preferred_percent(self) -> float | None:
        from dashboard.clusters.skew import preferred_percent

        return preferred_percent(self.partitions, self.count(layout.NON_PREFERRED))


TOPIC_SORTS = {
    "name": lambda t: t.name,
    "partitions": lambda t: t.partitions,
    "rf": lambda t: t.replication_factor,
    "offline": lambda t: t.count(layout.OFFLINE),
    "urp": lambda t: t.count(layout.UNDER_REPLICATED),
    "umi": lambda t: t.count(layout.UNDER_MIN_ISR),
    "nonpref": lambda t: t.count(layout.NON_PREFERRED),
    "reassigning": lambda t: t.count(layout.REASSIGNING),
}
TOPIC_FILTERS = {
    "offline": layout.OFFLINE,
    "urp": layout.UNDER_REPLICATED,
    "umi": layout.UNDER_MIN_ISR,
    "nonpref": layout.NON_PREFERRED,
    "reassigning": layout.REASSIGNING,
}


class ClusterSnapshot:
    """Reads of one cluster's mirror keys.

    Example::

        snap = ClusterSnapshot(get_redis(), "demo")
        counts = snap.counts()
        rows = snap.partitions("orders", 0, 50)
    """

    def __init__(self, client: redis.Redis, cluster: str) -> None:
        self.client = client
        self.cluster = cluster

    # -- small things ---------------------------------------------------------------------------
    def meta(self) -> dict[str, str]:
        return _str_map(self.client.hgetall(layout.meta_key(self.cluster)))

    def status(self) -> MirrorStatus:
        return status_from_meta(self.meta())

    def counts(self) -> dict[str, int]:
        return _int_map(self.client.hgetall(layout.counts_key(self.cluster)))

    def brokers(self) -> dict[int, dict[str, Any]]:
        raw = self.client.hgetall(layout.brokers_key(self.cluster))
        return {int(_text(k)): json.loads(v) for k, v in raw.items()}

    def admin(self) -> dict[str, Any]:
        raw = self.client.hgetall(layout.admin_key(self.cluster))
        return {_text(k): json.loads(v) for k, v in raw.items()}

    def controller_status(self, controller_id: int | None) -> dict[str, str]:
        """The active controller's status hash (managed clusters; empty otherwise)."""
        if controller_id is None:
            return {}
        return _str_map(self.client.hgetall(controller_status_key(self.cluster, controller_id)))

    # -- live snapshots -------------------------------------------------------------------------
    def scope_snapshot(self, scope: Scope) -> dict[str, Any]:
        """Counters (and what else the scope shows) with the ``gen``/``seq`` they belong to."""
        c = self.cluster
        pipe = self.client.pipeline(transaction=True)
        pipe.hgetall(layout.meta_key(c))
        if scope.kind == CLUSTER:
            pipe.hgetall(layout.counts_key(c))
            pipe.hgetall(layout.brokers_key(c))
            pipe.hgetall(layout.admin_key(c))
        elif scope.kind == "topic":
            pipe.hget(layout.topics_key(c), scope.value)
        else:
            pipe.hgetall(layout.counts_key(c))
            pipe.hget(layout.brokers_key(c), str(scope.broker))
        results = pipe.execute()
        meta = _str_map(results[0])
        status = status_from_meta(meta)
        data: dict[str, Any]
        if scope.kind == CLUSTER:
            data = {
                "counts": _int_map(results[1]),
                "brokers": {_text(k): json.loads(v) for k, v in results[2].items()},
                "admin": {_text(k): json.loads(v) for k, v in results[3].items()},
                "controller": _controller_view(meta),
            }
        elif scope.kind == "topic":
            summary = layout.decode_topic_summary(results[1]) if results[1] else None
            data = {"counts": dict(summary["c"]) if summary else {}, "topic": summary, "exists": summary is not None}
        else:
            broker_raw = results[2]
            data = {
                "counts": layout.broker_scope_counts(_int_map(results[1]), scope.broker),
                "broker": json.loads(broker_raw) if broker_raw else None,
            }
        return {"gen": status.gen, "seq": status.seq, "data": data, "status": status.as_dict()}

    # -- topics ---------------------------------------------------------------------------------
    def topic(self, name: str) -> TopicListing | None:
        raw = self.client.hget(layout.topics_key(self.cluster), name)
        return _listing(name, raw) if raw else None

    def topics(self) -> list[TopicListing]:
        """Every topic's summary: one small JSON each (thousands, not the partitions)."""
        raw = self.client.hgetall(layout.topics_key(self.cluster))
        return [_listing(_text(k), v) for k, v in raw.items()]

    def topics_page(
        self,
        sort: str = "name",
        descending: bool = False,
        only: str = "",
        query: str = "",
        page: int = 1,
        per_page: int = 50,
    ) -> tuple[list[TopicListing], int]:
        """One page of topics, sorted and filtered on the server; returns (page, total matching)."""
        if sort not in TOPIC_SORTS:
            raise ValueError(f"unknown sort {sort!r}; choose one of {', '.join(TOPIC_SORTS)}")
        if only and only not in TOPIC_FILTERS:
            raise ValueError(f"unknown filter {only!r}; choose one of {', '.join(TOPIC_FILTERS)}")
        listing = self.topics()
        if query:
            needle = query.lower()
            listing = [t for t in listing if needle in t.name.lower()]
        if only:
            key = TOPIC_FILTERS[only]
            listing = [t for t in listing if t.count(key) > 0]
        listing.sort(key=lambda t: t.name)
        listing.sort(key=TOPIC_SORTS[sort], reverse=descending)
        start = (max(page, 1) - 1) * per_page
        return listing[start : start + per_page], len(listing)

    # -- partitions -----------------------------------------------------------------------------
    def partitions(self, topic: str, partitions: Sequence[int]) -> list[PartitionRow]:
        if not partitions:
            return []
        names = [layout.member(topic, p) for p in partitions]
        raw = self.client.hmget(layout.partitions_key(self.cluster), names)
        return [layout.decode_row(m, v) for m, v in zip(names, raw, strict=True) if v is not None]

    def partition(self, topic: str, partition: int) -> PartitionRow | None:
        rows = self.partitions(topic, [partition])
        return rows[0] if rows else None

    def rows(self, members: Sequence[str]) -> list[PartitionRow]:
        if not members:
            return []
        raw = self.client.hmget(layout.partitions_key(self.cluster), list(members))
        return [layout.decode_row(m, v) for m, v in zip(members, raw, strict=True) if v is not None]

    # -- members of a state (diagram clicks) ------------------------------------------------------
    def members(self, machine: str, state: str, scope: Scope, page: int, per_page: int) -> tuple[list[str], int]:
        """One page of the partitions (or replicas) in ``state`` within ``scope``; (names, total)."""
        if machine == "partition":
            if state not in layout.PARTITION_STATES:
                raise ValueError(f"unknown partition state {state!r}")
            key = layout.partition_state_set(self.cluster, state, scope.broker if scope.kind == "broker" else None)
        elif machine == "replica":
            if state not in layout.REPLICA_STATES:
                raise ValueError(f"unknown replica state {state!r}")
            key = layout.replica_state_set(self.cluster, state, scope.broker if scope.kind == "broker" else None)
        else:
            raise ValueError(f"machine must be 'partition' or 'replica', not {machine!r}")
        start = (max(page, 1) - 1) * per_page
        if scope.kind == "topic":
            low, high = layout.topic_lex_range(scope.value)
            total = int(self.client.zlexcount(key, low, high))
            raw = self.client.zrange(key, low, high, bylex=True, offset=start, num=per_page)
        else:
            total = int(self.client.zcard(key))
            raw = self.client.zrange(key, start, start + per_page - 1)
        names = [_text(r) for r in raw]
        if scope.kind == "broker" and machine == "replica":
            names = [f"{n}@{scope.broker}" for n in names]
        return names, total

    def hosted(self, broker: int, page: int, per_page: int) -> tuple[list[PartitionRow], int]:
        """One page of the partitions with a replica on ``broker``."""
        key = layout.hosted_set(self.cluster, broker)
        start = (max(page, 1) - 1) * per_page
        total = int(self.client.zcard(key))
        members = [_text(m) for m in self.client.zrange(key, start, start + per_page - 1)]
        return self.rows(members), total


def _listing(name: str, raw: bytes | str) -> TopicListing:
    obj = layout.decode_topic_summary(raw)
    return TopicListing(
        name=name,
        partitions=int(obj.get("n", 0)),
        replication_factor=int(obj.get("rf", 0)),
        counts={str(k): int(v) for k, v in obj.get("c", {}).items()},
        marked_for_deletion=bool(obj.get("del")),
        min_isr=int(obj.get("mi", 1)),
    )


def _controller_view(meta: Mapping[str, str]) -> dict[str, Any]:
    cid = meta.get("controller_id", "")
    epoch = meta.get("controller_epoch", "")
    epoch_int = int(epoch) if epoch.isdigit() else None
    return {
        "id": int(cid) if cid.lstrip("-").isdigit() else None,
        "epoch": epoch_int,
        "failovers": max(epoch_int - 1, 0) if epoch_int is not None else None,
    }
