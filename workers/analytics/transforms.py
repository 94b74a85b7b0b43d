"""Pure DataFrame -> DataFrame steps of the analytics job; ``docs/analytics.md`` defines each metric.

Nothing here reads files, writes files or calls Python per row: every step is Catalyst expressions,
window functions and aggregates, so the JVM does all the work and the code runs unchanged on a
cluster. The job (``job.py``) wires the steps together, caches what several steps share and writes
the results.

Time is epoch milliseconds (``double``) throughout, days are UTC epoch days (``int``, days since
1970-01-01) and minutes are epoch minutes, because integer arithmetic is cheaper than timestamp
functions on ten million rows; the job turns them into dates and timestamps only on output.

The per-partition walk (:func:`walk_partitions`) is the one expensive step: a single sort of every
leadership record by partition and time, shared by three window passes. Its partition key is a
64-bit hash of (cluster, topic, partition) rather than the three columns, because a long sorts by
prefix and strings do not; :func:`partition_keys_are_unique` checks the hash for collisions first.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from workers.analytics import records as R

DAY_MS = 86_400_000
MINUTE_MS = 60_000

# Partition states the walk tracks (``state``): led, leaderless, deleted.
LED, LEADERLESS, GONE = 0, 1, 2

PARTITION_KEYS = ("cluster", "topic", "partition")

#: The record kinds whose own fields :func:`prepare_events` keeps (in ``extra``): few records, read
#: by a few metrics only.
EXTRA_KINDS = (R.KIND_ELECTION, R.KIND_FAILOVER, R.KIND_REASSIGNMENT, R.KIND_STATE_SNAPSHOT, R.KIND_BROKER_CHANGE)


@dataclass(frozen=True, slots=True)
class ReportWindow:
    """The reporting window, in epoch ms: metrics cover ``[start_ms, end_ms)``.

    ``effective_end_ms`` is ``end_ms`` for a closed window and "now" for one that includes today, so
    an interval still open is counted up to the present rather than to a future midnight.
    """

    start_ms: int
    end_ms: int
    effective_end_ms: int
    #: A cursor run's cut: an earlier run counted everything before it (its effective end), and
    #: this run's state starts from that run's saved state. ``None`` for a run over whole days.
    from_ms: int | None = None

    @property
    def counted_from_ms(self) -> int:
        """Where this run's counts begin: the cursor, else the window's first midnight."""
        return self.start_ms if self.from_ms is None else self.from_ms

    @property
    def start_day(self) -> int:
        return self.start_ms // DAY_MS

    @property
    def end_day(self) -> int:
        """The last day in the window (inclusive)."""
        return (self.end_ms - 1) // DAY_MS


def non_negative(column: Column) -> Column:
    return F.when(column >= 0, column)


def day_of(ts: Column) -> Column:
    return F.floor(ts / DAY_MS).cast("int")


def epoch_day(column: str) -> Column:
    """The UTC epoch day of an epoch-millisecond column."""
    return day_of(F.col(column))


def day_start(day: Column) -> Column:
    # Long arithmetic: an int day times 86,400,000 overflows (and ANSI mode rightly refuses).
    return day.cast("long") * F.lit(DAY_MS)


def in_window(ts: Column, window: ReportWindow) -> Column:
    """Whether ``ts`` falls in what this run counts: from the cursor (or first midnight) to the end."""
    return (ts >= F.lit(window.counted_from_ms)) & (ts < F.lit(window.end_ms))


# --- 1. projection -------------------------------------------------------------------------------


def prepare_events(records: DataFrame) -> DataFrame:
    """Reduce raw records (``RECORD_SCHEMA``, with or without ``cluster``) to what every metric needs.

    The result is what the job caches, and caching costs per row and column, so it is narrow:
    common columns for every record, and one ``extra`` struct (null for most rows) with the fields
    only elections, failovers, reassignments and snapshots have; :func:`rare` unpacks it.

    Derived here, once:

    * ``state``: what the record says about the partition's leadership (``LED``, ``LEADERLESS``,
      ``GONE``) or null when it says nothing definite. Elections and transitions to Online with a
      leader mean led; ``leader_after == -1`` or a transition to Offline means leaderless; a
      transition to NonExistent means deleted. Failed changes never change anything.
    * ``soft_leader``: a leader >= 0 from any other non-failed record (an ``isr_change`` from
      AlterIsr). It moves leadership of a led partition but cannot end an outage: only the
      controller's election does that, and a stale leader id on an offline partition must not.
    * ``isr_shrink``/``isr_expand``: whether the ISR lost/gained members in this record.
    """
    kind = F.col("kind")
    failed = kind == R.KIND_FAILED_CHANGE
    transition = kind == R.KIND_PARTITION_TRANSITION
    election = kind == R.KIND_ELECTION
    defines_leader = election | (transition & (F.col("to_state") == R.STATE_ONLINE))
    leader_after = F.col("leader_after")
    state = (
        F.when(failed, F.lit(None))
        .when(leader_after == R.NO_LEADER, F.lit(LEADERLESS))
        .when(defines_leader & (leader_after >= 0), F.lit(LED))
        .when(transition & (F.col("to_state") == R.STATE_OFFLINE), F.lit(LEADERLESS))
        .when(transition & (F.col("to_state") == R.STATE_NON_EXISTENT), F.lit(GONE))
    )
    soft_leader = F.when(~failed & ~defines_leader & (leader_after >= 0), leader_after)
    # Older or foreign writers may leave topic/partition out; the entity ("orders-3@5") has both.
    pattern = r"^(.+)-(\d+)(@\d+)?$"
    entity_topic = F.regexp_extract(F.col("entity"), pattern, 1)
    entity_partition = F.regexp_extract(F.col("entity"), pattern, 2)
    topic = F.coalesce(F.col("topic"), F.when(entity_topic != "", entity_topic))
    partition = F.coalesce(F.col("partition"), F.when(entity_partition != "", entity_partition.try_cast("int")))
    has_isr = F.col("isr_before").isNotNull() & F.col("isr_after").isNotNull()
    unclean = F.coalesce(F.col("unclean"), F.lit(False)) & election
    reassignment = kind == R.KIND_REASSIGNMENT
    extra = F.when(
        kind.isin(*EXTRA_KINDS),
        F.struct(
            kind.alias("kind"),
            F.col("strategy"),
            F.col("cause"),
            unclean.alias("unclean"),
            F.when(unclean, F.col("isr_before")).alias("isr_before"),
            F.when(unclean, F.col("isr_after")).alias("isr_after"),
            F.col("elected_at_ms"),
            F.col("completed_at_ms"),
            F.col("duration_ms"),
            F.when(reassignment, F.col("phase")).alias("phase"),
            F.when(reassignment, F.coalesce(F.col("action_id"), F.col("event_id"))).alias("action_id"),
            F.when(reassignment, F.col("origin_replicas")).alias("origin_replicas"),
            F.when(reassignment, F.col("target_replicas")).alias("target_replicas"),
            F.when(kind == R.KIND_STATE_SNAPSHOT, F.flatten(F.map_values("partition_states"))).alias(
                "snapshot_entities"
            ),
            F.concat(
                F.coalesce(F.col("new_brokers"), F.array().cast("array<int>")),
                F.coalesce(F.col("dead_brokers"), F.array().cast("array<int>")),
                F.coalesce(F.col("live_brokers"), F.array().cast("array<int>")),
            ).alias("brokers"),
            F.col("session_lost_brokers"),
            F.col("session_lost_ms"),
        ),
    )
    return records.where(F.col("ts").isNotNull()).select(
        *(["cluster"] if "cluster" in records.columns else []),
        "ts",
        F.coalesce(F.col("controller_epoch"), F.lit(-1)).alias("epoch"),
        F.coalesce(F.col("seq"), F.lit(-1)).alias("seq"),
        "controller_id",
        topic.alias("topic"),
        partition.alias("partition"),
        state.cast("int").alias("state"),
        soft_leader.alias("soft_leader"),
        "leader_before",
        "leader_after",
        (has_isr & (F.size(F.array_except("isr_before", "isr_after")) > 0)).alias("isr_shrink"),
        (has_isr & (F.size(F.array_except("isr_after", "isr_before")) > 0)).alias("isr_expand"),
        extra.alias("extra"),
    )


#: What the readers of the rare kinds' rows use (``extra`` and the common columns they name): a large
#: run caches only these. The rest (the state, the soft leader, the ISR comparisons) is for the walk
#: and the partition-day aggregate, which read the bulk; an election is one record in eight. On the
#: benchmark history's first ten compacted days (warm Spark Connect server, alternated with every
#: column cached, three rounds, load 3.9-4.5) a recompute took 62.2-69.9 server CPU-s against 70.4-78.1.
RARE_COLUMNS = ("ts", "epoch", "seq", "topic", "partition", "leader_before", "leader_after", "extra")


def rare_rows(events: DataFrame) -> DataFrame:
    """The rows of :func:`prepare_events`'s ``events`` whose ``extra`` is set, :data:`RARE_COLUMNS` only."""
    cluster = ["cluster"] if "cluster" in events.columns else []
    return events.where(F.col("extra").isNotNull()).select(*cluster, *RARE_COLUMNS)


