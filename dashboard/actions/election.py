"""Preview of a preferred leader election, computed from ZooKeeper with the controller's own rule.

``plan`` is pure (unit-tested); ``read_plan`` reads the cluster's ZooKeeper (``ZkStore``) and calls
it. A partition whose leader already is its preferred replica is left out of the request; one whose
preferred replica is down or out of the ISR is listed as blocked with the reason, and not requested.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from controller_core.election import preferred_replica_partition_leader_election
from controller_core.model import TopicPartition

SCOPES: Final = ("partition", "topic", "broker", "imbalanced")
NO_LEADER: Final = -1


@dataclass(frozen=True, slots=True)
class Scope:
    """What to elect: one partition, a topic, every partition ``broker`` should lead, or all imbalanced."""

    kind: str
    topic: str = ""
    partition: int | None = None
    broker: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"scope": self.kind, "topic": self.topic, "partition": self.partition, "broker": self.broker}

    def describe(self) -> str:
        if self.kind == "partition":
            return f"partition {self.topic}-{self.partition}"
        if self.kind == "topic":
            return f"topic {self.topic}"
        if self.kind == "broker":
            return f"partitions broker {self.broker} should lead"
        return "every partition whose leader is not its preferred replica"


def parse_scope(data: Mapping[str, Any]) -> Scope:
    """Validate the form or JSON fields; raises ``ValueError`` with a message for the operator."""
    kind = str(data.get("scope", "")).strip()
    if kind not in SCOPES:
        raise ValueError(f"scope must be one of {', '.join(SCOPES)}")
    topic = str(data.get("topic", "") or "").strip()

    def number(field: str) -> int:
        raw = str(data.get(field, "") or "").strip()
        if not raw.isdigit():
            raise ValueError(f"{field} must be a non-negative whole number")
        return int(raw)

    if kind == "partition":
        if not topic:
            raise ValueError("a topic is needed for a partition election")
        return Scope(kind, topic=topic, partition=number("partition"))
    if kind == "topic":
        if not topic:
            raise ValueError("a topic is needed for a topic election")
        return Scope(kind, topic=topic)
    if kind == "broker":
        return Scope(kind, broker=number("broker"))
    return Scope(kind)


@dataclass(frozen=True, slots=True)
class PlanRow:
    topic: str
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    preferred: int | None
    new_leader: int | None
    blocked: str  # "" when electable

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
            "leader": self.leader,
            "preferred": self.preferred,
            "new_leader": self.new_leader,
            "blocked": self.blocked,
        }


@dataclass(frozen=True, slots=True)
class Plan:
    electable: list[PlanRow]
    blocked: list[PlanRow]
    already_preferred: int
    live_brokers: tuple[int, ...]
    #: With the catch-up option (``election_catchup.preview``): which move now, which wait and why.
    catch_up: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "electable": [r.as_dict() for r in self.electable],
            "blocked": [r.as_dict() for r in self.blocked],
            "already_preferred": self.already_preferred,
            "live_brokers": list(self.live_brokers),
        }
        if self.catch_up is not None:
            out["catch_up"] = self.catch_up
        return out


@dataclass(frozen=True, slots=True)
class PartitionView:
    """What ``plan`` needs of one partition: its replicas and (when it has a state znode) leader and ISR."""

    replicas: tuple[int, ...]
    leader: int = NO_LEADER
    isr: tuple[int, ...] = ()


def plan(
    scope: Scope,
    partitions: Mapping[TopicPartition, PartitionView],
    live: Collection[int],
    deleting: Collection[str] = (),
) -> Plan:
    """The preferred election ``scope`` asks for, over ``partitions`` (every partition of the cluster,
    or at least those in scope), with ``live`` the registered brokers and ``deleting`` the topics queued
    for deletion (the controller answers INVALID_TOPIC_EXCEPTION for them, so they are blocked here).
    Raises ``ValueError`` when the named topic or partition does not exist."""
    doomed = frozenset(deleting)
    live_set = frozenset(live)
    if scope.kind in ("partition", "topic") and not any(tp.topic == scope.topic for tp in partitions):
        raise ValueError(f"unknown topic {scope.topic!r}")
    if scope.kind == "partition" and TopicPartition(scope.topic, scope.partition or 0) not in partitions:
        raise ValueError(f"topic {scope.topic!r} has no partition {scope.partition}")
    electable: list[PlanRow] = []
    blocked: list[PlanRow] = []
    already = 0
    for tp in sorted(partitions, key=lambda t: (t.topic, t.partition)):
        view = partitions[tp]
        preferred = view.replicas[0] if view.replicas else None
        if scope.kind == "partition" and (tp.topic != scope.topic or tp.partition != scope.partition):
            continue
        if scope.kind == "topic" and tp.topic != scope.topic:
            continue
        if scope.kind == "broker" and preferred != scope.broker:
            continue
        if preferred is not None and view.leader == preferred:
            already += 1
            continue
        new_leader = preferred_replica_partition_leader_election(view.replicas, view.isr, live_set)
        reason = ""
        if tp.topic in doomed:
            reason = f"topic {tp.topic} is queued for deletion"
        elif preferred is None:
            reason = "the partition has no replicas"
        elif new_leader is None:
            if preferred not in live_set:
                reason = f"preferred replica {preferred} is down"
            else:
                reason = f"preferred replica {preferred} is not in the ISR {list(view.isr)}"
        row = PlanRow(tp.topic, tp.partition, view.replicas, view.isr, view.leader, preferred, new_leader, reason)
        (blocked if reason else electable).append(row)
    return Plan(electable, blocked, already, tuple(sorted(live_set)))


def read_partitions(store: Any, topics: Sequence[str] | None = None) -> dict[TopicPartition, PartitionView]:
    """Every partition of ``topics`` (all topics when None) with its replicas, leader and ISR."""
    names = sorted(store.get_all_topics()) if topics is None else list(topics)
    assignments = store.get_replica_assignments(names)
    replicas = {
        TopicPartition(t, p): tuple(a.replicas) for t, ta in assignments.items() for p, a in ta.partitions.items()
    }
    states = store.get_partition_states(list(replicas))
    out: dict[TopicPartition, PartitionView] = {}
    for tp, reps in replicas.items():
        read = states.get(tp)
        if read is not None and read.state is not None:
            lai = read.state.leader_and_isr
            out[tp] = PartitionView(reps, lai.leader, tuple(lai.isr))
        else:
            out[tp] = PartitionView(reps)
    return out


def read_plan(store: Any, scope: Scope) -> Plan:
    topics = [scope.topic] if scope.kind in ("partition", "topic") else None
    return plan(scope, read_partitions(store, topics), store.get_broker_ids(), store.get_topic_deletions())
