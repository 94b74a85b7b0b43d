"""Partition reassignment planning and validation: pure functions, no I/O (issue #7, item 3).

Why here and pure: the dashboard (generate, validate), the worker (execute) and the tests all need
the same answers, and the rules are easier to trust when they are unit-tested without ZooKeeper.

``propose`` balances the chosen topics' replicas over a target broker set:

* every partition keeps its replication factor;
* rack spread first: no rack holds more than ``ceil(rf / racks)`` replicas of one partition (when
  the brokers have racks; brokers without a rack count as one rack each);
* replica balance: each broker ends with ``floor`` or ``ceil`` of ``replicas / brokers`` (exact when
  the racks are of equal size; with unequal racks rack spread wins, as in Kafka's rack-aware mode);
* preferred-leader balance: each broker is the first replica of ``floor`` or ``ceil`` of
  ``partitions / brokers`` partitions (within what the replica sets allow);
* as few moves as possible: a replica already on an allowed broker stays unless balance needs its
  place, and an already balanced assignment yields no change at all.

``validate`` checks a request in Kafka's ``/admin/reassign_partitions`` JSON against the cluster
and returns every problem as a sentence for the operator (an empty list means it may be written).
Partitions already being reassigned are refused unless ``replace`` is set: KIP-455 would silently
replace the running move's target, which an operator should choose knowingly.
"""

from __future__ import annotations

import json
import math
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from controller_core.model import ReplicaAssignment, TopicPartition
from controller_core.zk.paths import MAX_ZNODE_BYTES

# A pasted document larger than this is refused before parsing.
MAX_INPUT_BYTES: Final = 4 * MAX_ZNODE_BYTES
TOP_LEVEL_KEYS: Final = frozenset({"version", "partitions"})
ENTRY_KEYS: Final = frozenset({"topic", "partition", "replicas", "log_dirs"})
ANY_LOG_DIR: Final = "any"
MAX_LISTED_ERRORS: Final = 200


# ================================================================================================
# generate
# ================================================================================================
@dataclass(frozen=True, slots=True)
class Move:
    """One partition of a proposal: current replicas -> proposed replicas."""

    topic: str
    partition: int
    current: tuple[int, ...]
    proposed: tuple[int, ...]

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.proposed if r not in self.current)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.current if r not in self.proposed)

    @property
    def changed(self) -> bool:
        return self.current != self.proposed

    def as_dict(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "current": list(self.current),
            "proposed": list(self.proposed),
            "adding": list(self.adding),
            "removing": list(self.removing),
        }


@dataclass(frozen=True, slots=True)
class Proposal:
    moves: list[Move]  # every partition of the chosen topics, sorted
    brokers: tuple[int, ...]

    @property
    def changed(self) -> list[Move]:
        return [m for m in self.moves if m.changed]

    @property
    def moved_replicas(self) -> int:
        return sum(len(m.adding) for m in self.moves)

    def replica_counts(self) -> dict[int, int]:
        counts = dict.fromkeys(self.brokers, 0)
        for m in self.moves:
            for r in m.proposed:
                counts[r] = counts.get(r, 0) + 1
        return counts

    def leader_counts(self) -> dict[int, int]:
        counts = dict.fromkeys(self.brokers, 0)
        for m in self.moves:
            if m.proposed:
                counts[m.proposed[0]] = counts.get(m.proposed[0], 0) + 1
        return counts

    def request(self) -> dict[str, Any]:
        """The changed partitions in Kafka's reassignment JSON."""
        return to_kafka_json({TopicPartition(m.topic, m.partition): m.proposed for m in self.changed})

    def as_dict(self) -> dict[str, Any]:
        return {
            "brokers": list(self.brokers),
            "moved_replicas": self.moved_replicas,
            "changed_partitions": len(self.changed),
            "partitions": [m.as_dict() for m in self.moves],
            "replica_counts": {str(b): n for b, n in self.replica_counts().items()},
            "leader_counts": {str(b): n for b, n in self.leader_counts().items()},
            "request": self.request(),
        }