def prepare_rare(records: DataFrame) -> DataFrame:
    """:func:`rare_rows` of the records, from a read of their own.

    For compacted (Parquet) input: a large run reads the bulk without ``extra`` (so the rare kinds'
    columns, above all ``event_id``, a distinct string on every record and about half a compacted
    day's bytes, are not decoded for every row, and no struct is built) and reads these rows apart;
    the kind filter is pushed into the Parquet reader, whose days are sorted by kind
    (``compaction.SORT_ORDER``). JSON input is parsed once instead: a second parse costs more."""
    return rare_rows(prepare_events(records.where(F.col("kind").isin(*EXTRA_KINDS))))


def rare(events: DataFrame, kind: str) -> DataFrame:
    """Return the events of one of the ``extra`` kinds with the struct's fields as columns, plus ``day``."""
    return events.where(F.col("extra.kind") == kind).select(
        *[c for c in events.columns if c != "extra"], "extra.*", day_of(F.col("ts")).alias("day")
    )


# --- 2. inventory ----------------------------------------------------------------------------------


def partition_days(events: DataFrame) -> DataFrame:
    """One row per (partition, day) seen in any record: the facts three metrics need from the bulk.

    Most records of a troubled cluster are ISR changes that move nobody's leadership; they matter
    only as ISR shrink/expand counts, as proof a partition exists, and as the earliest word on its
    leader. One aggregation over the cache answers all three, instead of three scans of it.

    Columns: ``shrinks``, ``expands``, ``min_ts`` (the day's first record), ``first_ts`` (its first
    record naming a leader) and ``first_leader_before`` (what that record says the leader was before).
    """
    keyed = F.col("topic").isNotNull() & F.col("partition").isNotNull()
    names_leader = F.when((F.col("leader_before") >= 0) | (F.col("leader_after") >= 0), F.col("ts"))
    return (
        events.where(keyed)
        .groupBy(*PARTITION_KEYS, day_of(F.col("ts")).alias("day"))
        .agg(
            F.sum(F.col("isr_shrink").cast("int")).cast("long").alias("shrinks"),
            F.sum(F.col("isr_expand").cast("int")).cast("long").alias("expands"),
            F.min("ts").alias("min_ts"),
            F.min(names_leader).alias("first_ts"),
            F.min_by("leader_before", names_leader).alias("first_leader_before"),
        )
    )


