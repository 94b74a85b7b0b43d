"""Clusters registered in the dashboard: where their ZooKeeper is and whether we run them."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models

from dashboard.clusters.connect import parse_connect_string


def validate_connect_string(value: str) -> None:
    try:
        parse_connect_string(value)
    except ValueError as exc:
        raise ValidationError(str(exc), code="invalid_connect_string") from None


class Cluster(models.Model):
    """A ZooKeeper tree in Kafka's layout, mirrored live.

    *managed*: our controller runs it, so partition and replica states come from the controller's
    state-change stream. *observed*: any ZooKeeper-mode Kafka cluster (or another controller); the
    mirror is read-only and derives states from ZooKeeper, marking them as derived.
    """

    class Mode(models.TextChoices):
        MANAGED = "managed", "Managed (our controller)"
        OBSERVED = "observed", "Observed (read-only, states derived)"

    name = models.SlugField(
        max_length=50,
        unique=True,
        validators=[RegexValidator(r"^[a-zA-Z0-9_-]+$", "Use letters, digits, '-' and '_' only.")],
        help_text="Short name used in URLs, Redis keys and the controller's --cluster option.",
    )
    zookeeper_connect = models.CharField(
        "ZooKeeper connect string",
        max_length=500,
        validators=[validate_connect_string],
        help_text="host:port[,host:port...][/chroot], e.g. zk1:2181,zk2:2181/kafka",
    )
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.MANAGED)
    description = models.TextField(blank=True)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: object, **kwargs: object) -> None:
        # Store the normalised form, so the mirror and the pages agree on one spelling.
        self.zookeeper_connect = str(parse_connect_string(self.zookeeper_connect))
        super().save(*args, **kwargs)  # type: ignore[arg-type]
