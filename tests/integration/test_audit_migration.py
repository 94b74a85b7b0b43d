"""The audit models' move from ``actions`` to ``audit`` keeps every row (state-only migrations).

A database at the schema of before the move (``actions.0007``, no ``audit``) is filled through the
historical models, then migrated forward to today's leaf nodes; every row, link and content type must
come through unchanged, and the uniqueness that makes the ingest idempotent must still hold.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_MOVE = [("actions", "0007_action_run_lease"), ("audit", None)]


def _migrate(targets: list[tuple[str, str | None]]) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    return MigrationExecutor(connection)  # a fresh loader sees what is applied now


def _fill(apps: Any) -> dict[str, Any]:
    user = apps.get_model("auth", "User").objects.create(username="olga")
    action_model = apps.get_model("actions", "Action")
    election = action_model.objects.create(
        user=user,
        username="olga",
        cluster="prod",
        kind="preferred_election",
        parameters={"scope": "topic", "topic": "orders"},
        status="succeeded",
        outcome={"partitions": [{"topic": "orders", "partition": 0}]},
        idempotency_key="k-1",
    )
    login = action_model.objects.create(username="olga", kind="login", status="succeeded")
    change_model = apps.get_model("actions", "StateChange")
    ts = datetime(2026, 11, 1, 12, tzinfo=UTC)
    for seq in (1, 2, 3):
        change_model.objects.create(
            cluster="prod",
            controller_epoch=4,
            seq=seq,
            ts=ts,
            kind="election",
            topic="orders",
            partition=0,
            isr_after=[1, 2],
            record={"seq": seq},
            action=election if seq == 2 else None,
        )
    apps.get_model("actions", "IngestCursor").objects.create(cluster="prod", last_id="17-0", ingested=3)
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.get_or_create(app_label="actions", model="action")
    return {"election": election.pk, "login": login.pk, "user": user.pk}


def test_rows_survive_the_move_to_the_audit_app() -> None:
    executor = _migrate(BEFORE_MOVE)
    old = executor.loader.project_state(("actions", "0007_action_run_lease"), at_end=True).apps
    ids = _fill(old)

    executor = _migrate(executor.loader.graph.leaf_nodes())

    from django.contrib.contenttypes.models import ContentType

    from dashboard.audit.models import Action, IngestCursor, StateChange

    election = Action.objects.get(pk=ids["election"])
    assert (election.user_id, election.username, election.cluster, election.kind, election.status) == (
        ids["user"],
        "olga",
        "prod",
        "preferred_election",
        "succeeded",
    )
    assert election.parameters == {"scope": "topic", "topic": "orders"} and election.idempotency_key == "k-1"
    assert Action.objects.get(pk=ids["login"]).kind == Action.Kind.LOGIN
    assert Action.objects.count() == 2
    changes = list(StateChange.objects.order_by("seq").values_list("seq", "action_id", "isr_after", "record"))
    assert changes == [
        (1, None, [1, 2], {"seq": 1}),
        (2, ids["election"], [1, 2], {"seq": 2}),
        (3, None, [1, 2], {"seq": 3}),
    ]
    assert list(election.state_changes.values_list("seq", flat=True)) == [2]
    cursor = IngestCursor.objects.get(cluster="prod")
    assert (cursor.last_id, cursor.ingested) == ("17-0", 3)
    assert ContentType.objects.filter(app_label="audit", model="action").exists()
    assert not ContentType.objects.filter(app_label="actions", model="action").exists()
    with pytest.raises(IntegrityError), transaction.atomic():
        StateChange.objects.create(cluster="prod", controller_epoch=4, seq=2, ts=datetime.now(UTC), kind="election")
