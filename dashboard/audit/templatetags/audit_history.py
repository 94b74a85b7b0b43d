"""``{% partition_history cluster topic partition %}``: the latest state changes of a partition."""

from __future__ import annotations

from typing import Any

from django import template

from dashboard.audit.models import StateChange

register = template.Library()

RECENT = 20


@register.inclusion_tag("audit/_partition_history.html")
def partition_history(cluster: str, topic: str, partition: int) -> dict[str, Any]:
    qs = StateChange.objects.filter(cluster=cluster, topic=topic, partition=partition)
    recent = list(qs.order_by("-controller_epoch", "-seq")[:RECENT])
    return {"changes": recent, "total": qs.count(), "cluster": cluster, "topic": topic, "partition": partition}
