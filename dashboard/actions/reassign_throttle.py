"""A reassignment's replication throttle: set with it, changed while it runs, removed when it ends.

What is throttled is exactly what ``kafka-reassign-partitions --throttle`` throttles: for every
partition that moves, its existing replicas (any of which may lead it while the move runs) on the
*leader* side and its new replicas on the *follower* side, as ``partition:broker`` lists in
``/config/topics/<t>``; the rate goes to ``leader.replication.throttled.rate`` and
``follower.replication.throttled.rate`` of every broker the move involves (``/config/brokers/<id>``).
Each write is followed by Kafka's ``/config/changes`` notification (``ZkStore.alter_entity_config``),
so the same buttons throttle a ZooKeeper-mode Kafka cluster. The brokers apply it only to replicas
outside the ISR (docs/broker-agent.md).

The throttle's state and its audit trail live in the reassignment action's
``parameters["throttle"]``: ``{"bytes_per_s", "state": pending|applied|removed, "plan", "events"}``,
each event ``{"time", "op": set|changed|removed, "bytes_per_s", "user", "reason"}``. Updates take
the row under ``select_for_update`` in a transaction, so a change from the page, the monitor's
completion and the beat's clean-up never lose each other's events. Removal is idempotent (it deletes
only our keys), so whoever sees the end first removes it and the others find nothing to do.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from django.db import transaction
from django.utils import timezone

from controller_core.broker.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    format_pairs,
)
from controller_core.model import TopicPartition
from controller_core.zk import paths
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action

logger = logging.getLogger(__name__)

MB: Final = 1_000_000
#: Largest accepted rate (bytes/s): 100 GB/s, far above any link, below Kafka's Long.MaxValue.
MAX_RATE: Final = 100_000 * MB
SYSTEM_USER: Final = "(system)"


class ThrottleError(ValueError):
    """Bad throttle input; the message says what to fix."""


def parse_rate(value: Any, what: str = '"throttle_bytes_per_s"') -> int:
    """A rate in bytes/s from JSON: a positive whole number (not a bool, not a float, not text)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ThrottleError(f"{what} must be a positive whole number of bytes per second, got {value!r}")
    if value <= 0:
        raise ThrottleError(f"{what} must be a positive whole number of bytes per second, got {value}")
    if value > MAX_RATE:
        raise ThrottleError(f"{what} must be at most {MAX_RATE} bytes per second, got {value}")
    return value


def parse_form_rate(text: str | None) -> int | None:
    """The form's "MB/s per broker" field: empty means no throttle; else a positive number of MB/s
    (decimals allowed, 1 MB = 1,000,000 bytes), returned in bytes/s."""
    stripped = (text or "").strip()
    if not stripped:
        return None
    try:
        mb = float(stripped)
    except ValueError:
        raise ThrottleError(f"the throttle must be a positive number of MB/s, got {stripped!r}") from None
    if not math.isfinite(mb) or mb <= 0 or mb * MB > MAX_RATE:
        raise ThrottleError(f"the throttle must be a positive number of MB/s up to {MAX_RATE // MB}, got {stripped!r}")
    rate = round(mb * MB)
    if rate <= 0:
        raise ThrottleError(f"the throttle is below one byte per second: {stripped!r} MB/s")
    return rate


def plan(
    requested: Mapping[TopicPartition, Sequence[int]], origin: Mapping[TopicPartition, Sequence[int]]
) -> dict[str, Any]:
    """Which replicas and brokers a reassignment throttles (see the module docstring), JSON-ready:
    ``{"topics": {t: {"leader": "0:1,0:2", "follower": "0:3"}}, "brokers": [1, 2, 3]}``."""
    leader: dict[str, set[tuple[int, int]]] = {}
    follower: dict[str, set[tuple[int, int]]] = {}
    brokers: set[int] = set()
    for tp, target in requested.items():
        existing = list(origin.get(tp, ()))
        adding = [b for b in target if b not in existing]
        if not adding:
            continue  # only a reorder or a removal: nothing is copied
        leader.setdefault(tp.topic, set()).update((tp.partition, b) for b in existing)
        follower.setdefault(tp.topic, set()).update((tp.partition, b) for b in adding)
        brokers.update(existing)
        brokers.update(adding)
    topics = {
        t: {"leader": format_pairs(leader.get(t, ())), "follower": format_pairs(follower.get(t, ()))}
        for t in sorted(set(leader) | set(follower))
    }
    return {"topics": topics, "brokers": sorted(brokers)}


def write(store: ZkStore, throttle_plan: Mapping[str, Any], rate: int) -> None:
    """Set the rate on every involved broker and the replica lists on every moving topic."""
    for topic, lists in throttle_plan["topics"].items():
        store.alter_entity_config(
            paths.CONFIG_TYPE_TOPIC, topic, {LEADER_REPLICAS: lists["leader"], FOLLOWER_REPLICAS: lists["follower"]}
        )
    set_rate(store, throttle_plan, rate)


def set_rate(store: ZkStore, throttle_plan: Mapping[str, Any], rate: int) -> None:
    for broker in throttle_plan["brokers"]:
        store.alter_entity_config(
            paths.CONFIG_TYPE_BROKER, str(broker), {LEADER_RATE: str(rate), FOLLOWER_RATE: str(rate)}
        )


