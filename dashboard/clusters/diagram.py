"""The two state machines as drawable specs, built from ``controller_core.states`` (never by hand).

States, colours and edges come from the transition tables and ``STATE_COLORS``, so the picture
cannot drift from what the controller enforces. Only the *positions* are chosen here, on a grid
that keeps the main path (New -> Online <-> Offline) in the middle and deletion to the right.
"""

from __future__ import annotations

from typing import Any, Final

from controller_core.states import (
    PARTITION_VALID_PREVIOUS,
    REPLICA_VALID_PREVIOUS,
    STATE_COLORS,
    PartitionState,
    ReplicaState,
    transition_edges,
)

_P = PartitionState
_R = ReplicaState

# (column, row) on a grid; the SVG scales it.
_PARTITION_POSITIONS: Final = {
    _P.NON_EXISTENT: (0, 1),
    _P.NEW: (0, 0),
    _P.ONLINE: (2, 0),
    _P.OFFLINE: (2, 1),
}
_REPLICA_POSITIONS: Final = {
    _R.NON_EXISTENT: (0, 1),
    _R.NEW: (0, 0),
    _R.ONLINE: (1.6, 0),
    _R.OFFLINE: (1.6, 1),
    _R.DELETION_INELIGIBLE: (3.2, 0),
    _R.DELETION_STARTED: (3.2, 1),
    _R.DELETION_SUCCESSFUL: (1.6, 2),
}
_SHORT: Final = {
    _P.NON_EXISTENT: "NonExistent",
    _P.NEW: "New",
    _P.ONLINE: "Online",
    _P.OFFLINE: "Offline",
    _R.NON_EXISTENT: "NonExistent",
    _R.NEW: "New",
    _R.ONLINE: "Online",
    _R.OFFLINE: "Offline",
    _R.DELETION_STARTED: "DeletionStarted",
    _R.DELETION_SUCCESSFUL: "DeletionSuccessful",
    _R.DELETION_INELIGIBLE: "DeletionIneligible",
}


def machine_spec(machine: str) -> dict[str, Any]:
    """``{"machine", "title", "states": [{name, label, color, x, y}], "edges": [[from, to], ...]}``."""
    if machine == "partition":
        table: Any = PARTITION_VALID_PREVIOUS
        positions: Any = _PARTITION_POSITIONS
        title = "Partition state machine"
    elif machine == "replica":
        table = REPLICA_VALID_PREVIOUS
        positions = _REPLICA_POSITIONS
        title = "Replica state machine"
    else:
        raise ValueError(f"unknown state machine {machine!r}")
    states = [
        {
            "name": str(state),
            "label": _SHORT[state],
            "color": STATE_COLORS[state],
            "x": positions[state][0],
            "y": positions[state][1],
        }
        for state in table
    ]
    return {"machine": machine, "title": title, "states": states, "edges": [list(e) for e in transition_edges(table)]}


def specs() -> list[dict[str, Any]]:
    return [machine_spec("partition"), machine_spec("replica")]
