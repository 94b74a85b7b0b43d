"""Kafka's replica and partition states and their legal transitions, kept as data.

The tables are exactly Kafka's (reference §3.1 and §4.1, including Offline -> Offline, which the
code allows though a class comment says otherwise). The state machines validate against them and
the dashboard draws its live diagrams from them, so code and picture cannot drift.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType
from typing import Final


class ReplicaState(StrEnum):
    """The seven replica states; values are Kafka's names."""

    NEW = "NewReplica"
    ONLINE = "OnlineReplica"
    OFFLINE = "OfflineReplica"
    DELETION_STARTED = "ReplicaDeletionStarted"
    DELETION_SUCCESSFUL = "ReplicaDeletionSuccessful"
    DELETION_INELIGIBLE = "ReplicaDeletionIneligible"
    NON_EXISTENT = "NonExistentReplica"

    @property
    def valid_previous_states(self) -> frozenset[ReplicaState]:
        return REPLICA_VALID_PREVIOUS[self]

    @property
    def kafka_id(self) -> int:
        """Kafka's byte value of the state (1 to 7)."""
        return _REPLICA_IDS[self]


class PartitionState(StrEnum):
    """The four partition states; values are Kafka's names."""

    NEW = "NewPartition"
    ONLINE = "OnlinePartition"
    OFFLINE = "OfflinePartition"
    NON_EXISTENT = "NonExistentPartition"

    @property
    def valid_previous_states(self) -> frozenset[PartitionState]:
        return PARTITION_VALID_PREVIOUS[self]

    @property
    def kafka_id(self) -> int:
        """Kafka's byte value of the state (0 to 3)."""
        return _PARTITION_IDS[self]


_R = ReplicaState
REPLICA_VALID_PREVIOUS: Final[Mapping[ReplicaState, frozenset[ReplicaState]]] = MappingProxyType(
    {
        _R.NEW: frozenset({_R.NON_EXISTENT}),
        _R.ONLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
        _R.OFFLINE: frozenset({_R.NEW, _R.ONLINE, _R.OFFLINE, _R.DELETION_INELIGIBLE}),
        _R.DELETION_STARTED: frozenset({_R.OFFLINE}),
        _R.DELETION_SUCCESSFUL: frozenset({_R.DELETION_STARTED}),
        _R.DELETION_INELIGIBLE: frozenset({_R.OFFLINE, _R.DELETION_STARTED}),
        _R.NON_EXISTENT: frozenset({_R.DELETION_SUCCESSFUL}),
    }
)

_P = PartitionState
PARTITION_VALID_PREVIOUS: Final[Mapping[PartitionState, frozenset[PartitionState]]] = MappingProxyType(
    {
        _P.NEW: frozenset({_P.NON_EXISTENT}),
        _P.ONLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
        _P.OFFLINE: frozenset({_P.NEW, _P.ONLINE, _P.OFFLINE}),
        _P.NON_EXISTENT: frozenset({_P.OFFLINE}),
    }
)

_REPLICA_IDS: Final = MappingProxyType({state: i for i, state in enumerate(ReplicaState, start=1)})
_PARTITION_IDS: Final = MappingProxyType({state: i for i, state in enumerate(PartitionState)})

# One colour per state, shared by every diagram and badge of the dashboard.
STATE_COLORS: Final[Mapping[str, str]] = MappingProxyType(
    {
        PartitionState.NEW: "#6c8ebf",
        PartitionState.ONLINE: "#2e9e5b",
        PartitionState.OFFLINE: "#d64545",
        PartitionState.NON_EXISTENT: "#8a8a8a",
        ReplicaState.NEW: "#6c8ebf",
        ReplicaState.ONLINE: "#2e9e5b",
        ReplicaState.OFFLINE: "#d64545",
        ReplicaState.DELETION_STARTED: "#e0a030",
        ReplicaState.DELETION_SUCCESSFUL: "#9b6bc7",
        ReplicaState.DELETION_INELIGIBLE: "#b5651d",
        ReplicaState.NON_EXISTENT: "#8a8a8a",
    }
)


def is_valid_replica_transition(current: ReplicaState, target: ReplicaState) -> bool:
    return current in REPLICA_VALID_PREVIOUS[target]


def is_valid_partition_transition(current: PartitionState, target: PartitionState) -> bool:
    return current in PARTITION_VALID_PREVIOUS[target]


def transition_edges(
    table: Mapping[ReplicaState, frozenset[ReplicaState]] | Mapping[PartitionState, frozenset[PartitionState]],
) -> list[tuple[str, str]]:
    """Every legal (from, to) edge of a table, in a stable order, for drawing diagrams."""
    edges: list[tuple[str, str]] = []
    order: list[str] = [str(state) for state in table]
    for dst, sources in table.items():
        for src in sorted((str(s) for s in sources), key=order.index):
            edges.append((src, str(dst)))
    return edges


def invalid_transition_error(kind: str, count: int, target: ReplicaState | PartitionState) -> str:
    """The failed-change error of ``count`` ``kind``s (``"replica"``/``"partition"``) that may not move to
    ``target``, after one warning for all of them: both state machines record it per item (§15.7)."""
    allowed = ", ".join(sorted(target.valid_previous_states))
    logging.getLogger("controller_core.state_machines").warning(
        "%d %ss cannot move to %s: they must be in one of [%s] first", count, kind, target, allowed
    )
    return f"IllegalStateError: {kind} must be in one of [{allowed}] before moving to {target}"
