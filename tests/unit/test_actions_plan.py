"""Preferred election preview (pure) and the role rules."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from django.contrib.auth.models import AnonymousUser, Group, User

from controller_core.model import TopicPartition as TP
from dashboard.accounts import roles
from dashboard.actions.election import PartitionView, PlanRow, Scope, parse_scope, plan

# broker 3 is down; orders-0 can move to 1, orders-1 is already preferred, orders-2's preferred replica
# is down, orders-3's preferred replica is live but out of the ISR; tiny-0 can move to 2.
PARTITIONS = {
    TP("orders", 0): PartitionView((1, 2), 2, (1, 2)),
    TP("orders", 1): PartitionView((2, 1), 2, (1, 2)),
    TP("orders", 2): PartitionView((3, 1), 1, (1,)),
    TP("orders", 3): PartitionView((1, 2), 2, (2,)),
    TP("tiny", 0): PartitionView((2, 1), 1, (1, 2)),
}
LIVE = {1, 2}


def names(rows: Sequence[PlanRow]) -> list[str]:
    return [f"{r.topic}-{r.partition}" for r in rows]


def test_imbalanced_lists_electable_and_blocked_with_reasons() -> None:
    p = plan(Scope("imbalanced"), PARTITIONS, LIVE)
    assert names(p.electable) == ["orders-0", "tiny-0"]
    assert [r.new_leader for r in p.electable] == [1, 2]
    assert names(p.blocked) == ["orders-2", "orders-3"]
    assert p.blocked[0].blocked == "preferred replica 3 is down"
    assert p.blocked[1].blocked == "preferred replica 1 is not in the ISR [2]"
    assert p.already_preferred == 1
    assert p.live_brokers == (1, 2)


def test_topic_partition_and_broker_scopes() -> None:
    assert names(plan(Scope("topic", topic="tiny"), PARTITIONS, LIVE).electable) == ["tiny-0"]
    one = plan(Scope("partition", topic="orders", partition=0), PARTITIONS, LIVE)
    assert names(one.electable) == ["orders-0"] and not one.blocked
    broker = plan(Scope("broker", broker=1), PARTITIONS, LIVE)
    assert names(broker.electable) == ["orders-0"] and names(broker.blocked) == ["orders-3"]
    assert plan(Scope("broker", broker=7), PARTITIONS, LIVE).electable == []


def test_a_partition_without_leader_is_elected_to_its_live_in_sync_preferred_replica() -> None:
    p = plan(Scope("imbalanced"), {TP("t", 0): PartitionView((1, 2), -1, (1,))}, LIVE)
    assert [r.new_leader for r in p.electable] == [1]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"scope": "everything"}, "scope must be one of"),
        ({"scope": "topic"}, "a topic is needed"),
        ({"scope": "partition", "topic": "orders", "partition": "x"}, "partition must be"),
        ({"scope": "partition", "topic": "orders", "partition": "-1"}, "partition must be"),
        ({"scope": "broker", "broker": ""}, "broker must be"),
    ],
)
def test_parse_scope_rejects_bad_input(data: dict[str, str], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_scope(data)


def test_unknown_topic_or_partition_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown topic"):
        plan(Scope("topic", topic="nope"), PARTITIONS, LIVE)
    with pytest.raises(ValueError, match="has no partition 9"):
        plan(Scope("partition", topic="orders", partition=9), PARTITIONS, LIVE)


def test_parse_scope_accepts_good_input() -> None:
    assert parse_scope({"scope": "partition", "topic": " orders ", "partition": "3"}) == Scope(
        "partition", topic="orders", partition=3
    )
    assert parse_scope({"scope": "imbalanced", "topic": "ignored"}).kind == "imbalanced"


@pytest.mark.django_db
def test_roles_from_groups() -> None:
    assert set(Group.objects.filter(name__in=roles.ROLES).values_list("name", flat=True)) == set(roles.ROLES)
    plain = User.objects.create_user("plain")
    operator = User.objects.create_user("op")
    operator.groups.add(Group.objects.get(name=roles.OPERATOR))
    admin = User.objects.create_user("adm")
    admin.groups.add(Group.objects.get(name=roles.ADMIN))
    boss = User.objects.create_superuser("boss")
    gone = User.objects.create_user("gone", is_active=False)
    gone.groups.add(Group.objects.get(name=roles.ADMIN))
    assert [roles.role_of(u) for u in (plain, operator, admin, boss, gone, AnonymousUser(), None)] == [
        "viewer", "operator", "admin", "admin", None, None, None,
    ]  # fmt: skip
    assert roles.can_view(plain) and not roles.can_operate(plain)
    assert roles.can_operate(operator) and not roles.can_administer(operator)
    assert roles.can_operate(admin) and roles.can_administer(boss)
    assert not roles.can_view(gone)


@pytest.mark.django_db
def test_ensure_roles_command_is_idempotent() -> None:
    from django.core.management import call_command

    Group.objects.filter(name=roles.OPERATOR).delete()
    call_command("ensure_roles")
    call_command("ensure_roles")
    assert Group.objects.filter(name__in=roles.ROLES).count() == 3


_WORKER_START = """
import json
import django
django.setup()
from django.conf import settings
from dashboard.actions.election_submit import TASK_NAME
from dashboard.actions.reassign_service import CANCEL_TASK, EXECUTE_TASK
from dashboard.celery import app
imports = list(app.conf.imports or ())
app.loader.import_default_modules()
sent = sorted({e["task"] for e in settings.CELERY_BEAT_SCHEDULE.values()} | {TASK_NAME, EXECUTE_TASK, CANCEL_TASK})
tasks = {name: task.run.__module__ for name, task in app.tasks.items()}
print(json.dumps({"imports": imports, "sent": sent, "tasks": tasks}))
"""


def test_worker_autodiscovery_finds_every_task_where_its_name_says() -> None:
    """What a worker does at start-up (Celery's ``import_modules`` signal) registers every task the beat
    schedule and the web process send by name, and each is defined in the module its name names.

    In a fresh interpreter, as a worker starts: Celery's autodiscovery returns nothing when another
    thread of the same process is discovering at that moment (its ``_RACE_PROTECTION``), which a
    test process running other tests' threads can hit.
    """
    import json
    import os
    import subprocess
    import sys

    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "dashboard.settings"}
    out = subprocess.run(
        [sys.executable, "-c", _WORKER_START], env=env, capture_output=True, text=True, timeout=120, check=True
    ).stdout
    found = json.loads(out.strip().splitlines()[-1])
    assert found["imports"] == [], "tasks are found by autodiscovery, not listed in conf.imports"
    tasks: dict[str, str] = found["tasks"]
    assert set(found["sent"]) <= set(tasks)
    ours = {name: module for name, module in tasks.items() if name.startswith("workers.")}
    assert {"workers.audit.ingest_state_changes", "workers.actions.recover_stalled", "workers.ping"} <= set(ours)
    for name, module in ours.items():
        assert name.rpartition(".")[0] in (module, module.removesuffix(".tasks")), (name, module)