def partition_inventory(events: DataFrame, days: DataFrame, known: DataFrame | None = None) -> DataFrame:
    """Return every partition seen (cluster, topic, partition): in any record, snapshot or checkpoint.

    Availability divides by the number of partitions a topic has, and most partitions of a healthy
    topic never appear in a day's records; failover snapshots name them all. ``days`` is
    :func:`partition_days`.
    """
    named = days.select(*PARTITION_KEYS)
    entities = rare(events, R.KIND_STATE_SNAPSHOT).select("cluster", F.explode("snapshot_entities").alias("entity"))
    pattern = r"^(.+)-(\d+)$"
    from_snapshots = entities.select(
        "cluster",
        F.regexp_extract("entity", pattern, 1).alias("topic"),
        F.regexp_extract("entity", pattern, 2).alias("p"),
    ).where((F.col("topic") != "") & (F.col("p") != ""))
    parts = named.unionByName(from_snapshots.select("cluster", "topic", F.col("p").try_cast("int").alias("partition")))
    if known is not None:
        parts = parts.unionByName(known.select(*PARTITION_KEYS))
    return parts.distinct()


def partition_keys_are_unique(inventory: DataFrame) -> bool:
    """Return whether the 64-bit partition hash has no collision among ``inventory``'s partitions."""
    row = inventory.select(
        F.count(F.lit(1)).alias("n"), F.countDistinct(F.xxhash64(*PARTITION_KEYS)).alias("keys")
    ).first()
    return row is None or row["n"] == row["keys"]


