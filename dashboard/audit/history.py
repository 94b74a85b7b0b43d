"""Queries over the ingested state changes: a partition's history, a broker's, controller failovers.

Pages, exports and the JSON API all call these, so a filter means the same thing everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from django.db.models import F, Q, QuerySet

from controller_core.record_kinds import RecordKind
from dashboard.audit.listing import BadFilter
from dashboard.audit.models import Action, StateChange

CHANGE_FIELDS: Final = (
    "controller_epoch", "seq", "ts", "kind", "cause", "entity", "from_state", "to_state", "leader_before",
    "leader_after", "leader_epoch_before", "leader_epoch_after", "isr_before", "isr_after", "error",
)  # fmt: skip
CHANGE_EXPORT_FIELDS: Final = (*CHANGE_FIELDS, "strategy", "action_id")
BROKER_EVENTS: Final = (
    "registered",
    "deregistered",
    "restarted",
    "controlled_shutdown",
    "leader_gained",
    "leader_lost",
)
BROKER_FIELDS: Final = ("controller_epoch", "seq", "ts", "event", "kind", "cause", "entity", "detail", "action_id")
FAILOVER_FIELDS: Final = (
    "controller_epoch", "controller_id", "ts", "previous_epoch", "previous_controller_id", "previous_last_ts",
    "gap_ms", "failover_duration_ms", "live_brokers", "partitions", "path", "standby",
)  # fmt: skip


def _in_range(qs: QuerySet[StateChange], since: datetime | None, until: datetime | None) -> QuerySet[StateChange]:
    if since is not None:
        qs = qs.filter(ts__gte=since)
    if until is not None:
        qs = qs.filter(ts__lte=until)
    return qs


def _search(qs: QuerySet[StateChange], text: str) -> QuerySet[StateChange]:
    text = text.strip()
    if not text:
        return qs
    return qs.filter(Q(cause__icontains=text) | Q(entity__icontains=text) | Q(error__icontains=text))


def partition_changes(
    cluster: str,
    topic: str,
    partition: int,
    *,
    kind: str = "",
    q: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[StateChange]:
    qs = StateChange.objects.filter(cluster=cluster, topic=topic, partition=partition)
    if kind:
        qs = qs.filter(kind=kind)
    return _search(_in_range(qs, since, until), q).select_related("action").order_by("controller_epoch", "seq")


def change_row(change: StateChange) -> dict[str, Any]:
    row: dict[str, Any] = {f: getattr(change, f) for f in CHANGE_FIELDS}
    row["strategy"] = (change.record or {}).get("strategy")
    row["action_id"] = change.action_id
    return row


# -- a broker's history -------------------------------------------------------------------------------


MEMBERSHIP_KEYS: Final = {"registered": "new_brokers", "deregistered": "dead_brokers", "restarted": "bounced_brokers"}


def _broker_change_ids(cluster: str, broker: int, keys: tuple[str, ...]) -> list[int]:
    """``broker_change`` records naming ``broker`` in one of ``keys`` (few: one per broker event)."""
    ids = []
    for pk, raw in StateChange.objects.filter(cluster=cluster, kind=RecordKind.BROKER_CHANGE).values_list(
        "pk", "record"
    ):
        record = raw or {}
        if any(broker in (record.get(k) or []) for k in keys):
            ids.append(pk)
    return ids


def broker_changes(
    cluster: str,
    broker: int,
    *,
    event: str = "",
    since: datetime | None = None,
    until: datetime | None = None,
) -> QuerySet[StateChange]:
    """Registrations, deregistrations, restarts and controlled shutdowns of ``broker``, and every
    leader change that gave it or took from it a partition's leadership, oldest first."""
    if event and event not in BROKER_EVENTS:
        raise BadFilter(f"event must be one of {', '.join(BROKER_EVENTS)}")
    keys = (MEMBERSHIP_KEYS[event],) if event in MEMBERSHIP_KEYS else tuple(MEMBERSHIP_KEYS.values())
    membership = Q(pk__in=_broker_change_ids(cluster, broker, keys))
    shutdown = Q(kind=RecordKind.CONTROLLED_SHUTDOWN, record__broker_id=broker)
    moved = Q(leader_after__isnull=False) & ~Q(leader_before=F("leader_after"))
    gained = moved & Q(leader_after=broker)
    lost = moved & Q(leader_before=broker)
    wanted = {
        "": membership | shutdown | gained | lost,
        "registered": membership,
        "deregistered": membership,
        "restarted": membership,
        "controlled_shutdown": shutdown,
        "leader_gained": gained,
        "leader_lost": lost,
    }[event]
    qs = StateChange.objects.filter(cluster=cluster).filter(wanted)
    return _in_range(qs, since, until).select_related("action").order_by("controller_epoch", "seq")


