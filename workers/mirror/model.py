"""The mirror's value types and names: modes, a state znode read, a topic's extras, zset membership.

Why a module of its own: ``state.py`` (the model) and ``updates.py`` (applying records and reads to
it) both need them, and neither should import the other's internals for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from controller_core.states import PartitionState, ReplicaState
from dashboard.clusters import layout

MANAGED = "managed"
OBSERVED = "observed"
NON_EXISTENT_P = str(PartitionState.NON_EXISTENT)
NON_EXISTENT_R = str(ReplicaState.NON_EXISTENT)
NEW_R = str(ReplicaState.NEW)
PARTITION_STATES = frozenset(layout.PARTITION_STATES)
REPLICA_STATES = frozenset(layout.REPLICA_STATES)


@dataclass(slots=True)
class TopicInfo:
    """What the mirror keeps per topic besides its partitions."""

    name: str
    topic_id: str | None = None
    min_isr: int = 1
    partitions: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class StateRead:
    """One partition state znode as read from ZooKeeper (``mzxid`` orders reads of one znode)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int
    mzxid: int


# (partition state, replicas, replica states in replica order, None where none is known): what
# decides zset membership (a missing replica state counts as NewReplica there).
Membership = tuple[str, tuple[int, ...], tuple[str | None, ...]]


# A state read that read nothing: the znode could not be read or decoded (logged), or had not
# changed since the read the row holds (``zksource.decode_states``). Compared by identity.
UNREAD: Final = StateRead(-1, -1, (), -1, -1, -1)
