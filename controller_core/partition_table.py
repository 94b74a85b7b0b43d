"""The controller's per-partition state in columns indexed by a partition number.

Why columns: a broker failure at 100,000 partitions touches 10,000 partitions about 26 times each
(state checks, leadership, assignment, records, requests). Keyed by ``TopicPartition`` every touch
hashes a tuple again (tuples do not cache their hash); with each partition given an ``int`` number
once, the state machines look the number up once per event and then index plain lists.

A partition keeps its number for the life of the table (the context's controller epoch): a deleted
topic's partitions keep their (NonExistent) states, Kafka's §15.15, so numbers are never reused.
The columns hold ``None`` where the partition has no value (no assignment, no leadership cached,
no state). The table keeps no invariants of its own beyond the indexes below; the context
(``controller_core.context``) owns the gauges and the rules of each change.

Indexes (sets of numbers), maintained by the context as it writes the columns:

* ``by_topic``: a topic's assigned partitions (``TopicPartition`` -> number, in assignment order);
* ``by_broker``: the partitions with a replica assigned to a broker;
* ``by_leader``: the partitions a broker leads (from the leadership column);
* ``by_state``: the partitions in each non-Online partition state (Online is the bulk).

Replica states are the largest part of a context (three per partition). A cluster has few distinct
combinations of (replica, state) per partition, so each partition's entry is a *shared* mapping,
interned by its items: never change one in place; ``ReplicaStateMaps.with_state`` / ``without``
return the shared mapping of the changed combination (a transition is cached per shared mapping,
so moving 20,000 replicas costs one small-tuple lookup each). At a million partitions that is ~230
MB less than a dict per partition.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from controller_core.model import LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from controller_core.states import PartitionState, ReplicaState

_ReplicaStates = dict[int, ReplicaState]


class ReplicaStateMaps:
    """The shared, never-mutated replica-state mappings of a table (see the module docstring)."""

    __slots__ = ("_interned", "_moves")

    def __init__(self) -> None:
        self._interned: dict[tuple[tuple[int, ReplicaState], ...], _ReplicaStates] = {}
        # (id of a shared mapping or of None, broker, state or None to remove) -> the resulting one.
        # Shared mappings live as long as the table (held by ``_interned``), so their ids are stable.
        self._moves: dict[tuple[int, int, ReplicaState | None], _ReplicaStates | None] = {}

    def intern(self, states: _ReplicaStates) -> _ReplicaStates | None:
        """The shared mapping equal to ``states`` (which is taken, not copied); None when empty."""
        if not states:
            return None
        key = tuple(states.items())
        shared = self._interned.get(key)
        if shared is None:
            shared = self._interned[key] = states
        return shared

    def with_state(self, current: _ReplicaStates | None, broker_id: int, state: ReplicaState) -> _ReplicaStates:
        """``current`` with ``broker_id``'s replica in ``state``, shared."""
        key = (id(current), broker_id, state)
        moved = self._moves.get(key)
        if moved is None:
            changed = dict(current) if current else {}
            changed[broker_id] = state
            moved = self._moves[key] = self.intern(changed)
        assert moved is not None
        return moved

    def without(self, current: _ReplicaStates | None, broker_id: int) -> _ReplicaStates | None:
        """``current`` without ``broker_id``'s replica, shared (None: no replica left)."""
        key = (id(current), broker_id, None)
        if key in self._moves:
            return self._moves[key]
        changed = dict(current) if current else {}
        changed.pop(broker_id, None)
        moved = self._moves[key] = self.intern(changed)
        return moved


class PartitionTable:
    """Columns of partition data, one row per partition number; mutated on the event thread only."""

    __slots__ = (
        "assignment",
        "by_broker",
        "by_leader",
        "by_state",
        "by_topic",
        "ids",
        "leadership",
        "leadership_count",
        "replica_state_maps",
        "replica_states",
        "state",
        "state_count",
        "tps",
    )

    def __init__(self) -> None:
        self.ids: dict[TopicPartition, int] = {}
        """Each known partition's number."""
        self.tps: list[TopicPartition] = []
        """Number -> partition (the one key object the context hands out)."""
        self.assignment: list[ReplicaAssignment | None] = []
        self.leadership: list[LeaderIsrAndControllerEpoch | None] = []
        self.state: list[PartitionState | None] = []
        self.replica_states: list[dict[int, ReplicaState] | None] = []
        """Per partition: broker id -> replica state, a shared mapping (None: no replica has a state)."""
        self.replica_state_maps = ReplicaStateMaps()
        self.by_topic: dict[str, dict[TopicPartition, int]] = {}
        self.by_broker: dict[int, set[int]] = {}
        self.by_leader: dict[int, set[int]] = {}
        self.by_state: dict[PartitionState, set[int]] = {
            s: set() for s in PartitionState if s is not PartitionState.ONLINE
        }
        self.leadership_count = 0
        self.state_count = 0

    def __len__(self) -> int:
        return len(self.tps)

    def id_of(self, tp: TopicPartition) -> int:
        """The partition's number, given one (an empty row) if it has none yet."""
        pid = self.ids.get(tp)
        if pid is None:
            pid = self.ids[tp] = len(self.tps)
            self.tps.append(tp)
            self.assignment.append(None)
            self.leadership.append(None)
            self.state.append(None)
            self.replica_states.append(None)
        return pid

    def add_rows(self, partitions: Sequence[TopicPartition]) -> range:
        """Give each of ``partitions`` (none of which has a number yet) the next number, in order, with
        empty rows: ``id_of`` in bulk, for a failover's million new partitions. Returns the numbers."""
        first = len(self.tps)
        numbers = range(first, first + len(partitions))
        self.ids.update(zip(partitions, numbers, strict=True))
        if len(self.ids) != first + len(partitions):
            raise ValueError("add_rows: a partition is repeated or has a number already")
        self.tps.extend(partitions)
        empty = [None] * len(partitions)
        self.assignment.extend(empty)
        self.leadership.extend(empty)
        self.state.extend(empty)
        self.replica_states.extend(empty)
        return numbers

    def ids_of(self, partitions: Iterable[TopicPartition]) -> list[int]:
        """``id_of`` for each partition, in order (unknown partitions get new rows)."""
        ids = self.ids
        out: list[int] = []
        append = out.append
        for tp in partitions:
            pid = ids.get(tp)
            if pid is None:
                pid = self.id_of(tp)
            append(pid)
        return out

    def index(self, index: dict[int, set[int]], key: int, pid: int) -> None:
        """Add ``pid`` under ``key`` in ``index`` (``by_broker`` or ``by_leader``)."""
        members = index.get(key)
        if members is None:
            index[key] = {pid}
        else:
            members.add(pid)

    def unindex(self, index: dict[int, set[int]], key: int, pid: int) -> None:
        """Remove ``pid`` from under ``key`` in ``index``; an emptied key goes."""
        members = index.get(key)
        if members is not None:
            members.discard(pid)
            if not members:
                del index[key]
