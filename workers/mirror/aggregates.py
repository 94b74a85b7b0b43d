"""How observed-mode states are derived from what ZooKeeper holds.

What one partition adds to the aggregate counters is ``workers.mirror.contributions`` (by the row's
signature).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from controller_core.states import PartitionState, ReplicaState
from dashboard.clusters.layout import PartitionRow

_ONLINE_P = str(PartitionState.ONLINE)
_OFFLINE_P = str(PartitionState.OFFLINE)
_NEW_P = str(PartitionState.NEW)
_ONLINE_R = str(ReplicaState.ONLINE)
_OFFLINE_R = str(ReplicaState.OFFLINE)
_NEW_R = str(ReplicaState.NEW)


def derive_partition_state(row: PartitionRow, live: AbstractSet[int]) -> str:
    """Observed-mode partition state: Kafka's meaning read off ZooKeeper.

    No state znode yet means the controller has not elected a first leader: NewPartition. A leader
    that is registered means OnlinePartition; anything else (-1, or a dead broker) OfflinePartition.
    """
    if row.mzxid < 0 and row.leader_epoch < 0:
        return _NEW_P
    return _ONLINE_P if row.leader >= 0 and row.leader in live else _OFFLINE_P


def derive_replica_states(row: PartitionRow, live: AbstractSet[int]) -> dict[int, str]:
    """Observed-mode replica states: NewReplica before the first leader, else online iff the broker is."""
    if row.mzxid < 0 and row.leader_epoch < 0:
        return dict.fromkeys(row.replicas, _NEW_R)
    return {b: (_ONLINE_R if b in live else _OFFLINE_R) for b in row.replicas}


def rederive(row: PartitionRow, live: AbstractSet[int]) -> None:
    """Refresh whichever of ``row``'s states are derived (in place)."""
    if row.derived:
        row.state = derive_partition_state(row, live)
    if row.replica_derived:
        row.replica_states = derive_replica_states(row, live)
    elif set(row.replica_states) != set(row.replicas):
        # A replica added by a reassignment has no controller state yet: derive just that one.
        derived = derive_replica_states(row, live)
        for broker in row.replicas:
            row.replica_states.setdefault(broker, derived[broker])
