"""What one partition adds to the aggregate counters, and how observed-mode states are derived.

Why contributions: the overview and the diagrams read counters, never the 100,000 partition rows.
Keeping counters exact under any sequence of updates is easy if every counter is a sum over
partitions of a per-partition contribution: an update subtracts the old row's contribution and adds
the new one's. The functions here compute those contributions as *lists of counter names* (a name
listed twice counts twice), which ``collections.Counter.update``/``subtract`` apply in C.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from controller_core.states import PartitionState, ReplicaState
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

_ONLINE_P = str(PartitionState.ONLINE)
_OFFLINE_P = str(PartitionState.OFFLINE)
_NEW_P = str(PartitionState.NEW)
_ONLINE_R = str(ReplicaState.ONLINE)
_OFFLINE_R = str(ReplicaState.OFFLINE)
_NEW_R = str(ReplicaState.NEW)


def topic_contribution(row: PartitionRow, live: AbstractSet[int], min_isr: int) -> list[str]:
    """Counter names this partition adds to its topic's counters (and to the cluster's)."""
    keys = [PARTITIONS, f"p:{row.state}"]
    replicas = row.replicas
    leader = row.leader
    isr_size = len(row.isr)
    keys.extend([REPLICAS] * len(replicas))
    if leader < 0 or leader not in live:
        keys.append(OFFLINE)
    if isr_size < len(replicas):
        keys.append(UNDER_REPLICATED)
    if isr_size < min_isr:
        keys.append(UNDER_MIN_ISR)
    if not replicas or leader != replicas[0]:
        keys.append(NON_PREFERRED)
    if row.adding or row.removing or row.admin_reassign:
        keys.append(REASSIGNING)
    states = row.replica_states
    for broker in replicas:
        keys.append(f"r:{states.get(broker, _NEW_R)}")
        keys.append(f"b:{broker}:replicas")
    if leader >= 0:
        keys.append(f"b:{leader}:leaders")
    return keys


def broker_state_contribution(row: PartitionRow) -> list[str]:
    """Per-broker state counters (cluster only): each hosting broker's view of this partition."""
    states = row.replica_states
    pstate = row.state
    keys: list[str] = []
    for broker in row.replicas:
        keys.append(f"b:{broker}:p:{pstate}")
        keys.append(f"b:{broker}:r:{states.get(broker, _NEW_R)}")
    return keys


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
