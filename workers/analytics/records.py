"""The input contract of the analytics job: which state-change fields it reads and how files are named.

The controller writes one JSON object per line (``controller_core.state_change_log``) into
``<base>/<cluster>/state-change-YYYY-MM-DD.jsonl``, one file per UTC day. The job reads those files
(or their Parquet compaction) with :data:`RECORD_SCHEMA`, an explicit schema: inferring one would
scan every file twice and would turn a field that is null for a whole day into the wrong type.

Fields not listed here are ignored, and so are kinds the job does not know, so the controller can
add both freely. ``docs/analytics.md`` is the human-readable version of this module; keep them in
step.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Final

from pyspark.sql import types as T

from controller_core.election import (
    ControlledShutdownStrategy,
    OfflineStrategy,
    PreferredStrategy,
    ReassignStrategy,
)
from controller_core.record_kinds import RecordKind
from controller_core.states import PartitionState

# --- record kinds and values the job interprets -------------------------------------------------
# (plain strings, the controller's names: Spark expressions compare them as literals)

KIND_ELECTION: Final = RecordKind.ELECTION.value
KIND_PARTITION_TRANSITION: Final = RecordKind.PARTITION_TRANSITION.value
KIND_ISR_CHANGE: Final = RecordKind.ISR_CHANGE.value
KIND_FAILED_CHANGE: Final = RecordKind.FAILED_CHANGE.value
KIND_FAILOVER: Final = RecordKind.FAILOVER.value
KIND_REASSIGNMENT: Final = RecordKind.REASSIGNMENT.value
KIND_STATE_SNAPSHOT: Final = RecordKind.STATE_SNAPSHOT.value
KIND_BROKER_CHANGE: Final = RecordKind.BROKER_CHANGE.value

# Partition states and election strategies as the controller spells them in its records.
STATE_ONLINE: Final = PartitionState.ONLINE.value
STATE_OFFLINE: Final = PartitionState.OFFLINE.value
STATE_NON_EXISTENT: Final = PartitionState.NON_EXISTENT.value
STRATEGIES: Final = tuple(
    s.name for s in (OfflineStrategy, ReassignStrategy, PreferredStrategy, ControlledShutdownStrategy)
)

PHASE_STARTED: Final = "started"
PHASE_COMPLETED: Final = "completed"
PHASE_CANCELLED: Final = "cancelled"

NO_LEADER: Final = -1

# --- the schema ----------------------------------------------------------------------------------

_INT_ARRAY = T.ArrayType(T.IntegerType(), containsNull=True)

RECORD_SCHEMA: Final = T.StructType(
    [
        # Header, on every record.
        T.StructField("ts", T.DoubleType()),
        T.StructField("controller_id", T.IntegerType()),
        T.StructField("controller_epoch", T.LongType()),
        T.StructField("seq", T.LongType()),
        T.StructField("kind", T.StringType()),
        T.StructField("event_id", T.StringType()),
        T.StructField("cause", T.StringType()),
        # Partition and replica records.
        T.StructField("entity", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("to_state", T.StringType()),
        T.StructField("strategy", T.StringType()),
        T.StructField("leader_before", T.IntegerType()),
        T.StructField("leader_after", T.IntegerType()),
        T.StructField("isr_before", _INT_ARRAY),
        T.StructField("isr_after", _INT_ARRAY),
        T.StructField("unclean", T.BooleanType()),
        # kind="failover" (header controller_id/controller_epoch are the new controller's).
        T.StructField("elected_at_ms", T.DoubleType()),
        T.StructField("completed_at_ms", T.DoubleType()),
        T.StructField("duration_ms", T.DoubleType()),
        # kind="broker_change" / "failover": which brokers exist, so idle ones count in leader skew.
        T.StructField("new_brokers", _INT_ARRAY),
        T.StructField("dead_brokers", _INT_ARRAY),
        T.StructField("live_brokers", _INT_ARRAY),
        # kind="broker_change": brokers whose ZooKeeper session expired, and when it was lost
        # (estimated by the controller: noticed minus the session timeout). Outages they caused
        # really started then, not when the controller noticed.
        T.StructField("session_lost_brokers", _INT_ARRAY),
        T.StructField("session_lost_ms", T.DoubleType()),
        # kind="reassignment".
        T.StructField("phase", T.StringType()),
        T.StructField("action_id", T.StringType()),
        T.StructField("origin_replicas", _INT_ARRAY),
        T.StructField("target_replicas", _INT_ARRAY),
        # kind="state_snapshot": {state: [entity, ...]}, read only to learn every partition's name.
        T.StructField("partition_states", T.MapType(T.StringType(), T.ArrayType(T.StringType()))),
    ]
)

# --- file names ----------------------------------------------------------------------------------

FILE_PREFIX: Final = "state-change-"
FILE_SUFFIX: Final = ".jsonl"
_FILE_RE: Final = re.compile(r"^state-change-(\d{4}-\d{2}-\d{2})\.jsonl$")


def file_name_for(day: date) -> str:
    """Return the file name the controller's daily sink uses for ``day``."""
    return f"{FILE_PREFIX}{day.isoformat()}{FILE_SUFFIX}"


def day_of_file_name(name: str) -> date | None:
    """Return the UTC day a state-change file covers, or ``None`` for any other file name."""
    match = _FILE_RE.match(name)
    if match is None:
        return None
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:  # state-change-2024-02-30.jsonl: not ours, and not worth failing the run
        return None
