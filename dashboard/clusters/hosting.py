"""Who hosts what: the Redis contract between the workers' hosting fleets and the pages that show it.

Why here: the workers (``workers.mirror.fleet``, ``workers.controller_fleet``) write these keys and
the hosting page, ``/healthz?detail=1``, the cluster pages' warnings and the metrics endpoint read
them; ``dashboard`` may not import ``workers``, so the contract and its reader live on this side.

Keys (``{c}`` a cluster name, ``{role}`` ``mirror`` or ``controller``, ``{token}`` ``host:pid``)::

    kcp:{c}:m:lock                 string  the mirror's lease: the holder's token (layout.lock_key)
    kcp:{c}:ctl:slot:{i}           string  controller candidate slot i: "{controller_id}|{token}" (TTL)
    kcp:{c}:hosting                hash    controller_active_at: last time (ms) a hosted candidate was active
    kcp:hosts:{role}               zset    token -> expiry (ms) of the worker's presence record
    kcp:host:{role}:{token}        hash    host, pid, max, filter, held (comma list), controller_id, at (TTL)

A cluster "has no mirror" when its mirror's last heartbeat (or, never mirrored, its registration) is
older than one mirror lease period; a managed cluster "has no controller" when no hosted candidate
was active for one controller slot period. Both are warnings on the cluster's pages and metrics.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import redis

from dashboard.clusters import layout
from dashboard.lib.redis_keys import PREFIX, controller_status_key

ROLES: Final = ("mirror", "controller")


def slot_key(cluster: str, slot: int) -> str:
    return f"{PREFIX}:{cluster}:ctl:slot:{slot}"


def cluster_hosting_key(cluster: str) -> str:
    return f"{PREFIX}:{cluster}:hosting"


def hosts_key(role: str) -> str:
    return f"{PREFIX}:hosts:{role}"


def host_key(role: str, token: str) -> str:
    return f"{PREFIX}:host:{role}:{token}"


def slot_value(controller_id: int, token: str) -> str:
    return f"{controller_id}|{token}"


def parse_slot_value(value: str) -> tuple[int, str] | None:
    cid, sep, token = value.partition("|")
    if not sep or not cid.lstrip("-").isdigit():
        return None
    return int(cid), token


def _s(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


@dataclass(frozen=True, slots=True)
class WorkerRecord:
    """One worker's presence for one role, as it last published it."""

    role: str
    token: str
    host: str
    pid: int
    max_clusters: int
    filter: tuple[str, ...]  # empty: every registered cluster
    held: tuple[str, ...]
    controller_id: int | None
    at_ms: int

    def accepts(self, cluster: str) -> bool:
        return not self.filter or cluster in self.filter

    def as_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "worker": self.token,
            "host": self.host,
            "pid": self.pid,
            "max": self.max_clusters,
            "filter": list(self.filter),
            "held": list(self.held),
            "controller_id": self.controller_id,
            "at": self.at_ms,
        }


def decode_worker(role: str, token: str, raw: Mapping[Any, Any]) -> WorkerRecord | None:
    fields = {_s(k): _s(v) for k, v in raw.items()}
    if not fields:
        return None

    def num(name: str, default: int = 0) -> int:
        value = fields.get(name, "")
        return int(value) if value.lstrip("-").isdigit() else default

    cid = fields.get("controller_id", "")
    return WorkerRecord(
        role=role,
        token=token,
        host=fields.get("host", ""),
        pid=num("pid"),
        max_clusters=num("max"),
        filter=tuple(x for x in fields.get("filter", "").split(",") if x),
        held=tuple(x for x in fields.get("held", "").split(",") if x),
        controller_id=int(cid) if cid.lstrip("-").isdigit() else None,
        at_ms=num("at"),
    )


