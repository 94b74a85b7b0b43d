"""The ``kind`` of every state-change record a controller writes (docs/contracts.md), named once.

The controller writes them (``state_change_log``, ``controller``, ``reassignment``, ...); the mirror,
the audit ingest, the Spark job and the benchmarks read them. Each reader compares against these
members instead of spelling the string again; ``StrEnum`` members equal their strings, so a record
decoded from JSON compares equal without conversion.
"""

from __future__ import annotations

from enum import StrEnum


class RecordKind(StrEnum):
    # Partition and replica records (one per partition or replica the event touched).
    PARTITION_TRANSITION = "partition_transition"
    REPLICA_TRANSITION = "replica_transition"
    ELECTION = "election"
    ISR_CHANGE = "isr_change"
    FAILED_CHANGE = "failed_change"
    # One record per controller event or request.
    REQUEST_BATCH = "request_batch"
    FAILOVER = "failover"
    RESIGNATION = "resignation"
    SESSION_ABANDONED = "session_abandoned"
    STATE_SNAPSHOT = "state_snapshot"
    STATES_INITIALIZED = "states_initialized"
    BROKER_CHANGE = "broker_change"
    PREFERRED_ELECTION_REQUEST = "preferred_election_request"
    CONTROLLED_SHUTDOWN = "controlled_shutdown"
    CONTROLLED_SHUTDOWN_REJECTED = "controlled_shutdown_rejected"
    REASSIGNMENT = "reassignment"
    REASSIGNMENT_REJECTED = "reassignment_rejected"
    TOPIC_DELETION = "topic_deletion"
    STANDBY_FALLBACK = "standby_fallback"
