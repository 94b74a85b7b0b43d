"""Turn a ``ChangeSet`` into the ordered group messages of one flush.

Each flush has one cluster sequence number. Every scope (cluster, a topic, a broker) that the flush
touched gets a message with that ``seq`` and ``prev``, the ``seq`` of the previous message for the
same scope, so a page that follows one topic sees no false gaps when other topics change, yet still
detects a lost message (see ``dashboard.live.protocol``).

Scopes nobody watches are not sent (a failover touching 2,000 topics must not cost 2,000 group
sends), but their ``prev`` still advances, so a viewer who subscribes at the wrong moment detects
the message it could not have received and resyncs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from dashboard.clusters import layout
from dashboard.live import groups, protocol
from dashboard.live.scopes import CLUSTER, broker_scope, parse_scope, topic_scope
from workers.mirror.changes import ChangeSet

Message = tuple[str, dict[str, Any]]


class DeltaBuilder:
    """Builds group messages and remembers, per scope, the last sequence number it carried.

    Example::

        builder = DeltaBuilder("demo")
        builder.reset(gen="ab12", seq=0)
        for group, message in builder.build(changes, seq=1, watched={"topic:orders"}):
            channel_layer_send(group, message)
    """

    def __init__(self, cluster: str, row_cap: int = protocol.ROW_CAP) -> None:
        self.cluster = cluster
        self.row_cap = row_cap
        self.gen = ""
        self._base = 0
        self._last: dict[str, int] = {}

    def reset(self, gen: str, seq: int) -> None:
        """Start a new generation (after a full resync) at ``seq``."""
        self.gen = gen
        self._base = seq
        self._last.clear()

    def _envelope(self, scope: str, seq: int, data: dict[str, Any]) -> dict[str, Any]:
        prev = self._last.get(scope, self._base)
        self._last[scope] = seq
        return {"type": protocol.DELTA, "scope": scope, "gen": self.gen, "seq": seq, "prev": prev, "data": data}

    def build(self, ch: ChangeSet, seq: int, watched: Iterable[str]) -> list[Message]:
        """The messages of flush ``seq``: the cluster scope always, other scopes if ``watched``."""
        watched_set = set(watched)
        out: list[Message] = []
        cluster_data: dict[str, Any] = {
            "counts": ch.counts,
            "edges": _edges(ch, CLUSTER),
        }
        if ch.brokers or ch.removed_brokers:
            cluster_data["brokers"] = {str(b): reg for b, reg in ch.brokers.items()}
            cluster_data["removed_brokers"] = ch.removed_brokers
        if ch.controller is not None:
            cluster_data["controller"] = ch.controller
        if ch.admin:
            cluster_data["admin"] = ch.admin
        touched = len(set(ch.topic_counts) | set(ch.topics) | set(ch.removed_topics))
        if touched:
            # How many topic summaries changed, not which: the topics page refetches its visible
            # rows (sorted and filtered on the server) instead of every viewer receiving 2,000 names.
            cluster_data["topics_changed"] = touched
        out.append((groups.cluster(self.cluster), self._envelope(CLUSTER, seq, cluster_data)))

        rows_by_topic: dict[str, list[layout.PartitionRow]] = defaultdict(list)
        for row in ch.rows.values():
            rows_by_topic[row.topic].append(row)
        removed_by_topic: dict[str, list[str]] = defaultdict(list)
        for m in ch.removed_rows:
            topic, partition, _ = layout.parse_member(m)
            removed_by_topic[topic].append(layout.display_name(topic, partition))
        topics = set(ch.topic_counts) | set(rows_by_topic) | set(removed_by_topic) | set(ch.removed_topics)
        topics |= {scope[6:] for scope in ch.edges if scope.startswith("topic:")}
        for topic in sorted(topics):
            scope = topic_scope(topic)
            if scope not in watched_set:
                self._envelope(scope, seq, {})  # advance prev: a late subscriber must see the gap
                continue
            rows = rows_by_topic.get(topic, [])
            data: dict[str, Any] = {"counts": ch.topic_counts.get(topic, {}), "edges": _edges(ch, scope)}
            if len(rows) > self.row_cap:
                data["rows_truncated"] = True
            elif rows:
                data["rows"] = [layout.row_view(r) for r in sorted(rows, key=lambda r: r.partition)]
            if removed_by_topic.get(topic):
                data["removed_rows"] = removed_by_topic[topic]
            if topic in ch.removed_topics:
                data["removed"] = True
            out.append((groups.topic(self.cluster, topic), self._envelope(scope, seq, data)))

        brokers: set[int] = set(ch.brokers) | set(ch.removed_brokers)
        for key in ch.counts:
            if key.startswith("b:"):
                middle = key[2:].partition(":")[0]
                if middle.lstrip("-").isdigit():
                    brokers.add(int(middle))
        brokers |= {int(s[7:]) for s in ch.edges if s.startswith("broker:") and s[7:].lstrip("-").isdigit()}
        for broker in sorted(brokers):
            scope = broker_scope(broker)
            if scope not in watched_set:
                self._envelope(scope, seq, {})
                continue
            data = {"counts": layout.broker_scope_counts(ch.counts, broker), "edges": _edges(ch, scope)}
            if broker in ch.brokers:
                data["broker"] = ch.brokers[broker]
            if broker in ch.removed_brokers:
                data["broker_gone"] = True
            out.append((groups.broker(self.cluster, broker), self._envelope(scope, seq, data)))
        return out


def split_rows(messages: list[Message]) -> tuple[list[Message], list[Message]]:
    """``messages`` split into those without rows and those that carry or announce rows (in order).

    The mirror publishes the first as soon as a flush's counters are stored and the second once its
    rows are (``SnapshotWriter.write_changes``). Each scope has one message per flush, so every
    scope's order is kept.
    """
    counters_only: list[Message] = []
    with_rows: list[Message] = []
    for group, message in messages:
        data = message.get("data") or {}
        carries_rows = "rows" in data or "rows_truncated" in data or "removed_rows" in data
        (with_rows if carries_rows else counters_only).append((group, message))
    return counters_only, with_rows


def _edges(ch: ChangeSet, scope: str) -> dict[str, dict[str, int]]:
    machines = ch.edges.get(scope, {})
    return {machine: dict(edges) for machine, edges in machines.items()}


def watched_scopes(entries: Iterable[str]) -> set[str]:
    """Scopes named by interest entries (``"<scope>|<channel>"``), ignoring malformed ones."""
    out: set[str] = set()
    for entry in entries:
        scope, _, _channel = entry.partition("|")
        try:
            out.add(str(parse_scope(scope)))
        except ValueError:
            continue
    return out