def _rack_of(broker: int, racks: Mapping[int, str | None]) -> str:
    rack = racks.get(broker)
    return rack if rack is not None else f"\x00broker-{broker}"


def propose(current: Mapping[TopicPartition, Sequence[int]], brokers: Mapping[int, str | None]) -> Proposal:
    """Reassign ``current`` (partition -> replicas) onto ``brokers`` (id -> rack or None).

    Raises ``ValueError`` when no broker is given or a partition's replication factor is larger
    than the number of target brokers.
    """
    targets = sorted(set(brokers))
    if not targets:
        raise ValueError("choose at least one target broker")
    tps = sorted(current, key=lambda t: (t.topic, t.partition))
    for tp in tps:
        rf = len(set(current[tp]))
        if rf == 0:
            raise ValueError(f"{tp.topic}-{tp.partition} has no replicas")
        if rf > len(targets):
            raise ValueError(
                f"{tp.topic}-{tp.partition} has {rf} replicas but only {len(targets)} target brokers were chosen"
            )
    target_set = set(targets)
    rack = {b: _rack_of(b, brokers) for b in targets}
    n_racks = len(set(rack.values()))

    def rack_cap(rf: int) -> int:
        return math.ceil(rf / n_racks)

    # 1. keep what may stay: replicas on target brokers, within each partition's rack cap.
    kept: dict[TopicPartition, list[int]] = {}
    rf_of: dict[TopicPartition, int] = {}
    for tp in tps:
        replicas = list(dict.fromkeys(current[tp]))
        rf_of[tp] = len(replicas)
        keep: list[int] = []
        per_rack: Counter[str] = Counter()
        for r in replicas:
            if r in target_set and per_rack[rack[r]] < rack_cap(len(replicas)):
                keep.append(r)
                per_rack[rack[r]] += 1
        kept[tp] = keep

    # 2. quotas: floor or ceil each; the ceil slots go to the brokers that already hold the most.
    total = sum(rf_of.values())
    low, extra = divmod(total, len(targets))
    load: Counter[int] = Counter(r for reps in kept.values() for r in reps)
    by_load = sorted(targets, key=lambda b: (-load[b], b))
    quota = {b: low + (1 if i < extra else 0) for i, b in enumerate(by_load)}

    # 3. shed replicas from brokers over quota, where they lead least (followers first).
    for b in sorted(targets):
        while load[b] > quota[b]:
            holders = [tp for tp in tps if b in kept[tp]]
            holders.sort(key=lambda tp: (kept[tp][0] == b, -len(kept[tp]), tp.topic, tp.partition))
            victim = holders[0]
            kept[victim].remove(b)
            load[b] -= 1

    # 4. fill each partition up to its replication factor, most missing first.
    def candidates(tp: TopicPartition, enforce_quota: bool) -> list[int]:
        used = set(kept[tp])
        per_rack = Counter(rack[r] for r in kept[tp])
        cap = rack_cap(rf_of[tp])
        out = [
            b
            for b in targets
            if b not in used and per_rack[rack[b]] < cap and (not enforce_quota or load[b] < quota[b])
        ]
        out.sort(key=lambda b: (load[b] - quota[b], per_rack[rack[b]], load[b], b))
        return out

    for tp in sorted(tps, key=lambda t: (len(kept[t]) - rf_of[t], t.topic, t.partition)):
        while len(kept[tp]) < rf_of[tp]:
            options = candidates(tp, True) or candidates(tp, False)
            if not options:  # rack cap impossible to meet: take any broker not yet used
                options = sorted((b for b in targets if b not in kept[tp]), key=lambda b: (load[b], b))
            chosen = options[0]
            kept[tp].append(chosen)
            load[chosen] += 1

    # 5. repair: move replicas from brokers over ceil to brokers under floor where racks allow.
    _repair_balance(tps, kept, load, targets, rack, rack_cap, rf_of)

    # 6. preferred leaders.
    proposed = _order_leaders(tps, kept, targets, current)
    moves = [Move(tp.topic, tp.partition, tuple(current[tp]), proposed[tp]) for tp in tps]
    return Proposal(moves, tuple(targets))


