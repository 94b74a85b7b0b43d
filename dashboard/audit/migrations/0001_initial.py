"""The audit models, moved from ``dashboard.actions`` without touching the database.

``Action``, ``StateChange`` and ``IngestCursor`` keep their tables (``db_table`` names the old ones);
this migration only tells Django's state that they now belong to ``audit`` (``SeparateDatabaseAndState``
with no database operations), and ``actions.0008`` removes them from ``actions``' state. The content
types follow, so permissions and Django admin log entries keep pointing at the same rows.
"""

from typing import Any

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MODELS = ("action", "statechange", "ingestcursor")


def move_content_types(apps: Any, schema_editor: Any) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="actions", model__in=MODELS).update(app_label="audit")


def restore_content_types(apps: Any, schema_editor: Any) -> None:
    content_type = apps.get_model("contenttypes", "ContentType")
    content_type.objects.filter(app_label="audit", model__in=MODELS).update(app_label="actions")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
        ("actions", "0007_action_run_lease"),
        ("contenttypes", "0002_remove_content_type_name"),
    ]

    state_operations = [
        migrations.CreateModel(
            name="IngestCursor",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("cluster", models.CharField(max_length=50, unique=True)),
                ("last_id", models.CharField(default="0-0", max_length=40)),
                ("ingested", models.BigIntegerField(default=0)),
                ("updated", models.DateTimeField(auto_now=True)),
            ],
            options={
                "db_table": "actions_ingestcursor",
            },
        ),
        migrations.CreateModel(
            name="Action",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("created", models.DateTimeField(auto_now_add=True, db_index=True)),
                ("username", models.CharField(help_text="Kept when the user is deleted.", max_length=150)),
                ("cluster", models.CharField(blank=True, db_index=True, max_length=50)),
                (
                    "kind",
                    models.CharField(
                        choices=[
                            ("preferred_election", "Preferred leader election"),
                            ("login", "Login"),
                            ("login_failed", "Failed login"),
                            ("reassignment", "Partition reassignment"),
                            ("reassignment_cancel", "Reassignment cancellation"),
                            ("controlled_shutdown", "Controlled shutdown"),
                            ("topic_create", "Topic creation"),
                            ("topic_delete", "Topic deletion"),
                            ("partitions_add", "Partitions added"),
                            ("cluster_change", "Cluster registered, changed or removed"),
                            ("user_change", "User or role changed"),
                            ("retention_cleanup", "Audit retention cleanup"),
                            ("unclean_election", "Unclean leader election"),
                            ("topic_config", "Topic configuration change"),
                            ("request_rejected", "Request rejected (size, rate, origin or replay)"),
                        ],
                        db_index=True,
                        max_length=32,
                    ),
                ),
                ("parameters", models.JSONField(default=dict)),
                ("reason", models.TextField(blank=True)),
                (
                    "preview",
                    models.JSONField(default=dict, help_text="The preview shown when the action was submitted."),
                ),
                ("outcome", models.JSONField(default=dict, help_text="Per partition outcome and batches written.")),
                (
                    "status",
                    models.CharField(
                        choices=[
                            ("rejected", "Rejected"),
                            ("queued", "Queued"),
                            ("running", "Running"),
                            ("pending", "Submitted, not yet processed by the controller"),
                            ("succeeded", "Succeeded"),
                            ("partial", "Partly succeeded"),
                            ("failed", "Failed"),
                        ],
                        db_index=True,
                        max_length=16,
                    ),
                ),
                ("error", models.TextField(blank=True)),
                ("task_id", models.CharField(blank=True, max_length=64)),
                ("started", models.DateTimeField(blank=True, null=True)),
                ("finished", models.DateTimeField(blank=True, null=True)),
                ("duration_ms", models.IntegerField(blank=True, null=True)),
                ("controller_epoch", models.IntegerField(blank=True, null=True)),
                (
                    "idempotency_key",
                    models.CharField(
                        blank=True,
                        db_index=True,
                        help_text="Client-chosen key: a replayed request or a redelivered task with it has one effect.",
                        max_length=100,
                    ),
                ),
                (
                    "attempts",
                    models.IntegerField(
                        default=0, help_text="How many times a worker started the task (redeliveries)."
                    ),
                ),
                (
                    "lease_owner",
                    models.CharField(
                        blank=True,
                        help_text=(
                            "The task copy now carrying the action out (a fresh token per run); empty when none is."
                        ),
                        max_length=64,
                    ),
                ),
                (
                    "lease_until",
                    models.DateTimeField(
                        blank=True,
                        help_text="Until when the lease holds unless renewed: a copy that died stops renewing it.",
                        null=True,
                    ),
                ),
                (
                    "deliveries",
                    models.JSONField(
                        blank=True,
                        default=list,
                        help_text=(
                            "What each task delivery did: ran, took over an expired lease, or left a live one alone."
                        ),
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to=settings.AUTH_USER_MODEL
                    ),
                ),
            ],
            options={
                "db_table": "actions_action",
                "ordering": ["-created", "-id"],
            },
        ),
        migrations.CreateModel(
            name="StateChange",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("cluster", models.CharField(max_length=50)),
                ("controller_epoch", models.IntegerField()),
                ("seq", models.BigIntegerField()),
                ("controller_id", models.IntegerField(null=True)),
                ("ts", models.DateTimeField(db_index=True)),
                ("kind", models.CharField(db_index=True, max_length=64)),
                ("cause", models.CharField(blank=True, max_length=128)),
                ("event_id", models.CharField(blank=True, max_length=64)),
                ("entity", models.CharField(blank=True, max_length=300)),
                ("topic", models.CharField(blank=True, max_length=255)),
                ("partition", models.IntegerField(null=True)),
                ("replica", models.IntegerField(null=True)),
                ("from_state", models.CharField(blank=True, max_length=64)),
                ("to_state", models.CharField(blank=True, max_length=64)),
                ("leader_before", models.IntegerField(null=True)),
                ("leader_after", models.IntegerField(null=True)),
                ("leader_epoch_before", models.IntegerField(null=True)),
                ("leader_epoch_after", models.IntegerField(null=True)),
                ("isr_before", models.JSONField(null=True)),
                ("isr_after", models.JSONField(null=True)),
                ("error", models.TextField(blank=True)),
                ("record", models.JSONField(default=dict)),
                (
                    "action",
                    models.ForeignKey(
                        blank=True,
                        help_text="The operator action that caused this change, when one did.",
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="state_changes",
                        to="audit.action",
                    ),
                ),
            ],
            options={
                "db_table": "actions_statechange",
                "ordering": ["cluster", "controller_epoch", "seq"],
                "indexes": [
                    models.Index(
                        fields=["cluster", "topic", "partition", "controller_epoch", "seq"],
                        name="actions_sta_cluster_f07137_idx",
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(fields=("cluster", "controller_epoch", "seq"), name="state_change_once")
                ],
            },
        ),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=state_operations, database_operations=[]),
        migrations.RunPython(move_content_types, restore_content_types),
    ]
