"""A preferred election that waits for catch-up (issue #29, item 4).

``run_catch_up``, run by the preferred election's task ``workers.actions.preferred_election``,
carries out a preferred-election action submitted with the catch-up option
(``dashboard.actions.election_catchup``). Every ``poll_s`` it reads each remaining partition's ISR,
how long its state znode has been unchanged and its preferred replica's lag, writes
``/admin/preferred_replica_election`` (Kafka's format) for those that are ready, waits for the
controller to consume it, and records per partition what happened; the rest keep waiting, each with
its reason in ``outcome["waiting"]`` (shown live on the action page). It finishes by itself when no
partition is left (*succeeded*, or *partial* when some could not be elected), or after the option's
timeout (*partial* or *failed*, naming what still waited and why).

Exactly once under redelivery and concurrent copies: only the copy holding the action's run lease
acts (the task takes it) and its writes are fenced by it; a partition is marked *submitted* in the
committed outcome before its request is written, so a later copy never requests it again (it reads
whether its preferred replica leads instead).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, Final

from celery import shared_task

from controller_core.errors import ZkOperationError
from controller_core.model import TopicPartition
from controller_core.zk.store import ZkStore
from dashboard.actions import election_catchup
from dashboard.audit import movement as movement_audit
from dashboard.audit.models import Action
from workers.action_lease import LeaseLost

logger = logging.getLogger(__name__)

FINAL: Final = frozenset({Action.Status.SUCCEEDED, Action.Status.PARTIAL, Action.Status.FAILED, Action.Status.REJECTED})
CONSUME_WAIT_S: Final = 30.0


def _save(action: Action, *fields: str) -> None:
    values = {f: getattr(action, f) for f in fields}
    if not Action.objects.filter(pk=action.pk, lease_owner=action.lease_owner).update(**values):
        raise LeaseLost(f"action #{action.pk}: the run lease {action.lease_owner or '(none)'} is no longer held")


def _name(tp: TopicPartition) -> str:
    return f"{tp.topic}-{tp.partition}"


def _leaders(store: ZkStore, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
    states = store.get_partition_states(tps)
    out = {}
    for tp in tps:
        read = states.get(tp)
        out[tp] = read.state.leader_and_isr.leader if read is not None and read.state is not None else -1
    return out


def _wait_consumed(store: ZkStore, wait_s: float, sleep: Callable[[float], None]) -> bool:
    deadline = time.monotonic() + wait_s
    while store.get_preferred_replica_election() is not None:
        if time.monotonic() >= deadline:
            return False
        sleep(0.1)
    return True


def run_catch_up(
    action: Action,
    store: ZkStore,
    *,
    poll_s: float = 1.0,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> Action:
    """Carry out ``action`` until every partition moved or the timeout; see the module docstring."""
    option = (action.parameters or {}).get("catch_up") or {}
    catch_up = election_catchup.CatchUp(
        float(option["min_isr_s"]), int(option["max_lag"]), float(option.get("timeout_s", 600))
    )
    rows = {
        TopicPartition(str(r["topic"]), int(r["partition"])): r for r in (action.preview or {}).get("electable", [])
    }
    outcome: dict[str, Any] = dict(action.outcome or {})
    done: dict[str, dict[str, Any]] = dict(outcome.get("elected") or {})
    last_why: dict[str, str] = {}  # each partition's latest reason to wait, kept on its result (audit)
    submitted = {tuple(x) for x in outcome.get("submitted", [])}
    started = action.started.timestamp() if action.started is not None else clock()
    epoch = store.get_controller_epoch()
    action.controller_epoch = epoch.epoch if epoch is not None else None
    if "before" not in outcome:
        outcome["before"] = movement_audit.snapshot(store, rows)
    while True:
        remaining = [tp for tp in sorted(rows) if _name(tp) not in done]
        # A partition requested by an earlier copy: look whether it moved rather than request it again.
        resumed = [tp for tp in remaining if (tp.topic, tp.partition) in submitted]
        if resumed:
            for tp, leader in _leaders(store, resumed).items():
                preferred = int(rows[tp]["preferred"])
                done[_name(tp)] = {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "preferred": preferred,
                    "leader": leader,
                    "outcome": "elected" if leader == preferred else f"not elected: leader is {leader}",
                }
            remaining = [tp for tp in remaining if _name(tp) not in done]
        conditions = election_catchup.read_conditions(store, [rows[tp] for tp in remaining]) if remaining else {}
        ready: list[TopicPartition] = []
        waiting: list[dict[str, Any]] = []
        for tp in remaining:
            preferred = int(rows[tp]["preferred"])
            condition = conditions.get(tp, election_catchup.Condition((), None, None))
            if condition.isr and _leader_is(condition, tp, store, preferred):
                # Led by its preferred replica without this election: it was so from the start, or
                # something else moved it while this one waited (the auto leader rebalance, another action).
                result = "already preferred"
                if _name(tp) in last_why:
                    result += f" (moved by another election while this one waited: {last_why[_name(tp)]})"
                done[_name(tp)] = {**_entry(tp, preferred, preferred), "outcome": result}
                continue
            why = election_catchup.assess(preferred, condition, catch_up)
            if why:
                waiting.append({"topic": tp.topic, "partition": tp.partition, "why": why})
                last_why[_name(tp)] = why
            else:
                ready.append(tp)
        if ready and store.get_preferred_replica_election() is None:
            submitted.update((tp.topic, tp.partition) for tp in ready)
            outcome.update(submitted=sorted([list(x) for x in submitted]))
            action.outcome = outcome
            _save(action, "outcome", "controller_epoch")
            try:
                store.create_preferred_replica_election_request(ready)
            except ZkOperationError as exc:  # someone else's request appeared: try again next round
                logger.info("catch-up election #%s: %s; retrying", action.pk, exc)
            else:
                _wait_consumed(store, CONSUME_WAIT_S, sleep)
                for tp, leader in _leaders(store, ready).items():
                    preferred = int(rows[tp]["preferred"])
                    done[_name(tp)] = {
                        **_entry(tp, preferred, leader),
                        "outcome": "elected" if leader == preferred else f"not elected: leader is {leader}",
                        "waited_s": round(clock() - started, 1),
                        **({"last_waited_because": last_why[_name(tp)]} if _name(tp) in last_why else {}),
                    }
            waiting = [w for w in waiting if f"{w['topic']}-{w['partition']}" not in done]
        elif ready:
            waiting += [
                {"topic": tp.topic, "partition": tp.partition, "why": "ready; another election request is pending"}
                for tp in ready
            ]
        outcome.update(elected=done, waiting=waiting, catch_up=catch_up.as_dict())
        action.outcome = outcome
        _save(action, "outcome", "controller_epoch")
        if not waiting or clock() - started >= catch_up.timeout_s:
            outcome["after"] = movement_audit.snapshot(store, rows)
            action.outcome = outcome
        if not waiting:
            failed = [k for k, v in done.items() if str(v["outcome"]).startswith("not")]
            action.status = Action.Status.PARTIAL if failed else Action.Status.SUCCEEDED
            action.error = f"not elected: {', '.join(failed)}" if failed else ""
            return action
        if clock() - started >= catch_up.timeout_s:
            moved = [k for k, v in done.items() if v["outcome"] == "elected"]
            whys = "; ".join(f"{w['topic']}-{w['partition']}: {w['why']}" for w in waiting[:20])
            action.status = Action.Status.PARTIAL if moved else Action.Status.FAILED
            action.error = (
                f"timed out after {catch_up.timeout_s:g} s waiting for catch-up; "
                f"{len(waiting)} partition(s) not moved ({whys})"
            )
            return action
        sleep(poll_s)


def _entry(tp: TopicPartition, preferred: int, leader: int) -> dict[str, Any]:
    return {"topic": tp.topic, "partition": tp.partition, "preferred": preferred, "leader": leader}


def _leader_is(condition: election_catchup.Condition, tp: TopicPartition, store: ZkStore, preferred: int) -> bool:
    """Whether ``preferred`` leads ``tp`` now (it needs no election)."""
    return condition.lag == 0 and _leaders(store, [tp]).get(tp) == preferred


@shared_task(name="workers.catchup_election.run")
def run(action_id: int, connect: str | None = None, poll_s: float = 1.0) -> str:
    """The task name earlier releases sent for catch-up elections, kept so a message still queued
    under it runs: the same as ``workers.actions.preferred_election``, which honours the option."""
    from workers.actions import preferred_election

    return str(preferred_election.run(action_id, connect=connect, poll_s=poll_s))