def _repair_balance(
    tps: list[TopicPartition],
    kept: dict[TopicPartition, list[int]],
    load: Counter[int],
    targets: list[int],
    rack: Mapping[int, str],
    rack_cap: Callable[[int], int],
    rf_of: Mapping[TopicPartition, int],
) -> None:
    """Bring every broker within ``floor..ceil`` of the mean by shortest chains of replica moves
    (a chain hands one replica on through brokers already at their share, so racks can be kept)."""
    total = sum(rf_of.values())
    floor_, ceil_ = total // len(targets), math.ceil(total / len(targets))
    for _ in range(total + 1):
        over = [b for b in targets if load[b] > ceil_]
        under = [b for b in targets if load[b] < floor_]
        if not over and not under:
            return
        if over:
            sources, sinks = over, {b for b in targets if load[b] < ceil_}
        else:
            sources, sinks = [b for b in targets if load[b] > floor_], set(under)
        if not any(_shift_along_path(s, sinks, tps, kept, load, rack, rack_cap, rf_of) for s in sources):
            return


def _shift_along_path(
    source: int,
    sinks: set[int],
    tps: list[TopicPartition],
    kept: dict[TopicPartition, list[int]],
    load: Counter[int],
    rack: Mapping[int, str],
    rack_cap: Callable[[int], int],
    rf_of: Mapping[TopicPartition, int],
) -> bool:
    def can_replace(tp: TopicPartition, old: int, new: int) -> bool:
        reps = kept[tp]
        if old not in reps or new in reps:
            return False
        per_rack = Counter(rack[r] for r in reps if r != old)
        return per_rack[rack[new]] < rack_cap(rf_of[tp])

    def hand_overs(b: int, visited: set[int]) -> Iterator[tuple[TopicPartition, int]]:
        for tp in tps:
            if b in kept[tp]:
                for r in sorted(set(rack) - visited, key=lambda x: (load[x], x)):
                    if can_replace(tp, b, r):
                        yield tp, r

    steps = _hand_over_path(source, hand_overs, sinks.__contains__)
    if steps is None:
        return False
    done: list[tuple[TopicPartition, int, int]] = []
    for step_tp, old, new in steps:
        if not can_replace(step_tp, old, new):  # a chain that crosses itself: undo
            for undo_tp, undo_old, undo_new in reversed(done):
                reps = kept[undo_tp]
                reps[reps.index(undo_new)] = undo_old
            return False
        reps = kept[step_tp]
        reps[reps.index(old)] = new
        done.append((step_tp, old, new))
    load[source] -= 1
    load[steps[-1][2]] += 1
    return True


def _hand_over_path(
    source: int,
    hand_overs: Callable[[int, set[int]], Iterable[tuple[TopicPartition, int]]],
    is_sink: Callable[[int], bool],
) -> list[tuple[TopicPartition, int, int]] | None:
    """Breadth-first search for a chain of hand-overs from ``source`` to a broker ``is_sink`` accepts:
    ``hand_overs(b, visited)`` names each ``(tp, r)`` where broker ``r`` may take ``b``'s place in
    ``tp``. Returns the chain as ``(tp, from, to)`` steps from ``source`` on, or None when there is
    none. Both balancing passes (replicas per broker, leaders per broker) repair along such chains."""
    parent: dict[int, tuple[TopicPartition, int]] = {}
    visited = {source}
    queue = deque([source])
    while queue:
        b = queue.popleft()
        for tp, r in hand_overs(b, visited):
            if r in visited:
                continue
            parent[r] = (tp, b)
            if is_sink(r):
                steps = []
                current = r
                while current != source:
                    step_tp, previous = parent[current]
                    steps.append((step_tp, previous, current))
                    current = previous
                return steps[::-1]
            visited.add(r)
            queue.append(r)
    return None