def remove(store: ZkStore, throttle_plan: Mapping[str, Any]) -> None:
    """Delete the throttle keys from the moving topics and involved brokers (as ``--verify`` does);
    other overrides stay; absent keys are fine."""
    for topic in throttle_plan["topics"]:
        store.alter_entity_config(paths.CONFIG_TYPE_TOPIC, topic, {}, deletes=(LEADER_REPLICAS, FOLLOWER_REPLICAS))
    for broker in throttle_plan["brokers"]:
        store.alter_entity_config(paths.CONFIG_TYPE_BROKER, str(broker), {}, deletes=(LEADER_RATE, FOLLOWER_RATE))


def initial(rate: int | None, username: str, reason: str) -> dict[str, Any] | None:
    """The ``parameters["throttle"]`` of a new reassignment (None: not throttled)."""
    if rate is None:
        return None
    return {"bytes_per_s": rate, "state": "pending", "requested_by": username, "reason": reason, "events": []}


def event(op: str, rate: int | None, user: str, reason: str) -> dict[str, Any]:
    return {"time": timezone.now().isoformat(), "op": op, "bytes_per_s": rate, "user": user, "reason": reason}


def update(action_id: int, change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any] | None:
    """Apply ``change`` to the action's throttle record under a row lock; ``change`` gets the current
    record and returns the new one (None: leave it). Returns what is stored after."""
    with transaction.atomic():
        action = Action.objects.select_for_update().get(pk=action_id)
        current = dict((action.parameters or {}).get("throttle") or {})
        if not current:
            return None
        new = change(current)
        if new is None:
            return current
        parameters = dict(action.parameters or {})
        parameters["throttle"] = new
        Action.objects.filter(pk=action_id).update(parameters=parameters)
        return new


def apply_at_start(action: Action, store: ZkStore) -> None:
    """Before the reassignment is written: write its throttle (once; a redelivery re-writes the same
    values, which is harmless) and record the "set" event."""
    fresh = Action.objects.filter(pk=action.pk).values_list("parameters", flat=True).first() or {}
    throttle = fresh.get("throttle")
    if not throttle or throttle.get("state") == "removed":
        return
    from dashboard.actions.reassign_service import requested_of

    requested, origin = requested_of(action)
    throttle_plan = plan(requested, origin)
    rate = int(throttle["bytes_per_s"])
    write(store, throttle_plan, rate)

    def mark(current: dict[str, Any]) -> dict[str, Any] | None:
        if current.get("state") == "applied":
            return None
        events = list(current.get("events") or [])
        events.append(event("set", rate, current.get("requested_by") or action.username, current.get("reason") or ""))
        return {**current, "state": "applied", "plan": throttle_plan, "events": events}

    stored = update(action.pk, mark)
    if stored is not None:
        action.parameters = {**(action.parameters or {}), "throttle": stored}


def change_rate(action: Action, store: ZkStore, rate: int, username: str, reason: str) -> dict[str, Any]:
    """Change a running reassignment's throttle (the caller checked it runs). Written to ZooKeeper
    under the row lock, so a concurrent removal cannot be undone by a late change."""
    result: dict[str, Any] = {}

    def changed(current: dict[str, Any]) -> dict[str, Any] | None:
        if current.get("state") == "removed":
            raise ThrottleError(f"the throttle of reassignment #{action.pk} was already removed: it has finished")
        if current.get("state") == "applied":
            set_rate(store, current["plan"], rate)
        events = list(current.get("events") or [])
        events.append(event("changed", rate, username, reason))
        result.update({**current, "bytes_per_s": rate, "events": events})
        return result

    with transaction.atomic():
        action_locked = Action.objects.select_for_update().get(pk=action.pk)
        throttle = dict((action_locked.parameters or {}).get("throttle") or {})
        if not throttle:
            # Not throttled at submission: start throttling now (state pending until it is written).
            from dashboard.actions.reassign_service import requested_of

            requested, origin = requested_of(action_locked)
            throttle_plan = plan(requested, origin)
            throttle = {"bytes_per_s": rate, "state": "pending", "events": []}
            if (action_locked.outcome or {}).get("written"):
                write(store, throttle_plan, rate)
                throttle.update(state="applied", plan=throttle_plan)
                throttle["events"] = [event("set", rate, username, reason)]
            else:
                throttle["events"] = [event("changed", rate, username, reason)]
            parameters = {**(action_locked.parameters or {}), "throttle": throttle}
            Action.objects.filter(pk=action.pk).update(parameters=parameters)
            return throttle
    stored = update(action.pk, changed)
    return stored or result


def remove_for(action: Action, store: ZkStore, username: str, reason: str) -> bool:
    """Remove the throttle of a finished (or cancelled) reassignment; True when this call did."""
    done = False

    def removed(current: dict[str, Any]) -> dict[str, Any] | None:
        nonlocal done
        if current.get("state") == "removed":
            return None
        if current.get("plan"):
            remove(store, current["plan"])
        events = list(current.get("events") or [])
        events.append(event("removed", None, username, reason))
        done = True
        return {**current, "state": "removed", "events": events}

    stored = update(action.pk, removed)
    if stored is not None:
        action.parameters = {**(action.parameters or {}), "throttle": stored}
    return done


def orphaned(limit: int = 100) -> list[Action]:
    """Finished reassignments whose throttle was set and not removed."""
    running = (Action.Status.QUEUED, Action.Status.RUNNING)
    candidates = (
        Action.objects.filter(kind=Action.Kind.REASSIGNMENT, parameters__throttle__state="applied")
        .exclude(status__in=running)
        .order_by("id")[:limit]
    )
    return list(candidates)