# --- 3. the per-partition walk ----------------------------------------------------------------------


def leadership_stream(events: DataFrame, days: DataFrame, seeds: DataFrame | None = None) -> DataFrame:
    """Return the records that say something about a partition's leader, plus seeds.

    Two kinds of seeds sort before the records they precede (negative epoch on equal timestamps):

    * checkpoint seeds (``seeds``, from :func:`checkpoint_partitions` of an earlier run) with each
      partition's state at the start of the window;
    * "first leader" seeds, placed before a partition's first record: the leader that the earliest
      record naming one says the partition had *before* it (``leader_before``), so that a run
      without a checkpoint still counts leaders from the start.

    Soft records that keep the leader (an ISR change with ``leader_after == leader_before``, most of
    a flapping cluster's history) say nothing new and are left out: the walk is the one sort in the
    job, and they would be most of its rows.
    """
    soft = F.col("soft_leader")
    moves = soft.isNotNull() & ~soft.eqNullSafe(F.col("leader_before"))
    keyed = F.col("topic").isNotNull() & F.col("partition").isNotNull()
    stream = events.where(keyed & (F.col("state").isNotNull() | moves)).select(
        *PARTITION_KEYS, "ts", "epoch", "seq", "state", "soft_leader", "leader_before", "leader_after"
    )
    # Placed before the partition's first record (not at the record that names the leader): a
    # partition whose history starts with "went offline" still had that leader until then.
    earliest = (
        days.groupBy(*PARTITION_KEYS)
        .agg(F.min("min_ts").alias("ts"), F.min_by("first_leader_before", "first_ts").alias("leader"))
        .where(F.col("leader") >= 0)
    )
    stream = stream.unionByName(
        earliest.select(
            *PARTITION_KEYS,
            "ts",
            F.lit(-2).cast("long").alias("epoch"),
            F.lit(-2).cast("long").alias("seq"),
            F.lit(None).cast("int").alias("state"),
            F.col("leader").cast("int").alias("soft_leader"),
            F.col("leader").cast("int").alias("leader_before"),
            F.lit(None).cast("int").alias("leader_after"),
        )
    )
    if seeds is not None:
        stream = stream.unionByName(
            seeds.where(F.col("state").isNotNull()).select(
                *PARTITION_KEYS,
                F.col("state_ms").alias("ts"),
                F.lit(-3).cast("long").alias("epoch"),
                F.lit(-3).cast("long").alias("seq"),
                F.col("state").cast("int").alias("state"),
                F.lit(None).cast("int").alias("soft_leader"),
                F.when(F.col("state") == LEADERLESS, F.col("cause_broker")).cast("int").alias("leader_before"),
                F.when(F.col("state") == LED, F.col("leader"))
                .otherwise(F.lit(R.NO_LEADER))
                .cast("int")
                .alias("leader_after"),
            )
        )
    return stream


