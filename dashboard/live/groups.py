"""The only place that builds Channels group names.

Channels accepts group names of ``[a-zA-Z0-9-_.]`` shorter than 100 characters. Cluster names are
slugs (at most 50 characters) and topic names are Kafka's ``[a-zA-Z0-9._-]`` up to 249 characters,
so a group name that would be too long uses a digest of the topic name under a ``.th.`` marker
(short names use ``.t.``): still exactly one group per topic, and no clash between the two forms.
"""

from __future__ import annotations

import hashlib
from typing import Final

from dashboard.live.scopes import CLUSTER, Scope

_MAX: Final = 99


def _fit(name: str) -> str:
    if len(name) <= _MAX:
        return name
    head, _, tail = name.rpartition(".t.")
    digest = hashlib.sha1(tail.encode(), usedforsecurity=False).hexdigest()
    return f"{head}.th.{digest}"[:_MAX]


def status(cluster: str) -> str:
    """Mirror heartbeats and resync notices for every live page of ``cluster``."""
    return f"kcp.{cluster}.status"


def cluster(cluster: str) -> str:
    """Cluster-wide counters, transitions, brokers and controller."""
    return f"kcp.{cluster}.c"


def topic(cluster: str, topic: str) -> str:
    return _fit(f"kcp.{cluster}.t.{topic}")


def broker(cluster: str, broker: int) -> str:
    return f"kcp.{cluster}.b.{int(broker)}"


def for_scope(cluster_name: str, scope: Scope) -> str:
    """The group carrying deltas of ``scope``."""
    if scope.kind == CLUSTER:
        return cluster(cluster_name)
    if scope.kind == "topic":
        return topic(cluster_name, scope.value)
    return broker(cluster_name, scope.broker)