def _order_leaders(
    tps: list[TopicPartition],
    kept: Mapping[TopicPartition, list[int]],
    targets: list[int],
    current: Mapping[TopicPartition, Sequence[int]],
) -> dict[TopicPartition, tuple[int, ...]]:
    """Pick each partition's first replica so that leadership is balanced, keeping current leaders
    (and the current order of kept replicas) where balance allows.

    Current leaders that stay replicas keep leading; every other partition takes its least-loaded
    replica; then leadership moves along *cost-reducing paths* (a chain of hand-overs from a broker
    leading ``L`` partitions to one leading ``L - 2`` or fewer) until none is left. A leader
    assignment with no such path is optimal: no other one has a smaller maximum or a smaller spread
    (Harvey, Ladner, Lovász, Tamir, "Semi-matchings for bipartite graphs and load balancing", 2003).
    And since current leaders are kept first, planning the result again finds no path and moves
    nothing: the plan is a fixed point."""
    leaders: Counter[int] = Counter({b: 0 for b in targets})
    led: dict[int, set[TopicPartition]] = {b: set() for b in targets}
    leader_of: dict[TopicPartition, int] = {}

    def lead(tp: TopicPartition, b: int) -> None:
        leader_of[tp] = b
        led[b].add(tp)
        leaders[b] += 1

    rest = []
    for tp in tps:
        if current[tp] and current[tp][0] in kept[tp]:
            lead(tp, current[tp][0])
        else:
            rest.append(tp)
    # partitions with the fewest choices first, so that they get a broker with room
    rest.sort(key=lambda tp: (len(kept[tp]), tp.topic, tp.partition))
    for tp in rest:
        lead(tp, min(kept[tp], key=lambda b: (leaders[b], b)))
    while any(_reduce_cost(b, kept, led, leader_of, leaders) for b in sorted(targets, key=lambda b: (-leaders[b], b))):
        pass
    out: dict[TopicPartition, tuple[int, ...]] = {}
    for tp in tps:
        leader = leader_of[tp]
        # replicas that stay keep their current order; new ones follow in the order they were chosen
        staying = [r for r in current[tp] if r in kept[tp] and r != leader]
        added = [r for r in kept[tp] if r != leader and r not in current[tp]]
        out[tp] = (leader, *dict.fromkeys(staying), *added)
    return out


def _reduce_cost(
    over: int,
    kept: Mapping[TopicPartition, list[int]],
    led: dict[int, set[TopicPartition]],
    leader_of: dict[TopicPartition, int],
    leaders: Counter[int],
) -> bool:
    """Breadth-first search for a chain of leadership hand-overs from ``over`` to a broker leading at
    least two fewer partitions; applies it and returns True, or False when there is none."""
    limit = leaders[over] - 2

    def hand_overs(b: int, visited: set[int]) -> Iterator[tuple[TopicPartition, int]]:
        for tp in sorted(led[b], key=lambda t: (t.topic, t.partition)):
            for r in kept[tp]:
                yield tp, r

    steps = _hand_over_path(over, hand_overs, lambda r: leaders[r] <= limit)
    if steps is None:
        return False
    for step_tp, old, new in steps:
        leader_of[step_tp] = new
        led[old].discard(step_tp)
        led[new].add(step_tp)
    leaders[over] -= 1
    leaders[steps[-1][2]] += 1
    return True


# ================================================================================================
# data to copy
# ================================================================================================
@dataclass(frozen=True, slots=True)
class PartitionSize:
    """A partition's log size as a leader reports it: messages, and bytes when the size is known."""

    messages: int
    bytes: int | None = None


def data_to_copy(moves: Sequence[Move], sizes: Mapping[TopicPartition, PartitionSize]) -> dict[str, Any]:
    """Messages and bytes each new replica must copy. ``known`` is False when a moved partition's
    size is unknown (no agent answered); the totals then cover only the partitions listed in ``known_partitions``."""
    messages = 0
    size_bytes = 0
    bytes_known = True
    unknown: list[str] = []
    for m in moves:
        if not m.adding:
            continue
        size = sizes.get(TopicPartition(m.topic, m.partition))
        if size is None:
            unknown.append(f"{m.topic}-{m.partition}")
            continue
        messages += size.messages * len(m.adding)
        if size.bytes is None:
            bytes_known = False
        else:
            size_bytes += size.bytes * len(m.adding)
    return {
        "known": not unknown,
        "messages": messages if not unknown else None,
        "bytes": size_bytes if not unknown and bytes_known else None,
        "partial_messages": messages,
        "unknown_partitions": unknown,
    }