def walk_partitions(stream: DataFrame, hashed_key: bool = True) -> DataFrame:
    """Walk each partition's records in order; keep the rows later steps need, with the running state.

    Added columns: ``state`` (carried forward: the partition's state after the row), ``leader`` (the
    effective leader after the row, -1 when leaderless or deleted), ``prev_leader``, ``prev_state``,
    ``next_leader_before``, ``first``/``last`` (row position) and ``boundary`` (the state changed).
    Only boundary, leader-change, first and last rows are returned.

    With ``hashed_key`` the window partitions by ``pkey`` (see the module docstring); without it, by
    the three key columns (the fallback when the hash collides).
    """
    keyed = stream.withColumn("pkey", F.xxhash64(*PARTITION_KEYS)) if hashed_key else stream
    by = ["pkey"] if hashed_key else list(PARTITION_KEYS)
    w = Window.partitionBy(*by).orderBy("ts", "epoch", "seq")
    running = w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    carried = F.last("state", ignorenulls=True).over(running)
    walked = keyed.select(
        "*",
        carried.alias("carried"),
        F.lead("leader_before").over(w).alias("next_leader_before"),
        F.lag("ts").over(w).isNull().alias("first"),
        F.lead("ts").over(w).isNull().alias("last"),
    )
    state = F.col("carried")
    soft = F.col("soft_leader")
    # A soft leader counts only while the partition is led (or before anything says otherwise).
    leader = (
        F.when(F.col("state").isNotNull() & (F.col("state") == LED), F.col("leader_after"))
        .when(F.col("state").isNotNull(), F.lit(R.NO_LEADER))
        .when(state.isNull() | (state == LED), soft)
        .otherwise(F.lit(R.NO_LEADER))
    )
    with_leader = walked.select(
        *PARTITION_KEYS,
        *(["pkey"] if hashed_key else []),
        "ts",
        "epoch",
        "seq",
        "leader_before",
        "next_leader_before",
        "first",
        "last",
        state.alias("state"),
        leader.alias("leader"),
    )
    compared = with_leader.select(
        "*",
        F.lag("leader").over(w).alias("prev_leader"),
        F.lag("state").over(w).alias("prev_state"),
    )
    boundary = F.col("state").isNotNull() & (F.col("prev_state").isNull() | (F.col("state") != F.col("prev_state")))
    changed = ~F.col("leader").eqNullSafe(F.col("prev_leader"))
    return compared.withColumn("boundary", boundary).where(F.col("boundary") | changed | F.col("first") | F.col("last"))


def unavailability_intervals(walked: DataFrame, hashed_key: bool = True) -> DataFrame:
    """Return one row per leaderless interval: from a boundary into LEADERLESS to the next boundary.

    ``end_ms`` is null while the interval is open; ``end_reason`` is ``elected`` or ``deleted``.
    ``cause_broker`` is the leader the partition lost: the record's ``leader_before``, else the
    leader it had just before, else the next record's ``leader_before`` (Kafka writes the Offline
    transition before the ISR update that names the lost leader).
    """
    by = ["pkey"] if hashed_key else list(PARTITION_KEYS)
    w = Window.partitionBy(*by).orderBy("ts", "epoch", "seq")
    boundaries = walked.where(F.col("boundary"))
    ends = boundaries.select(
        "*",
        F.lead("ts").over(w).alias("end_ms"),
        F.lead("state").over(w).alias("next_state"),
    )
    return ends.where(F.col("state") == LEADERLESS).select(
        *PARTITION_KEYS,
        F.col("ts").alias("start_ms"),
        "end_ms",
        (F.col("end_ms") - F.col("ts")).alias("duration_ms"),
        F.coalesce(
            non_negative(F.col("leader_before")),
            non_negative(F.col("prev_leader")),
            non_negative(F.col("next_leader_before")),
        ).alias("cause_broker"),
        F.when(F.col("next_state") == LED, F.lit("elected"))
        .when(F.col("next_state") == GONE, F.lit("deleted"))
        .alias("end_reason"),
    )