def broker_event(change: StateChange, broker: int) -> tuple[str, str]:
    """(event, detail) of one row of ``broker_changes`` as seen from ``broker``."""
    record = change.record or {}
    if change.kind == RecordKind.BROKER_CHANGE:
        if broker in (record.get("dead_brokers") or []):
            return "deregistered", "its registration znode is gone (failure or shutdown)"
        if broker in (record.get("bounced_brokers") or []):
            return "restarted", "registered again with a newer broker epoch"
        return "registered", "joined the cluster"
    if change.kind == RecordKind.CONTROLLED_SHUTDOWN:
        return "controlled_shutdown", "asked the controller for a controlled shutdown"
    strategy = record.get("strategy") or change.cause
    if change.leader_after == broker:
        return "leader_gained", f"{change.entity}: leader {_leader(change.leader_before)} → {broker} ({strategy})"
    return "leader_lost", f"{change.entity}: leader {broker} → {_leader(change.leader_after)} ({strategy})"


def _leader(value: int | None) -> str:
    return "none" if value is None or value < 0 else str(value)


def broker_row(change: StateChange, broker: int) -> dict[str, Any]:
    event, detail = broker_event(change, broker)
    return {
        "controller_epoch": change.controller_epoch,
        "seq": change.seq,
        "ts": change.ts,
        "event": event,
        "kind": change.kind,
        "cause": change.cause,
        "entity": change.entity,
        "detail": detail,
        "action_id": change.action_id,
    }


def filter_events(rows: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    """``registered``/``deregistered``/``restarted`` share one query; keep the asked one."""
    if event in ("registered", "deregistered", "restarted"):
        return [r for r in rows if r["event"] == event]
    return rows


# -- controller failovers -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Failover:
    change: StateChange
    previous: StateChange | None

    def as_row(self) -> dict[str, Any]:
        record: Mapping[str, Any] = self.change.record or {}
        first = (
            StateChange.objects.filter(cluster=self.change.cluster, controller_epoch=self.change.controller_epoch)
            .order_by("seq")
            .values_list("ts", flat=True)
            .first()
        ) or self.change.ts
        gap = None
        if self.previous is not None:
            gap = int((first - self.previous.ts).total_seconds() * 1000)
        return {
            "controller_epoch": self.change.controller_epoch,
            "controller_id": self.change.controller_id,
            "ts": self.change.ts,
            "previous_epoch": self.previous.controller_epoch if self.previous else None,
            "previous_controller_id": self.previous.controller_id if self.previous else None,
            "previous_last_ts": self.previous.ts if self.previous else None,
            "gap_ms": gap,
            "failover_duration_ms": record.get("duration_ms"),
            # warm (from the standby's view) or cold (full reload, and why); absent before issue 28.
            "path": record.get("path"),
            "standby": record.get("standby"),
            "phases_ms": record.get("phases_ms") or {},
            "live_brokers": record.get("live_brokers"),
            "partitions": record.get("partitions"),
        }


def failovers(cluster: str, *, since: datetime | None = None, until: datetime | None = None) -> QuerySet[StateChange]:
    qs = StateChange.objects.filter(cluster=cluster, kind=RecordKind.FAILOVER)
    return _in_range(qs, since, until).order_by("-controller_epoch", "-seq")


def failover_of(change: StateChange) -> Failover:
    """The failover with the old controller's last ingested record (any earlier epoch)."""
    previous = (
        StateChange.objects.filter(cluster=change.cluster, controller_epoch__lt=change.controller_epoch)
        .order_by("-controller_epoch", "-seq")
        .first()
    )
    return Failover(change, previous)


# -- actions ------------------------------------------------------------------------------------------

ACTION_FIELDS: Final = (
    "id", "created", "username", "cluster", "kind", "status", "reason", "parameters", "outcome", "error",
    "duration_ms", "controller_epoch",
)  # fmt: skip


def actions(params: Mapping[str, str], since: datetime | None, until: datetime | None) -> QuerySet[Action]:
    qs = Action.objects.all()
    for field in ("cluster", "kind", "status", "username"):
        value = params.get(field, "").strip()
        if value:
            qs = qs.filter(**{field: value})
    query = params.get("q", "").strip()
    if query:
        qs = qs.filter(Q(reason__icontains=query) | Q(error__icontains=query) | Q(username__icontains=query))
    if since is not None:
        qs = qs.filter(created__gte=since)
    if until is not None:
        qs = qs.filter(created__lte=until)
    return qs


def action_row(action: Action) -> dict[str, Any]:
    return {f: getattr(action, f) for f in ACTION_FIELDS}
