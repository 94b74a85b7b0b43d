"""The mirror's in-memory model of one cluster, and the changes waiting for the next flush.

Mutated only on the mirror's thread (ZooKeeper watches and the stream reader enqueue; the mirror
loop applies). Every mutation keeps the aggregate counters exact by subtracting the old row's
contribution and adding the new one's (``contributions``), marks what changed, and counts state
transitions per edge; ``take_changes()`` hands all that over as one coalesced ``ChangeSet``.

Two invariants from the reliability notes hold here, not in the writer:

* **Never regress** (S6): a ZooKeeper read older than what we hold, by ``(leader_epoch, mzxid)``,
  is ignored; so is a stream record whose leader epoch is older than the row's.
* **Derived means derived**: a partition's state comes from the controller's records when we have
  them (managed mode) and is otherwise derived from ZooKeeper and flagged ``derived``.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any

from controller_core.model import ReplicaAssignment, TopicPartition
from dashboard.clusters import layout
from dashboard.clusters.layout import LIVE_BROKERS, TOPICS, PartitionRow
from workers.mirror.aggregates import rederive
from workers.mirror.changes import CLUSTER_SCOPE, ChangeSet, topic_scope
from workers.mirror.contributions import Delta, Signature, delta, membership, membership_keys, moves, signature
from workers.mirror.model import (
    MANAGED,
    NON_EXISTENT_P,
    NON_EXISTENT_R,
    OBSERVED,
    Membership,
    StateRead,
    TopicInfo,
)
from workers.mirror.updates import StateUpdates

__all__ = ["MANAGED", "OBSERVED", "MirrorState", "StateRead", "TopicInfo"]

logger = logging.getLogger(__name__)

try:
    # Counter.update's C core, without its per-call type checks (it runs six times per changed row).
    from collections import _count_elements  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - other Pythons

    def _count_elements(mapping: Counter[str], iterable: Iterable[str]) -> None:
        for item in iterable:
            mapping[item] += 1


class MirrorState(StateUpdates):
    """One cluster as the mirror sees it.

    Example::

        state = MirrorState("demo", mode=OBSERVED)
        state.set_brokers({1: {...}, 2: {...}})
        state.set_topic("orders", None, {0: ReplicaAssignment.of([1, 2])})
        state.apply_state_reads({TopicPartition("orders", 0): StateRead(1, 0, (1, 2), 1, 0, 10)})
        changes = state.take_changes()   # rows, counters, zset moves, transitions
    """

    def __init__(self, cluster: str, mode: str = OBSERVED, default_min_isr: int = 1) -> None:
        if mode not in (MANAGED, OBSERVED):
            raise ValueError(f"mode must be {MANAGED!r} or {OBSERVED!r}, not {mode!r}")
        self.cluster = cluster
        self.mode = mode
        self.default_min_isr = default_min_isr
        self.partitions: dict[str, PartitionRow] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.brokers: dict[int, dict[str, Any]] = {}
        self.live: frozenset[int] = frozenset()
        self.hosting: dict[int, set[str]] = {}
        # Counters are kept as added minus removed contributions: both sides only ever grow through
        # Counter.update (a C loop), the hot path's cheapest way to keep 100,000 rows' sums exact.
        self._pos: Counter[str] = Counter()
        self._neg: Counter[str] = Counter()
        self._tpos: dict[str, Counter[str]] = {}
        self._tneg: dict[str, Counter[str]] = {}
        self._gauges: dict[str, int] = {}
        self.controller_id: int | None = None
        self.controller_epoch: int | None = None
        self.deleting: frozenset[str] = frozenset()
        self.admin: dict[str, Any] = {}
        self._admin_reassign: frozenset[str] = frozenset()
        # Controller states that arrived before the partition's assignment did.
        self._early_states: dict[str, tuple[str | None, dict[int, str]]] = {}
        self._recording = True
        self._reset_pending()

    # -- pending changes ------------------------------------------------------------------------
    def _reset_pending(self) -> None:
        self._changes = ChangeSet()
        self._edges: Counter[tuple[str, str, str, str]] = Counter()
        # Topic-scope transitions, per (topic, the Delta that holds them): expanded when taken.
        self._topic_edges: Counter[tuple[str, Delta]] = Counter()
        self._dirty_rows: set[str] = set()
        self._removed_rows: dict[str, Membership] = {}
        self._dirty_counts: set[str] = set()
        self._dirty_topic_counts: dict[str, set[str]] = {}
        self._dirty_topics: set[str] = set()
        self._removed_topics: set[str] = set()
        self._dirty_brokers: set[int] = set()
        self._removed_brokers: set[int] = set()
        self._flushed: dict[str, Membership] = getattr(self, "_flushed", {})

    @property
    def has_changes(self) -> bool:
        return bool(
            self._dirty_rows
            or self._removed_rows
            or self._dirty_counts
            or self._dirty_topics
            or self._removed_topics
            or self._dirty_brokers
            or self._removed_brokers
            or bool(self._edges)
            or bool(self._topic_edges)
            or not self._changes.is_empty
        )

    @property
    def unflushed_rows(self) -> int:
        """Rows changed since the last ``take_changes`` (what the next flush will write)."""
        return len(self._dirty_rows)

    def take_changes(self) -> ChangeSet:
        """Hand over everything changed since the last call, coalesced, and start afresh."""
        ch = self._changes
        ch.add_edges(self._edges)
        for (topic, d), n in self._topic_edges.items():
            scope = topic_scope(topic)
            for machine, src, dst in d.topic_edges or ():
                ch.count_edge(scope, machine, src, dst, n)
        # Rows that moved the same way share their state-set moves: grouped here, expanded once.
        moved: dict[tuple[Membership | None, Membership | None], list[str]] = {}
        partitions, flushed, removed = self.partitions, self._flushed, self._removed_rows
        for m in self._dirty_rows:
            row = partitions.get(m)
            if row is None:
                continue
            ch.rows[m] = row
            sig = row.counted
            new: Membership = sig[:3] if sig is not None else membership(row)
            old: Membership | None = flushed.get(m)
            if old is None:
                # Removed and created again since the last flush: it leaves the sets it was in.
                old = removed.get(m)
                flushed[m] = new
            if old != new:
                group = moved.get((old, new))
                if group is None:
                    moved[(old, new)] = [m]
                else:
                    group.append(m)
                flushed[m] = new
        for m, gone in removed.items():
            if m in partitions:
                continue
            ch.removed_rows.append(m)
            moved.setdefault((gone, None), []).append(m)
        for (was, now), members in moved.items():
            for add, key, broker in moves(self.cluster, was, now):
                target = ch.zadd if add else ch.zrem
                names = target.get(key)
                if names is None:
                    names = target[key] = []
                names.extend(members if broker is None else [f"{m}@{broker}" for m in members])
        pos, neg, gauges = self._pos, self._neg, self._gauges
        ch.counts = {k: gauges[k] if k in gauges else pos[k] - neg[k] for k in self._dirty_counts}
        for topic, keys in self._dirty_topic_counts.items():
            tpos, tneg = self._tpos.get(topic, _EMPTY), self._tneg.get(topic, _EMPTY)
            ch.topic_counts[topic] = {k: tpos.get(k, 0) - tneg.get(k, 0) for k in keys}
        for topic in self._dirty_topics | set(self._dirty_topic_counts):
            if topic in self.topics:
                ch.topics[topic] = self.topic_summary(topic)
        ch.removed_topics = sorted(t for t in self._removed_topics if t not in self.topics)
        ch.brokers = {b: self.brokers[b] for b in self._dirty_brokers if b in self.brokers}
        ch.removed_brokers = sorted(b for b in self._removed_brokers if b not in self.brokers)
        self._reset_pending()
        return ch

    def mark_flushed_all(self) -> None:
        """Record that a full snapshot of the current state was just written."""
        self._flushed = {m: membership(row) for m, row in self.partitions.items()}
        self._reset_pending()

    def membership_of(self, m: str) -> set[tuple[str, str]]:
        """Every (zset key, member) a partition belongs to now (for full snapshots)."""
        return {
            (key, m if broker is None else f"{m}@{broker}")
            for key, broker in membership_keys(self.cluster, membership(self.partitions[m]))
        }

    # -- counters -------------------------------------------------------------------------------
    def _count(self, row: PartitionRow, sign: int) -> None:
        """Add (``sign`` 1) or remove (-1) one row's contribution (used where old and new differ in
        more than states, e.g. topic creation and removal)."""
        if sign > 0:
            self._recount(None, row)
        else:
            self._recount(row, None)

    def _recount(
        self, old: PartitionRow | None, new: PartitionRow | None, old_live: AbstractSet[int] | None = None
    ) -> Delta | None:
        """Move the counters from ``old``'s contribution to ``new``'s; return the move (``None``: the
        two count the same).

        Only the counters that differ are touched: the move between two signatures is worked out
        once (``contributions.delta``). ``old`` is uncounted with the signature it was counted with;
        ``old_live`` is the broker set to count it with when it has none (never counted).
        """
        ref = new if new is not None else old
        assert ref is not None
        topic = ref.topic
        info = self.topics.get(topic)
        min_isr = info.min_isr if info else self.default_min_isr
        new_sig: Signature | None = None
        if new is not None:
            new_sig = new.counted = signature(new, self.live, min_isr)
        old_sig: Signature | None = None
        if old is not None:
            old_sig = old.counted
            if old_sig is None:
                old_sig = signature(old, self.live if old_live is None else old_live, min_isr)
            old.counted = None
        if old_sig == new_sig:
            return None
        d = delta(old_sig, new_sig)
        if d.plus:
            _count_elements(self._pos, d.plus)
        if d.minus:
            _count_elements(self._neg, d.minus)
        if d.topic_plus or d.topic_minus:
            tpos = self._tpos.get(topic)
            if tpos is None:
                tpos = self._tpos[topic] = Counter()
                self._tneg[topic] = Counter()
            if d.topic_plus:
                _count_elements(tpos, d.topic_plus)
            if d.topic_minus:
                _count_elements(self._tneg[topic], d.topic_minus)
        if self._recording:
            self._dirty_counts.update(d.keys)
            if d.topic_keys:
                tdirty = self._dirty_topic_counts.get(topic)
                if tdirty is None:
                    self._dirty_topic_counts[topic] = set(d.topic_keys)
                else:
                    tdirty.update(d.topic_keys)
        return d

    @property
    def counts(self) -> Counter[str]:
        """Every cluster counter (computed: use for full snapshots and tests, not per change)."""
        out = self._pos.copy()
        out.subtract(self._neg)
        out.update(self._gauges)
        return out

    def count(self, key: str) -> int:
        if key in self._gauges:
            return self._gauges[key]
        return self._pos[key] - self._neg[key]

    def topic_count(self, topic: str) -> Counter[str]:
        return Counter(self._topic_counters(topic))

    def _topic_counters(self, topic: str) -> dict[str, int]:
        """A topic's counters (every key it ever counted; some may be zero)."""
        tpos, tneg = self._tpos.get(topic, _EMPTY), self._tneg.get(topic, _EMPTY)
        return {k: n - tneg.get(k, 0) for k, n in tpos.items()}

    @property
    def topic_counts(self) -> dict[str, Counter[str]]:
        return {topic: self.topic_count(topic) for topic in self._tpos}

    def _set_gauge(self, key: str, value: int) -> None:
        if self._gauges.get(key) != value:
            self._gauges[key] = value
            self._dirty_counts.add(key)

    # -- row replacement ------------------------------------------------------------------------
    def _replace(
        self,
        old: PartitionRow | None,
        new: PartitionRow,
        *,
        diff_edges: bool = True,
        old_live: AbstractSet[int] | None = None,
    ) -> None:
        """Replace ``old`` by ``new``: counters, hosting index, dirty marks, transitions."""
        m = new.member
        self.partitions[m] = new
        d = self._recount(old, new, old_live)
        if old is None or old.replicas != new.replicas:
            if old is not None:
                for b in old.replicas:
                    self.hosting.get(b, set()).discard(m)
            for b in new.replicas:
                self.hosting.setdefault(b, set()).add(m)
        self._dirty_rows.add(m)
        if diff_edges and self._recording and d is not None:
            self._record_move(old, new, d)

    def _record_move(self, old: PartitionRow | None, new: PartitionRow | None, d: Delta) -> None:
        """Count the transitions of a row that moved by ``d``."""
        if d.edges is None:
            self._record_diff(old, new)  # its replicas changed: diff the rows themselves
            return
        if d.edges:
            _count_elements(self._edges, d.edges)
        if d.topic_edges:
            ref = new if new is not None else old
            assert ref is not None
            self._topic_edges[(ref.topic, d)] += 1

    def _record_diff(self, old: PartitionRow | None, new: PartitionRow | None) -> None:
        if old is None and new is None:
            return
        ref = new if new is not None else old
        assert ref is not None
        edges = self._edges
        old_state = old.state if old is not None else NON_EXISTENT_P
        new_state = new.state if new is not None else NON_EXISTENT_P
        tscope = f"topic:{ref.topic}"
        hosts = set(old.replicas if old else ()) | set(new.replicas if new else ())
        if old_state != new_state:
            edges[(CLUSTER_SCOPE, "partition", old_state, new_state)] += 1
            edges[(tscope, "partition", old_state, new_state)] += 1
            for b in hosts:
                edges[(f"broker:{b}", "partition", old_state, new_state)] += 1
        old_rs = old.replica_states if old is not None else {}
        new_rs = new.replica_states if new is not None else {}
        for b in hosts:
            src = old_rs.get(b, NON_EXISTENT_R)
            dst = new_rs.get(b, NON_EXISTENT_R)
            if src != dst:
                edges[(CLUSTER_SCOPE, "replica", src, dst)] += 1
                edges[(tscope, "replica", src, dst)] += 1
                edges[(f"broker:{b}", "replica", src, dst)] += 1

    def _remove_row(self, m: str) -> None:
        old = self.partitions.pop(m, None)
        if old is None:
            return
        d = self._recount(old, None)
        for b in old.replicas:
            self.hosting.get(b, set()).discard(m)
        self._dirty_rows.discard(m)
        flushed = self._flushed.pop(m, None)
        if flushed is not None:
            self._removed_rows[m] = flushed
        if self._recording and d is not None:
            self._record_move(old, None, d)

    # -- brokers and controller -----------------------------------------------------------------
    def set_brokers(self, registrations: Mapping[int, dict[str, Any]], *, defer: bool = False) -> list[str]:
        """Replace the registered brokers; re-derive every partition hosted by one that came or went.

        With ``defer`` the rows to re-derive are returned instead, for the caller to ``refresh`` a
        chunk at a time (the mirror does, so a broker hosting 50,000 partitions does not stall the
        controller's records behind it). Counters stay exact either way: each row is recounted from
        what it was counted with.
        """
        new_live = frozenset(registrations)
        changed = new_live ^ self.live
        for b in set(self.brokers) - set(registrations):
            self._removed_brokers.add(b)
        for b, reg in registrations.items():
            if self.brokers.get(b) != reg:
                self._dirty_brokers.add(b)
        self.brokers = dict(registrations)
        self._set_gauge(LIVE_BROKERS, len(new_live))
        if not changed:
            return []
        members = self._affected_by(changed)
        self.live = new_live
        if defer:
            return members
        self.refresh(members)
        return []

    def _affected_by(self, changed: frozenset[int]) -> list[str]:
        members: set[str] = set()
        for b in changed:
            members |= self.hosting.get(b, set())
        for led in self.partitions.values():
            if led.leader in changed:
                members.add(led.member)
        leaders: list[str] = []
        followers: list[str] = []
        for m in members:
            row = self.partitions.get(m)
            # A row whose states the controller reported only depends on broker liveness through
            # its leader; skipping the others keeps a broker death O(partitions it leads).
            if row is None or not (row.derived or row.replica_derived or row.leader in changed):
                continue
            (leaders if row.leader in changed else followers).append(m)
        # Rows that lost (or regained) their leader first: when the caller re-derives a chunk at a
        # time, the page shows the partitions going offline before the replicas going out of sync.
        return leaders + followers

    def refresh(self, members: Iterable[str]) -> None:
        """Re-derive and recount rows after the broker set changed (see ``set_brokers``)."""
        for m in members:
            old = self.partitions.get(m)
            if old is None:
                continue
            new = old.clone()
            rederive(new, self.live)
            if new.state == old.state and new.replica_states == old.replica_states:
                # Only liveness-dependent counters (offline) moved; the row itself looks the same,
                # so it is neither rewritten nor republished.
                self.partitions[m] = new
                self._recount(old, new)
                continue
            self._replace(old, new)

    def set_controller(self, controller_id: int | None, epoch: int | None) -> None:
        if (controller_id, epoch) != (self.controller_id, self.controller_epoch):
            self.controller_id, self.controller_epoch = controller_id, epoch
            self._changes.controller = self.controller_view()

    def controller_view(self) -> dict[str, Any]:
        epoch = self.controller_epoch
        return {
            "id": self.controller_id,
            "epoch": epoch,
            # Each election after the first bumps the epoch, so epoch - 1 counts failovers.
            "failovers": max(epoch - 1, 0) if epoch is not None else None,
        }

    def set_admin(self, name: str, value: Any) -> None:
        """Record a pending ``/admin`` request (``None`` when it is gone)."""
        if self.admin.get(name) != value:
            if value is None:
                self.admin.pop(name, None)
            else:
                self.admin[name] = value
            self._changes.admin[name] = value

    def set_deleting(self, topics: Iterable[str]) -> None:
        new = frozenset(topics)
        for topic in new ^ self.deleting:
            self._dirty_topics.add(topic)
        self.deleting = new
        self.set_admin("delete_topics", sorted(new) or None)

    def set_admin_reassignment(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions named in the legacy ``/admin/reassign_partitions`` znode count as reassigning."""
        new = frozenset(layout.member(tp.topic, tp.partition) for tp in partitions)
        for m in new ^ self._admin_reassign:
            old = self.partitions.get(m)
            if old is not None:
                row = old.clone()
                row.admin_reassign = m in new
                self._replace(old, row)
        self._admin_reassign = new

    # -- topics ---------------------------------------------------------------------------------
    def set_topic_names(self, names: Iterable[str]) -> list[str]:
        """Drop topics that are gone; return the names that are new (their znodes must be read)."""
        wanted = set(names)
        for topic in [t for t in self.topics if t not in wanted]:
            self.remove_topic(topic)
        new = sorted(wanted - set(self.topics))
        self._set_gauge(TOPICS, len(wanted))
        return new

    def set_topic(
        self,
        topic: str,
        topic_id: str | None,
        assignment: Mapping[int, ReplicaAssignment],
        min_isr: int | None = None,
    ) -> list[TopicPartition]:
        """Apply a topic znode; return the partitions that are new (their state znodes must be read)."""
        info = self.topics.get(topic)
        created = info is None
        if info is None:
            info = self.topics[topic] = TopicInfo(topic, topic_id, min_isr or self.default_min_isr)
            self._set_gauge(TOPICS, len(self.topics))
        min_isr_changed = min_isr is not None and min_isr != info.min_isr
        if min_isr_changed:
            rows = [self.partitions[layout.member(topic, p)] for p in info.partitions]
            for row in rows:
                self._count(row, -1)
            info.min_isr = min_isr or self.default_min_isr
            for row in rows:
                self._count(row, +1)
            self._dirty_topics.add(topic)
        if info.topic_id != topic_id:
            info.topic_id = topic_id
            self._dirty_topics.add(topic)
        new_partitions: list[TopicPartition] = []
        for p, a in assignment.items():
            m = layout.member(topic, p)
            old = self.partitions.get(m)
            if old is None:
                row = PartitionRow(topic, p, a.replicas, a.adding_replicas, a.removing_replicas)
                row.admin_reassign = m in self._admin_reassign
                early = self._early_states.pop(m, None)
                rederive(row, self.live)
                if early is not None:
                    self._apply_early(row, early)
                self._replace(None, row)
                new_partitions.append(TopicPartition(topic, p))
            elif (old.replicas, old.adding, old.removing) != (a.replicas, a.adding_replicas, a.removing_replicas):
                new = old.clone()
                new.replicas, new.adding, new.removing = a.replicas, a.adding_replicas, a.removing_replicas
                new.replica_states = {b: s for b, s in old.replica_states.items() if b in a.replicas}
                rederive(new, self.live)
                self._replace(old, new)
        for p in info.partitions - set(assignment):
            self._remove_row(layout.member(topic, p))
        info.partitions = frozenset(assignment)
        if created or new_partitions:
            self._dirty_topics.add(topic)
        return new_partitions

    def remove_topic(self, topic: str) -> None:
        info = self.topics.pop(topic, None)
        if info is None:
            return
        for p in info.partitions:
            self._remove_row(layout.member(topic, p))
        self._tpos.pop(topic, None)
        self._tneg.pop(topic, None)
        self._dirty_topic_counts.pop(topic, None)
        self._dirty_topics.discard(topic)
        self._removed_topics.add(topic)
        self._set_gauge(TOPICS, len(self.topics))

    def topic_summary(self, topic: str, counts: Mapping[str, int] | None = None) -> str:
        info = self.topics[topic]
        tc = counts if counts is not None else self._topic_counters(topic)
        rf = 0
        for p in info.partitions:
            row = self.partitions.get(layout.member(topic, p))
            if row is not None:
                rf = max(rf, len(row.replicas) - len(row.adding))
                break
        return layout.topic_summary(len(info.partitions), rf, tc, info.topic_id, topic in self.deleting, info.min_isr)

    # -- bulk loading ---------------------------------------------------------------------------
    def begin_bulk(self) -> None:
        """Stop recording changes (a full sync is written as a whole snapshot, not as deltas)."""
        self._recording = False

    def end_bulk(self) -> None:
        self._recording = True

    def forget_early_states(self) -> None:
        self._early_states.clear()


_EMPTY: Counter[str] = Counter()
