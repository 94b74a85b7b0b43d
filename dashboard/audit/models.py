"""The audit log: every operator action and rejected attempt, and every controller state change.

The tables keep the names they had when these models lived in ``dashboard.actions``
(``actions_action``, ``actions_statechange``, ``actions_ingestcursor``): the move was a state-only
migration (``audit.0001_initial`` and ``actions.0008_models_moved_to_audit``), no data was copied.

Append-only: rows are never deleted (``delete`` raises); a row's status moves forward as the task
runs (queued → running → succeeded / partial / pending / failed), or it is written once as rejected.
The cluster is kept by name, not by foreign key, so the history outlives a removed cluster.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models


class Action(models.Model):
    class Kind(models.TextChoices):
        PREFERRED_ELECTION = "preferred_election", "Preferred leader election"
        LOGIN = "login", "Login"
        LOGIN_FAILED = "login_failed", "Failed login"
        REASSIGNMENT = "reassignment", "Partition reassignment"
        REASSIGNMENT_CANCEL = "reassignment_cancel", "Reassignment cancellation"
        CONTROLLED_SHUTDOWN = "controlled_shutdown", "Controlled shutdown"
        TOPIC_CREATE = "topic_create", "Topic creation"
        TOPIC_DELETE = "topic_delete", "Topic deletion"
        PARTITIONS_ADD = "partitions_add", "Partitions added"
        CLUSTER_CHANGE = "cluster_change", "Cluster registered, changed or removed"
        USER_CHANGE = "user_change", "User or role changed"
        RETENTION_CLEANUP = "retention_cleanup", "Audit retention cleanup"
        UNCLEAN_ELECTION = "unclean_election", "Unclean leader election"
        TOPIC_CONFIG = "topic_config", "Topic configuration change"
        REQUEST_REJECTED = "request_rejected", "Request rejected (size, rate, origin or replay)"

    class Status(models.TextChoices):
        REJECTED = "rejected", "Rejected"
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        PENDING = "pending", "Submitted, not yet processed by the controller"
        SUCCEEDED = "succeeded", "Succeeded"
        PARTIAL = "partial", "Partly succeeded"
        FAILED = "failed", "Failed"

    created = models.DateTimeField(auto_now_add=True, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    username = models.CharField(max_length=150, help_text="Kept when the user is deleted.")
    cluster = models.CharField(max_length=50, db_index=True, blank=True)
    kind = models.CharField(max_length=32, choices=Kind.choices, db_index=True)
    parameters = models.JSONField(default=dict)
    reason = models.TextField(blank=True)
    preview = models.JSONField(default=dict, help_text="The preview shown when the action was submitted.")
    outcome = models.JSONField(default=dict, help_text="Per partition outcome and batches written.")
    status = models.CharField(max_length=16, choices=Status.choices, db_index=True)
    error = models.TextField(blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    started = models.DateTimeField(null=True, blank=True)
    finished = models.DateTimeField(null=True, blank=True)
    duration_ms = models.IntegerField(null=True, blank=True)
    controller_epoch = models.IntegerField(null=True, blank=True)
    idempotency_key = models.CharField(
        max_length=100,
        blank=True,
        db_index=True,
        help_text="Client-chosen key: a replayed request or a redelivered task with it has one effect.",
    )
    attempts = models.IntegerField(default=0, help_text="How many times a worker started the task (redeliveries).")
    lease_owner = models.CharField(
        max_length=64,
        blank=True,
        help_text="The task copy now carrying the action out (a fresh token per run); empty when none is.",
    )
    lease_until = models.DateTimeField(
        null=True,
        blank=True,
        help_text="Until when the lease holds unless renewed: a copy that died stops renewing it.",
    )
    deliveries = models.JSONField(
        default=list,
        blank=True,
        help_text="What each task delivery did: ran, took over an expired lease, or left a live one alone.",
    )

    class Meta:
        db_table = "actions_action"
        ordering = ["-created", "-id"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} on {self.cluster} by {self.username}: {self.status}"

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError("audit records are append-only")

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Store what a client sent even when it holds NUL characters (PostgreSQL refuses them).

        An audit row records bad input verbatim (``partition=\\x00...`` is what a fuzzer sends); text
        and ``jsonb`` columns on PostgreSQL cannot hold U+0000, so saving it raised a DataError and
        the request got a 500 instead of its clear refusal. NUL becomes U+FFFD (the replacement
        character) in every text and JSON field; SQLite stores the same, so both databases agree.
        """
        for name in _TEXT_FIELDS:
            setattr(self, name, without_nul(getattr(self, name)))
        super().save(*args, **kwargs)


_TEXT_FIELDS: tuple[str, ...] = (
    "username", "cluster", "parameters", "reason", "preview", "outcome", "error", "idempotency_key", "deliveries",
)  # fmt: skip


def without_nul(value: Any) -> Any:
    """``value`` with every NUL character in its strings (keys too) replaced by U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(v) for v in value]
    return value


class StateChange(models.Model):
    """One record of a controller's state-change stream (docs/contracts.md), ingested idempotently.

    ``(cluster, controller_epoch, seq)`` is unique, so re-reading the stream after a worker restart
    never stores a record twice. ``record`` keeps the whole JSON, kind-specific fields included.
    """

    cluster = models.CharField(max_length=50)
    controller_epoch = models.IntegerField()
    seq = models.BigIntegerField()
    controller_id = models.IntegerField(null=True)
    ts = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=64, db_index=True)
    cause = models.CharField(max_length=128, blank=True)
    event_id = models.CharField(max_length=64, blank=True)
    entity = models.CharField(max_length=300, blank=True)
    topic = models.CharField(max_length=255, blank=True)
    partition = models.IntegerField(null=True)
    replica = models.IntegerField(null=True)
    from_state = models.CharField(max_length=64, blank=True)
    to_state = models.CharField(max_length=64, blank=True)
    leader_before = models.IntegerField(null=True)
    leader_after = models.IntegerField(null=True)
    leader_epoch_before = models.IntegerField(null=True)
    leader_epoch_after = models.IntegerField(null=True)
    isr_before = models.JSONField(null=True)
    isr_after = models.JSONField(null=True)
    error = models.TextField(blank=True)
    record = models.JSONField(default=dict)
    action = models.ForeignKey(
        Action,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="state_changes",
        help_text="The operator action that caused this change, when one did.",
    )

    class Meta:
        db_table = "actions_statechange"
        ordering = ["cluster", "controller_epoch", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "controller_epoch", "seq"], name="state_change_once"),
        ]
        indexes = [models.Index(fields=["cluster", "topic", "partition", "controller_epoch", "seq"])]

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise PermissionError("audit records are append-only")


class IngestCursor(models.Model):
    """The last id of the cluster's state-change stream stored (``workers.audit``), committed with the rows."""

    cluster = models.CharField(max_length=50, unique=True)
    last_id = models.CharField(max_length=40, default="0-0")
    ingested = models.BigIntegerField(default=0)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        db_table = "actions_ingestcursor"

    def __str__(self) -> str:
        return f"{self.cluster} @ {self.last_id}"
