"""What a partition row adds to the mirror's counters, transitions and state sets, memoized by signature.

Why: a broker failure changes tens of thousands of rows in the same few ways (OnlinePartition to
OfflinePartition, the dead broker's replica to OfflineReplica). Recounting each row in full, two
lists of about twenty counter names built with f-strings, all added and all subtracted, was the
mirror thread's largest cost in a storm (``_recount``: 14 of ~40 µs a row, ``bench_live.py
--profile-storm``). Everything a row contributes depends only on its *signature* (its states, its
replicas, its leader and a few flags), so the difference between two signatures is worked out once
(``delta``, ``moves``, cached) and a row change costs a signature, a cache hit, and updates of only
the counters that move.

Exact by construction: the overview and the diagrams read counters, never the 100,000 partition
rows, and every counter is a sum over partitions of a per-partition contribution (a list of counter
names, a name listed twice counting twice); a ``Delta`` is the difference of two full contributions
(``contribution``), so an update keeps every counter exact under any sequence of changes.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from dashboard.clusters import layout
from dashboard.clusters.layout import (
    NON_PREFERRED,
    OFFLINE,
    PARTITIONS,
    REASSIGNING,
    REPLICAS,
    UNDER_MIN_ISR,
    UNDER_REPLICATED,
    PartitionRow,
)
from workers.mirror.changes import CLUSTER_SCOPE, broker_scope
from workers.mirror.model import NEW_R, NON_EXISTENT_P, NON_EXISTENT_R, Membership

# (partition state, replicas, replica states in replica order (None: none known), leader, offline,
# under-replicated, under min ISR, reassigning): everything a row's contribution depends on.
Signature = tuple[str, tuple[int, ...], tuple[str | None, ...], int, bool, bool, bool, bool]
# A flat transition: (scope, machine, from, to).
Edge = tuple[str, str, str, str]

# Distinct signature pairs seen in a cluster are few (states x replica lists x flags); the bound
# keeps a huge, varied cluster from growing the caches without limit (a miss costs what a full
# recount used to).
CACHE_SIZE = 1 << 16


def signature(row: PartitionRow, live: AbstractSet[int], min_isr: int) -> Signature:
    """``row``'s signature with the brokers ``live`` and its topic's ``min_isr``."""
    replicas = row.replicas
    leader = row.leader
    isr_size = len(row.isr)
    return (
        row.state,
        replicas,
        tuple(map(row.replica_states.get, replicas)),
        leader,
        leader < 0 or leader not in live,
        isr_size < len(replicas),
        isr_size < min_isr,
        bool(row.adding or row.removing or row.admin_reassign),
    )


def membership(row: PartitionRow) -> Membership:
    """``row``'s state-set membership (the first three fields of its signature)."""
    return row.state, row.replicas, tuple(map(row.replica_states.get, row.replicas))


def contribution(sig: Signature) -> tuple[list[str], list[str]]:
    """Counter names a row with signature ``sig`` adds: to its topic's counters and the cluster's,
    and to the cluster's per-broker state counters only. A name listed twice counts twice."""
    state, replicas, rstates, leader, offline, urp, umi, reassigning = sig
    keys = [PARTITIONS, f"p:{state}"]
    keys.extend([REPLICAS] * len(replicas))
    if offline:
        keys.append(OFFLINE)
    if urp:
        keys.append(UNDER_REPLICATED)
    if umi:
        keys.append(UNDER_MIN_ISR)
    if not replicas or leader != replicas[0]:
        keys.append(NON_PREFERRED)
    if reassigning:
        keys.append(REASSIGNING)
    broker_keys: list[str] = []
    for broker, rstate in zip(replicas, rstates, strict=True):
        replica_state = rstate or NEW_R
        keys.append(f"r:{replica_state}")
        keys.append(f"b:{broker}:replicas")
        broker_keys.append(f"b:{broker}:p:{state}")
        broker_keys.append(f"b:{broker}:r:{replica_state}")
    if leader >= 0:
        keys.append(f"b:{leader}:leaders")
    return keys, broker_keys


@dataclass(frozen=True, slots=True, eq=False)
class Delta:
    """How the counters and transitions move when a row goes from one signature to another.

    ``plus``/``minus`` (cluster) and ``topic_plus``/``topic_minus`` list counter names to add to and
    subtract from (repeated for more than one); ``keys``/``topic_keys`` name the counters whose value
    moved. ``edges`` are the transitions of the cluster and broker scopes and ``topic_edges`` those
    of the row's topic scope as ``(machine, from, to)``; both ``None`` when the row's replicas
    changed (the caller diffs the rows themselves then: states of replicas outside the assignment
    are not in a signature).
    """

    plus: tuple[str, ...]
    minus: tuple[str, ...]
    topic_plus: tuple[str, ...]
    topic_minus: tuple[str, ...]
    keys: frozenset[str]
    topic_keys: frozenset[str]
    edges: tuple[Edge, ...] | None
    topic_edges: tuple[tuple[str, str, str], ...] | None