# ================================================================================================
# validate
# ================================================================================================
@dataclass(frozen=True, slots=True)
class ClusterView:
    """What validation needs to know of the cluster, read from ZooKeeper by the caller."""

    assignments: Mapping[TopicPartition, ReplicaAssignment]
    brokers: frozenset[int]
    topics_being_deleted: frozenset[str] = frozenset()
    pending_request: Mapping[TopicPartition, Sequence[int]] | None = None

    @property
    def topics(self) -> set[str]:
        return {tp.topic for tp in self.assignments}


@dataclass(slots=True)
class Validation:
    errors: list[str] = field(default_factory=list)
    partitions: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    replacing: list[TopicPartition] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    def add(self, message: str) -> None:
        if len(self.errors) < MAX_LISTED_ERRORS:
            self.errors.append(message)
        elif len(self.errors) == MAX_LISTED_ERRORS:
            self.errors.append("... more problems not listed")

    def as_dict(self) -> dict[str, Any]:
        return {
            "valid": self.ok,
            "errors": list(self.errors),
            "partitions": len(self.partitions),
            "replacing": [f"{tp.topic}-{tp.partition}" for tp in self.replacing],
        }


def to_kafka_json(reassignment: Mapping[TopicPartition, Sequence[int]]) -> dict[str, Any]:
    return {
        "version": 1,
        "partitions": [
            {"topic": tp.topic, "partition": tp.partition, "replicas": list(replicas)}
            for tp, replicas in sorted(reassignment.items(), key=lambda kv: (kv[0].topic, kv[0].partition))
        ],
    }


def encoded_size(reassignment: Mapping[TopicPartition, Sequence[int]]) -> int:
    """Bytes of the znode Kafka's encoding would write (compact JSON, as codecs.encode_reassignment)."""
    return len(json.dumps(to_kafka_json(reassignment), separators=(",", ":")).encode())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def parse_document(raw: str | bytes | Mapping[str, Any]) -> tuple[Any, str | None]:
    """Parse pasted text (or take an already parsed object); returns ``(document, error)``."""
    if isinstance(raw, Mapping):
        return raw, None
    size = len(raw.encode() if isinstance(raw, str) else raw)
    if size > MAX_INPUT_BYTES:
        return None, f"the reassignment is {size} bytes; at most {MAX_INPUT_BYTES} bytes are accepted"
    if not raw.strip():
        return None, "the reassignment is empty: paste Kafka's reassignment JSON or generate a proposal"
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return None, f"the reassignment is not valid JSON: {exc}"


def validate(
    document: Any, cluster: ClusterView, *, replace: bool = False, allow_rf_change: bool = False
) -> Validation:
    """Every problem with ``document`` (Kafka's reassignment JSON, parsed) against ``cluster``.
    A partition's replica count may differ from its replication factor only with ``allow_rf_change``
    (a replication-factor change the operator asked for explicitly)."""
    v = Validation()
    if not isinstance(document, Mapping):
        v.add('the reassignment must be a JSON object like {"version":1,"partitions":[...]}')
        return v
    unknown = sorted(str(k) for k in document if k not in TOP_LEVEL_KEYS)
    if unknown:
        v.add(f"unknown key(s) {', '.join(unknown)}: only version and partitions are allowed")
    version = document.get("version")
    if not _is_int(version) or version != 1:
        v.add(f"version must be 1 (got {json.dumps(version)})")
    entries = document.get("partitions")
    if not isinstance(entries, list):
        v.add("partitions must be a list of {topic, partition, replicas} objects")
        return v
    if not entries:
        v.add("partitions is empty: nothing to reassign")
        return v
    seen: set[TopicPartition] = set()
    topics = cluster.topics
    for i, entry in enumerate(entries):
        _validate_entry(v, i, entry, cluster, topics, seen, replace, allow_rf_change)
    if v.partitions:
        size = encoded_size(v.partitions)
        if size > MAX_ZNODE_BYTES:
            v.add(
                f"the request would be {size} bytes, over ZooKeeper's znode limit of about {MAX_ZNODE_BYTES} "
                "bytes: split it into several reassignments"
            )
    if cluster.pending_request is not None:
        pending = sorted(f"{tp.topic}-{tp.partition}" for tp in cluster.pending_request)
        shown = ", ".join(pending[:10]) + (" ..." if len(pending) > 10 else "")
        v.add(
            f"a reassignment is already pending in /admin/reassign_partitions ({len(pending)} partitions: {shown}); "
            "wait for it to finish or cancel it first"
        )
    if not v.ok:
        v.partitions.clear()
        v.replacing.clear()
    return v


