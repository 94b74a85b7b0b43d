"""The unit a mirror flush writes and publishes: everything that changed since the previous flush.

A ``ChangeSet`` is coalesced: a partition that changed five times inside one window appears once,
with its latest row; counters appear with their latest absolute value (so applying a delta twice is
harmless); transitions are *counted* per edge, because the diagram animates the rate on each edge.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from dashboard.clusters.layout import PartitionRow
from dashboard.live.scopes import CLUSTER as CLUSTER_SCOPE
from dashboard.live.scopes import broker_scope, topic_scope

#: scope name -> machine ("partition" | "replica") -> "From>To" -> number of transitions
EdgeCounts = dict[str, dict[str, Counter[str]]]

__all__ = ["CLUSTER_SCOPE", "ChangeSet", "EdgeCounts", "broker_scope", "topic_scope"]


@dataclass(slots=True)
class ChangeSet:
    """What one flush carries. Keys of ``zadd``/``zrem`` are full Redis keys."""

    rows: dict[str, PartitionRow] = field(default_factory=dict)
    removed_rows: list[str] = field(default_factory=list)
    zadd: dict[str, list[str]] = field(default_factory=dict)
    zrem: dict[str, list[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    topic_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)
    removed_topics: list[str] = field(default_factory=list)
    brokers: dict[int, dict[str, Any]] = field(default_factory=dict)
    removed_brokers: list[int] = field(default_factory=list)
    admin: dict[str, Any] = field(default_factory=dict)
    controller: dict[str, Any] | None = None
    edges: EdgeCounts = field(default_factory=dict)

    @property
    def is_empty(self) -> bool:
        return not (
            self.rows
            or self.removed_rows
            or self.counts
            or self.topics
            or self.removed_topics
            or self.brokers
            or self.removed_brokers
            or self.admin
            or self.controller is not None
            or self.edges
            or self.zadd
            or self.zrem
        )

    def count_edge(self, scope: str, machine: str, src: str, dst: str, n: int = 1) -> None:
        machines = self.edges.get(scope)
        if machines is None:
            machines = self.edges[scope] = {}
        edges = machines.get(machine)
        if edges is None:
            edges = machines[machine] = Counter()
        edges[f"{src}>{dst}"] += n

    def add_edges(self, flat: Counter[tuple[str, str, str, str]]) -> None:
        """Fold transitions counted flat as ``(scope, machine, from, to)`` (the hot path's form)."""
        for (scope, machine, src, dst), n in flat.items():
            self.count_edge(scope, machine, src, dst, n)