# A broker death's partition records follow its broker_change record within one controller event;
# a minute is far more than the longest event and far less than a broker's restart.
LOSS_MATCH_MS = 60_000.0


def session_losses(special: DataFrame) -> DataFrame:
    """One row per broker whose ZooKeeper session expired: when the controller noticed, when it was lost."""
    changes = special.where((F.col("extra.kind") == R.KIND_BROKER_CHANGE) & F.col("extra.session_lost_ms").isNotNull())
    return changes.select(
        "cluster",
        F.explode("extra.session_lost_brokers").alias("broker"),
        F.col("ts").alias("detected_ms"),
        F.col("extra.session_lost_ms").alias("lost_ms"),
    )


def with_estimated_starts(intervals: DataFrame, losses: DataFrame, carried: DataFrame | None = None) -> DataFrame:
    """Add when each outage really started, next to when the controller detected it (``start_ms``).

    ``estimated_start_ms``: for an interval whose cause broker died (its session expired within
    :data:`LOSS_MATCH_MS` before the interval was detected), the controller's estimate of the session's
    loss, never after the detection; null when the detected start is the real one (a controlled
    shutdown moves the leader itself, an election that failed is seen as it happens).
    ``outage_start_ms``/``outage_ms`` are the start and duration the daily figures use: the estimate
    when there is one, else the detected start.

    ``carried`` (a checkpoint's partitions, :func:`checkpoint_partitions`) gives the estimate of an
    interval that was already open at the checkpoint: the loss that dated it is before the cut.
    """
    if carried is not None:
        known = carried.where(F.col("estimated_ms").isNotNull()).select(
            *PARTITION_KEYS, F.col("state_ms").alias("start_ms"), F.col("estimated_ms").alias("carried_ms")
        )
        intervals = intervals.join(known, [*PARTITION_KEYS, "start_ms"], "left")
    else:
        intervals = intervals.withColumn("carried_ms", F.lit(None).cast("double"))
    # The losses are few (one per dead broker): each broker's, as one array, go to every task, and
    # each interval picks its latest match from its cause broker's array. No shuffle of the intervals
    # (grouping the joined pairs back into intervals cost a shuffle of every interval's columns).
    per_broker = losses.groupBy("cluster", "broker").agg(
        F.collect_list(F.struct("detected_ms", "lost_ms")).alias("losses")
    )
    i, loss = intervals.alias("i"), per_broker.alias("l")
    matched = i.join(
        F.broadcast(loss),
        (F.col("i.cluster") == F.col("l.cluster")) & (F.col("i.cause_broker") == F.col("l.broker")),
        "left",
    )
    detected = F.col("i.start_ms")
    candidates = F.filter(
        F.col("l.losses"),
        lambda lost: (lost["detected_ms"] <= detected) & (detected - lost["detected_ms"] <= F.lit(LOSS_MATCH_MS)),
    )
    # The latest detection wins (structs compare field by field: detected_ms first).
    lost_ms = F.array_max(candidates)["lost_ms"]
    estimated = matched.select(
        *[F.col(f"i.{c}") for c in intervals.columns if c != "carried_ms"],
        # least() skips nulls: without a loss there is no estimate, not the detected start.
        F.coalesce(
            F.col("i.carried_ms"),
            F.when(lost_ms.isNotNull(), F.least(lost_ms, F.col("i.start_ms"))),
        ).alias("estimated_start_ms"),
    )
    start = F.coalesce(F.col("estimated_start_ms"), F.col("start_ms"))
    return estimated.select("*", start.alias("outage_start_ms"), (F.col("end_ms") - start).alias("outage_ms"))


