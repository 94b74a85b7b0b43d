"""Tables the analytics pages read: one per result of the Spark job, plus the job runs themselves.

Results are keyed by cluster *name* (a string), not a foreign key to ``clusters.Cluster``: the
history outlives a cluster's registration, and the job reads log directories named after clusters,
whether or not the dashboard knows them. Rows are replaced per cluster and day range by
``workers.analytics.load`` (delete + insert in one transaction), never updated in place, so every
table has the natural key as a unique constraint: a bug that loaded twice would fail loudly.

Durations are stored in seconds (floats): that is what people read; the Parquet keeps milliseconds.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AnalyticsRun(models.Model):
    """One run of the job (nightly, from the page, or ``manage.py run_analytics``)."""

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        SUCCEEDED = "succeeded", "Succeeded"
        FAILED = "failed", "Failed"

    class Trigger(models.TextChoices):
        PAGE = "page", "Run now (page)"
        NIGHTLY = "nightly", "Nightly schedule"
        COMMAND = "command", "manage.py run_analytics"
        CURRENT = "current", "Every few minutes (today so far)"

    ACTIVE = (Status.QUEUED, Status.RUNNING)
    #: The pipeline's stages, in order, with the share of the progress bar each ends at (``runner``).
    STAGES = (("export", 0.01), ("compact", 0.05), ("compute", 0.8), ("load", 1.0))

    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    trigger = models.CharField(max_length=16, choices=Trigger.choices, default=Trigger.PAGE)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    task_id = models.CharField(max_length=64, blank=True)
    since = models.DateField()
    until = models.DateField()
    clusters = models.CharField(max_length=500, blank=True, help_text="Comma-separated; empty means all.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_s = models.FloatField(null=True, blank=True)
    progress = models.FloatField(default=0.0, help_text="0 to 1")
    message = models.CharField(max_length=255, blank=True)
    error = models.TextField(blank=True)
    records = models.BigIntegerField(null=True, blank=True)
    rows_loaded = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        permissions = [("run_analytics", "Can start an analytics run")]

    def __str__(self) -> str:
        return f"analytics run {self.pk} {self.since}..{self.until} {self.status}"

    @property
    def is_active(self) -> bool:
        return self.status in self.ACTIVE

    @property
    def cluster_list(self) -> list[str]:
        return [c for c in self.clusters.split(",") if c]

    @property
    def stage(self) -> str:
        """Which stage the progress is in: export, compact, compute or load (done when finished)."""
        if not self.is_active:
            return "done"
        for name, ends_at in self.STAGES:
            if self.progress < ends_at:
                return name
        return self.STAGES[-1][0]

    def as_status(self) -> dict[str, object]:
        """The JSON the page polls while the run is going."""
        return {
            "id": self.pk,
            "status": self.status,
            "active": self.is_active,
            "stage": self.stage,
            "progress": round(self.progress, 3),
            "message": self.message,
            "error": self.error,
            "since": self.since.isoformat(),
            "until": self.until.isoformat(),
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "duration_s": self.duration_s,
            "records": self.records,
        }


class AnalyticsCursor(models.Model):
    """How far the every-few-minutes run got in a cluster's log of ``day``: the next run starts there.

    ``bytes`` is the size of the day's file the run read (whole lines), ``state_ms`` the instant its
    saved state describes (``<output>/_state/at=<state_ms>/``), from which the next run counts.
    Updated in the transaction that loads the run's results, so an increment is added exactly once.
    """

    cluster = models.CharField(max_length=100, unique=True)
    day = models.DateField()
    bytes = models.BigIntegerField()
    state_ms = models.BigIntegerField()
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"analytics cursor {self.cluster} {self.day} @{self.bytes}"


class _ClusterDay(models.Model):
    cluster = models.CharField(max_length=100)
    day = models.DateField()

    class Meta:
        abstract = True


class _OutageStats(models.Model):
    outages = models.IntegerField(help_text="Intervals that started this day")
    recoveries = models.IntegerField(help_text="Intervals that ended with an election this day")
    leaderless_s = models.FloatField(help_text="Leaderless time inside this day")
    recovery_s = models.FloatField(help_text="Total duration of the intervals recovered this day")
    mttr_s = models.FloatField(null=True, help_text="recovery_s / recoveries")

    class Meta:
        abstract = True


class TopicAvailability(_ClusterDay, _OutageStats):
    topic = models.CharField(max_length=255)
    partitions = models.IntegerField()
    availability = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "day", "topic"], name="analytics_topic_day_key")]
        indexes = [models.Index(fields=["cluster", "day"]), models.Index(fields=["cluster", "topic", "day"])]


class PartitionOutage(_ClusterDay, _OutageStats):
    topic = models.CharField(max_length=255)
    partition = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "day", "topic", "partition"], name="analytics_partition_day_key")
        ]
        indexes = [models.Index(fields=["cluster", "day"])]


class BrokerOutage(_ClusterDay, _OutageStats):
    broker = models.IntegerField(null=True, help_text="The leader whose loss caused the outages; null if unknown")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "day", "broker"], name="analytics_broker_day_key")]
        indexes = [models.Index(fields=["cluster", "day"])]


class UnavailabilityInterval(models.Model):
    """A partition without a leader, from going offline to its next election (or deletion)."""

    cluster = models.CharField(max_length=100)
    topic = models.CharField(max_length=255)
    partition = models.IntegerField()
    started_at = models.DateTimeField(help_text="When the controller detected it")
    estimated_started_at = models.DateTimeField(
        null=True,
        help_text="When the dead broker's ZooKeeper session was lost (controller's estimate); null if detected",
    )
    ended_at = models.DateTimeField(null=True, help_text="Null while still leaderless")
    duration_s = models.FloatField(null=True, help_text="From the detected start")
    outage_s = models.FloatField(null=True, help_text="From the estimated start if there is one (the daily figures')")
    cause_broker = models.IntegerField(null=True)
    end_reason = models.CharField(max_length=16, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "topic", "partition", "started_at"], name="analytics_interval_key"
            )
        ]
        indexes = [models.Index(fields=["cluster", "started_at"]), models.Index(fields=["cluster", "ended_at"])]


class ElectionCount(_ClusterDay):
    strategy = models.CharField(max_length=32)
    cause = models.CharField(max_length=100)
    elections = models.IntegerField()
    unclean = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "day", "strategy", "cause"], name="analytics_election_day_key")
        ]
        indexes = [models.Index(fields=["cluster", "day"])]


class UncleanElection(_ClusterDay):
    """A leader elected from outside the ISR: the partition may have lost acknowledged writes."""

    at = models.DateTimeField()
    controller_epoch = models.BigIntegerField(null=True)
    topic = models.CharField(max_length=255)
    partition = models.IntegerField()
    strategy = models.CharField(max_length=32, blank=True)
    cause = models.CharField(max_length=100, blank=True)
    leader_before = models.IntegerField(null=True)
    leader_after = models.IntegerField(null=True)
    isr_before = models.CharField(max_length=255, blank=True)
    isr_after = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "topic", "partition", "at"], name="analytics_unclean_key")
        ]
        indexes = [models.Index(fields=["cluster", "day"])]


class LeaderCount(models.Model):
    """How many partitions a broker leads at the end of one minute."""

    cluster = models.CharField(max_length=100)
    minute = models.DateTimeField()
    epoch_minute = models.BigIntegerField(help_text="Minutes since 1970: cheap bucketing in SQL")
    broker = models.IntegerField()
    leaders = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "epoch_minute", "broker"], name="analytics_leader_count_key")
        ]


class LeaderSkew(models.Model):
    """Leader balance at the end of one minute: skew = max / mean leaders per broker."""

    cluster = models.CharField(max_length=100)
    minute = models.DateTimeField()
    epoch_minute = models.BigIntegerField()
    max_leaders = models.IntegerField()
    min_leaders = models.IntegerField()
    mean_leaders = models.FloatField()
    brokers = models.IntegerField()
    skew = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "epoch_minute"], name="analytics_leader_skew_key")]


class ControllerFailover(models.Model):
    """A new controller epoch and how long the cluster had nobody acting."""

    cluster = models.CharField(max_length=100)
    controller_epoch = models.BigIntegerField()
    controller_id = models.IntegerField(null=True)
    previous_epoch = models.BigIntegerField(null=True)
    previous_controller_id = models.IntegerField(null=True)
    previous_last_at = models.DateTimeField(null=True)
    first_at = models.DateTimeField()
    gap_s = models.FloatField(null=True, help_text="Old controller's last record to the new one's first")
    elected_at = models.DateTimeField(null=True)
    completed_at = models.DateTimeField(null=True)
    failover_s = models.FloatField(null=True, help_text="Election to failover completed")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "controller_epoch"], name="analytics_failover_key")]
        indexes = [models.Index(fields=["cluster", "first_at"])]


class Reassignment(models.Model):
    """One partition's move to new replicas; ``action_id`` groups the partitions of one request."""

    cluster = models.CharField(max_length=100)
    topic = models.CharField(max_length=255)
    partition = models.IntegerField()
    action_id = models.CharField(max_length=64, blank=True)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True)
    duration_s = models.FloatField(null=True)
    status = models.CharField(max_length=32)
    origin_replicas = models.CharField(max_length=255, blank=True)
    target_replicas = models.CharField(max_length=255, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "topic", "partition", "started_at"], name="analytics_reassignment_key"
            )
        ]
        indexes = [models.Index(fields=["cluster", "started_at"]), models.Index(fields=["cluster", "action_id"])]


class IsrFlapping(_ClusterDay):
    """A partition among the day's most flapping: its ISR shrank and grew back ``flaps`` times."""

    topic = models.CharField(max_length=255)
    partition = models.IntegerField()
    shrinks = models.IntegerField()
    expands = models.IntegerField()
    flaps = models.IntegerField()
    rank = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "day", "topic", "partition"], name="analytics_flapping_key")
        ]
        indexes = [models.Index(fields=["cluster", "day"])]