def live_workers(client: redis.Redis, role: str, now_ms: int | None = None) -> list[WorkerRecord]:
    """The workers of ``role`` whose presence has not expired, ordered by token."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    tokens = [_s(t) for t in client.zrangebyscore(hosts_key(role), now, "+inf")]
    if not tokens:
        return []
    pipe = client.pipeline(transaction=False)
    for token in tokens:
        pipe.hgetall(host_key(role, token))
    found = []
    for token, raw in zip(tokens, pipe.execute(), strict=True):
        record = decode_worker(role, token, raw)
        if record is not None:
            found.append(record)
    return sorted(found, key=lambda w: w.token)


@dataclass(frozen=True, slots=True)
class Candidate:
    slot: int
    controller_id: int
    worker: str
    active: bool

    def as_dict(self) -> dict[str, Any]:
        return {"slot": self.slot, "controller_id": self.controller_id, "worker": self.worker, "active": self.active}


@dataclass(frozen=True, slots=True)
class ClusterHosting:
    """Who hosts one cluster's mirror and controller candidates, and what is missing."""

    cluster: str
    mode: str
    mirror_holder: str | None
    mirror_state: str  # zk_state from the mirror's meta ("" when it never wrote one)
    heartbeat_age_s: float | None
    synced_age_s: float | None
    lag_ms: int | None
    candidates: tuple[Candidate, ...]
    active_controller_id: int | None
    mirror_missing_s: float | None  # seconds without a mirror, once over the lease period; else None
    controller_missing_s: float | None  # the same for an active controller (managed clusters only)
    warnings: tuple[str, ...] = field(default=())

    def as_dict(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "mode": self.mode,
            "mirror": {
                "holder": self.mirror_holder,
                "zk_state": self.mirror_state or None,
                "heartbeat_age_s": _round(self.heartbeat_age_s),
                "synced_age_s": _round(self.synced_age_s),
                "lag_ms": self.lag_ms,
                "missing_s": _round(self.mirror_missing_s),
            },
            "controller": None
            if self.mode != "managed"
            else {
                "active_id": self.active_controller_id,
                "candidates": [c.as_dict() for c in self.candidates],
                "missing_s": _round(self.controller_missing_s),
            },
            "warnings": list(self.warnings),
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def cluster_hosting(
    client: redis.Redis,
    cluster: str,
    mode: str,
    registered_at_ms: int,
    *,
    mirror_ttl_s: float,
    controller_ttl_s: float,
    candidates_per_cluster: int,
    now_ms: int | None = None,
) -> ClusterHosting:
    """Read one cluster's hosting from Redis (one pipeline) and say what is missing."""
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    pipe = client.pipeline(transaction=False)
    pipe.get(layout.lock_key(cluster))
    pipe.hgetall(layout.meta_key(cluster))
    pipe.hgetall(cluster_hosting_key(cluster))
    slots = max(candidates_per_cluster, 0)
    for i in range(slots):
        pipe.get(slot_key(cluster, i))
    lock, raw_meta, raw_hosting, *raw_slots = pipe.execute()
    meta = {_s(k): _s(v) for k, v in raw_meta.items()}
    hosting = {_s(k): _s(v) for k, v in raw_hosting.items()}

    def num(values: Mapping[str, str], name: str) -> int | None:
        value = values.get(name, "")
        return int(value) if value.lstrip("-").isdigit() else None

    heartbeat = num(meta, "heartbeat_at") or 0
    synced = num(meta, "synced_at") or 0
    cid = num(meta, "controller_id")
    held = [(i, parsed) for i, raw in enumerate(raw_slots) if raw is not None and (parsed := parse_slot_value(_s(raw)))]
    # Each candidate's status hash (workers.sinks, TTL 10 s) says whether it is the active one, also for
    # candidates run by ``run_controller`` outside the fleet (then only the mirror's /controller id).
    ids = sorted({p[0] for _, p in held} | ({cid} if cid is not None else set()))
    status_pipe = client.pipeline(transaction=False)
    for controller_id in ids:
        status_pipe.hmget(controller_status_key(cluster, controller_id), ["active", "updated_at"])
    statuses = dict(zip(ids, status_pipe.execute(), strict=True)) if ids else {}
    active_at = num(hosting, "controller_active_at") or 0
    active_ids = set()
    for controller_id, (active, updated) in statuses.items():
        if active is not None and _s(active) == "1":
            active_ids.add(controller_id)
            updated_s = _s(updated) if updated is not None else ""
            active_at = max(active_at, int(updated_s) if updated_s.isdigit() else 0)
    if not active_ids and cid is not None and not statuses.get(cid, (None, None))[0]:
        active_ids.add(cid)  # the mirror sees /controller naming it; no status hash (not ours, or Redis lost it)
        active_at = max(active_at, heartbeat)
    candidates = [Candidate(i, p[0], p[1], active=p[0] in active_ids) for i, p in held]
    warnings: list[str] = []
    mirror_since = max(heartbeat, registered_at_ms)
    mirror_missing = (now - mirror_since) / 1000.0
    mirror_missing_s = mirror_missing if mirror_missing > mirror_ttl_s else None
    if mirror_missing_s is not None:
        warnings.append(
            f"no mirror for {mirror_missing_s:.0f} s: no worker with the mirror role is mirroring this cluster"
            " (are the workers running, at their maximum, or filtered by MIRROR_CLUSTERS?)"
        )
    elif meta.get("zk_state") in UNREACHABLE_STATES:
        warnings.append(f"ZooKeeper unreachable: {meta.get('zk_error') or 'the mirror cannot connect'}")
    controller_missing_s = None
    if mode == "managed":
        active_at = max(active_at, registered_at_ms)
        missing = (now - active_at) / 1000.0
        if missing > controller_ttl_s:
            controller_missing_s = missing
            warnings.append(
                f"no active controller for {missing:.0f} s"
                + (
                    ": no worker with the controller role hosts a candidate"
                    if not candidates
                    else f" ({len(candidates)} candidate(s) hosted, none active)"
                )
            )
    return ClusterHosting(
        cluster=cluster,
        mode=mode,
        mirror_holder=_s(lock) if lock is not None else None,
        mirror_state=meta.get("zk_state", ""),
        heartbeat_age_s=(now - heartbeat) / 1000.0 if heartbeat else None,
        synced_age_s=(now - synced) / 1000.0 if synced else None,
        lag_ms=num(meta, "lag_ms"),
        candidates=tuple(candidates),
        active_controller_id=cid,
        mirror_missing_s=mirror_missing_s,
        controller_missing_s=controller_missing_s,
        warnings=tuple(warnings),
    )


#: Mirror ``zk_state`` values meaning the cluster's ZooKeeper cannot be reached right now.
UNREACHABLE_STATES: Final = frozenset({"UNREACHABLE", "SUSPENDED", "LOST"})