def overlapping(intervals: DataFrame, window: ReportWindow, start: str = "start_ms", end: str = "end_ms") -> DataFrame:
    """Keep rows whose ``[start, end)`` overlaps what the run counts (a null end is still open)."""
    return intervals.where(
        (F.col(start) < F.lit(window.end_ms)) & (F.col(end).isNull() | (F.col(end) > F.lit(window.counted_from_ms)))
    )


# --- 10. checkpoints ----------------------------------------------------------------------------------------


def checkpoint_partitions(walked: DataFrame, intervals: DataFrame, inventory: DataFrame) -> DataFrame:
    """Each known partition's state at the end of the window: the seed of the next run.

    Leaderless partitions keep their interval's start (``state_ms``), estimated start
    (``estimated_ms``) and cause, so an outage that crosses the cut (midnight, or a cursor run's
    end) is one interval with its true starts, not two. ``intervals`` has the estimated starts.
    """
    last = walked.where(F.col("last")).select(
        *PARTITION_KEYS,
        "state",
        "leader",
        F.col("ts").alias("last_ms"),
    )
    open_intervals = intervals.where(F.col("end_ms").isNull()).select(
        *PARTITION_KEYS,
        F.col("start_ms").alias("open_start_ms"),
        F.col("cause_broker"),
        F.col("estimated_start_ms").alias("open_estimated_ms"),
    )
    leaderless = F.col("state") == LEADERLESS
    return (
        inventory.join(last, list(PARTITION_KEYS), "left")
        .join(open_intervals, list(PARTITION_KEYS), "left")
        .select(
            *PARTITION_KEYS,
            F.col("state").cast("int").alias("state"),
            F.when(leaderless, F.lit(R.NO_LEADER)).otherwise(F.col("leader")).cast("int").alias("leader"),
            F.when(leaderless, F.coalesce("open_start_ms", "last_ms")).otherwise(F.col("last_ms")).alias("state_ms"),
            F.when(leaderless, F.col("cause_broker")).cast("int").alias("cause_broker"),
            F.when(leaderless, F.col("open_estimated_ms")).cast("double").alias("estimated_ms"),
        )
    )


def checkpoint_controller(epochs: DataFrame) -> DataFrame:
    """The last controller epoch of each cluster, with its controller and last record time."""
    w = Window.partitionBy("cluster").orderBy(F.desc("epoch"))
    return (
        epochs.where(F.col("last_ms").isNotNull())
        .withColumn("n", F.row_number().over(w))
        .where(F.col("n") == 1)
        .select("cluster", "epoch", "controller_id", "last_ms")
    )


def checkpoint_reassignments(pairs: DataFrame) -> DataFrame:
    """Reassignments still running at the end of the window."""
    return pairs.where(F.col("status") == "in_progress").select(
        *PARTITION_KEYS, "started_ms", "action_id", "origin_replicas", "target_replicas"
    )


# --- output helpers ---------------------------------------------------------------------------------------


def with_dates(df: DataFrame, day_column: str = "day") -> DataFrame:
    """Replace an epoch-day column by a ``date`` column of the same name."""
    return df.withColumn(day_column, F.date_from_unix_date(F.col(day_column)))


def minute_timestamps(df: DataFrame) -> DataFrame:
    """Replace the epoch-minute column by a UTC timestamp ``minute``."""
    return df.withColumn("minute", F.timestamp_millis(F.col("minute") * MINUTE_MS))