def _expand(counts: Counter[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    plus = tuple(k for k, n in counts.items() if n > 0 for _ in range(n))
    minus = tuple(k for k, n in counts.items() if n < 0 for _ in range(-n))
    return plus, minus


@functools.lru_cache(maxsize=CACHE_SIZE)
def delta(old: Signature | None, new: Signature | None) -> Delta:
    """The move from ``old`` to ``new`` (``None``: no row, as when a partition is created or removed)."""
    old_topic, old_broker = contribution(old) if old is not None else ([], [])
    new_topic, new_broker = contribution(new) if new is not None else ([], [])
    topic = Counter(new_topic)
    topic.subtract(old_topic)
    cluster = Counter(new_broker)
    cluster.subtract(old_broker)
    cluster.update(topic)
    plus, minus = _expand(cluster)
    topic_plus, topic_minus = _expand(topic)
    edges: tuple[Edge, ...] | None = None
    topic_edges: tuple[tuple[str, str, str], ...] | None = None
    if old is None or new is None or old[1] == new[1]:
        edges, topic_edges = _edges(old, new)
    return Delta(
        plus,
        minus,
        topic_plus,
        topic_minus,
        frozenset(k for k, n in cluster.items() if n),
        frozenset(k for k, n in topic.items() if n),
        edges,
        topic_edges,
    )


def _edges(old: Signature | None, new: Signature | None) -> tuple[tuple[Edge, ...], tuple[tuple[str, str, str], ...]]:
    """The transitions of one row (same replicas on both sides, or a row created or removed)."""
    ref = new if new is not None else old
    if ref is None:
        return (), ()
    replicas = ref[1]
    old_state = old[0] if old is not None else NON_EXISTENT_P
    new_state = new[0] if new is not None else NON_EXISTENT_P
    old_rs = old[2] if old is not None else (None,) * len(replicas)
    new_rs = new[2] if new is not None else (None,) * len(replicas)
    edges: list[Edge] = []
    topic_edges: list[tuple[str, str, str]] = []
    if old_state != new_state:
        edges.append((CLUSTER_SCOPE, "partition", old_state, new_state))
        topic_edges.append(("partition", old_state, new_state))
        edges.extend((broker_scope(b), "partition", old_state, new_state) for b in dict.fromkeys(replicas))
    for b, was, now in zip(replicas, old_rs, new_rs, strict=True):
        src = was or NON_EXISTENT_R
        dst = now or NON_EXISTENT_R
        if src != dst:
            edges.append((CLUSTER_SCOPE, "replica", src, dst))
            topic_edges.append(("replica", src, dst))
            edges.append((broker_scope(b), "replica", src, dst))
    return tuple(edges), tuple(topic_edges)


# One state-set move: (add, not remove; the set's full key; the broker whose replica member
# ``<partition>@<broker>`` moves, or None for the partition's own member).
Move = tuple[bool, str, int | None]


def membership_keys(cluster: str, mb: Membership) -> set[tuple[str, int | None]]:
    """Every (state-set key, member broker) of ``cluster`` that a row with membership ``mb`` is in."""
    pstate, replicas, rstates = mb
    keys: set[tuple[str, int | None]] = {(layout.partition_state_set(cluster, pstate), None)}
    for b, rs in zip(replicas, rstates, strict=True):
        replica_state = rs or NEW_R
        keys.add((layout.partition_state_set(cluster, pstate, b), None))
        keys.add((layout.replica_state_set(cluster, replica_state), b))
        keys.add((layout.replica_state_set(cluster, replica_state, b), None))
        keys.add((layout.hosted_set(cluster, b), None))
    return keys


@functools.lru_cache(maxsize=CACHE_SIZE)
def moves(cluster: str, old: Membership | None, new: Membership | None) -> tuple[Move, ...]:
    """The state-set moves of a row going from ``old`` to ``new`` membership (``None``: no row)."""
    old_keys = membership_keys(cluster, old) if old is not None else set()
    new_keys = membership_keys(cluster, new) if new is not None else set()
    removed = sorted(old_keys - new_keys, key=_order)
    added = sorted(new_keys - old_keys, key=_order)
    return tuple((False, key, b) for key, b in removed) + tuple((True, key, b) for key, b in added)


def _order(item: tuple[str, int | None]) -> tuple[str, int]:
    return item[0], -1 if item[1] is None else item[1]