def _validate_entry(
    v: Validation,
    i: int,
    entry: Any,
    cluster: ClusterView,
    topics: set[str],
    seen: set[TopicPartition],
    replace: bool,
    allow_rf_change: bool = False,
) -> None:
    where = f"partitions[{i}]"
    if not isinstance(entry, Mapping):
        v.add(f"{where} must be an object with topic, partition and replicas")
        return
    extra = sorted(str(k) for k in entry if k not in ENTRY_KEYS)
    if extra:
        v.add(f"{where}: unknown key(s) {', '.join(extra)} (allowed: topic, partition, replicas, log_dirs)")
    topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
    if not isinstance(topic, str) or not topic:
        v.add(f"{where}: topic must be a non-empty string")
        return
    if not isinstance(partition, int) or isinstance(partition, bool) or partition < 0:
        v.add(f"{where} ({topic}): partition must be a non-negative integer (got {json.dumps(partition)})")
        return
    tp = TopicPartition(topic, partition)
    name = f"{topic}-{partition}"
    if tp in seen:
        v.add(f"{name} is listed more than once")
        return
    seen.add(tp)
    if not isinstance(replicas, list):
        v.add(f"{name}: replicas must be a list of broker ids")
        return
    if not replicas:
        v.add(f"{name}: the replica list is empty")
        return
    bad = [r for r in replicas if not _is_int(r) or r < 0]
    if bad:
        v.add(f"{name}: broker ids must be non-negative integers (got {', '.join(json.dumps(r) for r in bad)})")
        return
    duplicates = sorted(r for r, n in Counter(replicas).items() if n > 1)
    if duplicates:
        v.add(f"{name}: duplicate replica(s) {', '.join(map(str, duplicates))}")
        return
    log_dirs = entry.get("log_dirs")
    if log_dirs is not None:
        if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
            v.add(f"{name}: log_dirs must be a list with one entry per replica")
            return
        if any(d != ANY_LOG_DIR for d in log_dirs):
            v.add(
                f'{name}: log_dirs other than "any" need AlterReplicaLogDirs, which the ZooKeeper reassignment '
                'path does not carry; use "any"'
            )
            return
    if topic not in topics:
        v.add(f"{name}: unknown topic {topic!r}")
        return
    current = cluster.assignments.get(tp)
    if current is None:
        count = sum(1 for t in cluster.assignments if t.topic == topic)
        v.add(f"{name}: unknown partition (topic {topic!r} has partitions 0..{count - 1})")
        return
    if topic in cluster.topics_being_deleted:
        v.add(f"{name}: topic {topic!r} is queued for deletion")
        return
    unknown = sorted(set(replicas) - cluster.brokers)
    if unknown:
        known = ", ".join(map(str, sorted(cluster.brokers))) or "none"
        v.add(f"{name}: unknown broker(s) {', '.join(map(str, unknown))} (registered brokers: {known})")
        return
    rf = len(current.target_replicas if current.is_being_reassigned else current.replicas)
    if len(replicas) != rf and not allow_rf_change:
        v.add(
            f"{name}: the replication factor would change from {rf} to {len(replicas)}; keep {rf} replicas "
            "(or ask for a replication-factor change)"
        )
        return
    if current.is_being_reassigned:
        if not replace:
            v.add(
                f"{name} is already being reassigned to {list(current.target_replicas)} "
                f'(from {list(current.origin_replicas)}); tick "replace" to retarget it'
            )
            return
        v.replacing.append(tp)
    v.partitions[tp] = tuple(replicas)
