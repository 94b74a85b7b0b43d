"""The metrics of the analytics job, from the walk's results to the result tables.

``transforms`` turns records into each partition's leadership history and its outage intervals (the
one expensive step); this module aggregates those, and the rare record kinds, into what the pages
show: outages per day, elections, leaders per broker, failovers, reassignments and ISR flapping.
Same rules as there: Catalyst expressions only, no Python per row. ``docs/analytics.md`` defines
each metric.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from workers.analytics import records as R
from workers.analytics.transforms import (
    DAY_MS,
    MINUTE_MS,
    PARTITION_KEYS,
    ReportWindow,
    day_of,
    day_start,
    in_window,
    non_negative,
    rare,
)

# --- 4. unavailability per day ----------------------------------------------------------------------


def outage_facts(intervals: DataFrame, window: ReportWindow) -> DataFrame:
    """Spread intervals over days: one row per (interval, day) with the facts that day owns.

    Intervals start at ``outage_start_ms`` (:func:`with_estimated_starts`: the estimated loss of a
    dead broker's session where there is one, else the detected start).

    * ``outages``: 1 on the day the interval started;
    * ``recoveries``/``recovery_ms``: 1 and the whole duration on the day a leader was elected, so
      a day's MTTR is final once that day is over (an interval can start on an earlier day);
    * ``leaderless_ms``: the part of the interval inside that day (open intervals run to the
      window's effective end).
    """
    start = F.col("outage_start_ms")
    # An interval detected before the cursor was counted up to it by the earlier run; one detected
    # after it was unknown then, so it counts from its (estimated) start, within the window's days.
    lower = F.when(F.col("start_ms") < F.lit(float(window.counted_from_ms)), F.lit(float(window.counted_from_ms)))
    clip_start = F.greatest(start, F.coalesce(lower, F.lit(float(window.start_ms))))
    clip_end = F.least(
        F.coalesce(F.col("end_ms"), F.lit(float(window.effective_end_ms))), F.lit(float(window.effective_end_ms))
    )
    spread = intervals.select(
        "*",
        F.when(
            clip_end > clip_start,
            F.sequence(day_of(clip_start), day_of(clip_end - F.lit(0.001))),
        ).alias("days"),
        clip_start.alias("clip_start"),
        clip_end.alias("clip_end"),
    )
    leaderless = spread.select("*", F.explode("days").alias("day")).select(
        "*",
        (
            F.least(F.col("clip_end"), day_start(F.col("day") + 1))
            - F.greatest(F.col("clip_start"), day_start(F.col("day")))
        ).alias("leaderless_ms"),
        F.lit(0).alias("outages"),
        F.lit(0).alias("recoveries"),
        F.lit(0.0).alias("recovery_ms"),
    )
    # Counted once: by the run that detected it (at or after the cursor), on its start's day.
    first_day = (start >= F.lit(float(window.start_ms))) & (start < F.lit(float(window.end_ms)))
    started = intervals.where(first_day & (F.col("start_ms") >= F.lit(float(window.counted_from_ms)))).select(
        "*",
        day_of(start).alias("day"),
        F.lit(0.0).alias("leaderless_ms"),
        F.lit(1).alias("outages"),
        F.lit(0).alias("recoveries"),
        F.lit(0.0).alias("recovery_ms"),
    )
    recovered = intervals.where(in_window(F.col("end_ms"), window) & (F.col("end_reason") == "elected")).select(
        "*",
        day_of(F.col("end_ms")).alias("day"),
        F.lit(0.0).alias("leaderless_ms"),
        F.lit(0).alias("outages"),
        F.lit(1).alias("recoveries"),
        F.col("outage_ms").alias("recovery_ms"),
    )
    columns = [*PARTITION_KEYS, "cause_broker", "day", "leaderless_ms", "outages", "recoveries", "recovery_ms"]
    return leaderless.select(*columns).unionByName(started.select(*columns)).unionByName(recovered.select(*columns))


def _outage_aggregates() -> list[Column]:
    return [
        F.sum("outages").cast("long").alias("outages"),
        F.sum("recoveries").cast("long").alias("recoveries"),
        F.sum("leaderless_ms").alias("leaderless_ms"),
        F.sum("recovery_ms").alias("recovery_ms"),
    ]


def _with_mttr(df: DataFrame) -> DataFrame:
    return df.withColumn("mttr_ms", F.when(F.col("recoveries") > 0, F.col("recovery_ms") / F.col("recoveries")))


def partition_daily(facts: DataFrame) -> DataFrame:
    """Outages, recoveries, MTTR and leaderless time per partition and day (partitions with any)."""
    return _with_mttr(facts.groupBy(*PARTITION_KEYS, "day").agg(*_outage_aggregates()))


def broker_daily(facts: DataFrame) -> DataFrame:
    """The same per broker whose loss caused the outage (``broker`` null when unknown)."""
    return _with_mttr(facts.groupBy("cluster", F.col("cause_broker").alias("broker"), "day").agg(*_outage_aggregates()))


def topic_daily(facts: DataFrame, inventory: DataFrame, window: ReportWindow) -> DataFrame:
    """Availability per topic and day for every known topic, with the topic's outage figures.

    ``availability = 1 - leaderless partition-seconds / (partitions * seconds of the day covered)``;
    a day that is still running counts only up to the window's effective end.
    """
    spark = facts.sparkSession
    days = spark.range(window.start_day, window.end_day + 1).select(F.col("id").cast("int").alias("day"))
    topics = inventory.groupBy("cluster", "topic").agg(F.count(F.lit(1)).alias("partitions"))
    grid = topics.crossJoin(days)
    stats = facts.groupBy("cluster", "topic", "day").agg(*_outage_aggregates())
    start_of_day = day_start(F.col("day"))
    covered_ms = F.least(start_of_day + F.lit(DAY_MS), F.lit(window.effective_end_ms)) - F.greatest(
        start_of_day, F.lit(window.start_ms)
    )
    joined = grid.join(stats, ["cluster", "topic", "day"], "left").select(
        "cluster",
        "topic",
        "day",
        "partitions",
        F.coalesce("outages", F.lit(0)).alias("outages"),
        F.coalesce("recoveries", F.lit(0)).alias("recoveries"),
        F.coalesce("leaderless_ms", F.lit(0.0)).alias("leaderless_ms"),
        F.coalesce("recovery_ms", F.lit(0.0)).alias("recovery_ms"),
        covered_ms.alias("covered_ms"),
    )
    availability = F.when(
        F.col("covered_ms") > 0,
        F.greatest(F.lit(0.0), 1.0 - F.col("leaderless_ms") / (F.col("partitions") * F.col("covered_ms"))),
    )
    return _with_mttr(joined.where(F.col("covered_ms") > 0).withColumn("availability", availability))


# --- 5. elections -------------------------------------------------------------------------------------


def elections_daily(events: DataFrame, window: ReportWindow) -> DataFrame:
    """Count elections per day, strategy and cause (unknown when a record leaves either out)."""
    return (
        rare(events, R.KIND_ELECTION)
        .where(in_window(F.col("ts"), window))
        .groupBy(
            "cluster",
            "day",
            F.coalesce("strategy", F.lit("unknown")).alias("strategy"),
            F.coalesce("cause", F.lit("unknown")).alias("cause"),
        )
        .agg(
            F.count(F.lit(1)).alias("elections"),
            F.sum(F.col("unclean").cast("int")).cast("long").alias("unclean"),
        )
    )


#: The unclean-elections table's columns (the Python engine's twin writes the same).
UNCLEAN_COLUMNS = (
    "cluster",
    "ts",
    "day",
    "epoch",
    "topic",
    "partition",
    "strategy",
    "cause",
    "leader_before",
    "leader_after",
    "isr_before",
    "isr_after",
)


def unclean_elections(events: DataFrame, window: ReportWindow) -> DataFrame:
    """List every unclean election (a leader taken from outside the ISR: possible data loss)."""
    elections = rare(events, R.KIND_ELECTION)
    return elections.where(F.col("unclean") & in_window(F.col("ts"), window)).select(*UNCLEAN_COLUMNS)


# --- 6. leaders per broker over time --------------------------------------------------------------------


def leader_deltas(walked: DataFrame, window: ReportWindow) -> DataFrame:
    """Turn leader changes into +1/-1 per broker and minute; changes before the window land in the
    minute just before it, which then holds each broker's starting count.

    A partition's first record also says who led it before (``leader_before``): that leader counts
    from the start, so a first run without a checkpoint still knows most leaders.
    """
    initial_minute = window.counted_from_ms // MINUTE_MS - 1
    minute = F.greatest(F.floor(F.col("ts") / MINUTE_MS), F.lit(initial_minute)).cast("long")
    prev = F.when(F.col("first"), non_negative(F.col("leader_before"))).otherwise(F.col("prev_leader"))
    changed = F.col("first") | ~F.col("leader").eqNullSafe(F.col("prev_leader"))
    delta = T.StructType(
        [
            T.StructField("broker", T.IntegerType()),
            T.StructField("minute", T.LongType()),
            T.StructField("delta", T.IntegerType()),
        ]
    )
    entries = F.array(
        F.struct(
            F.when(F.col("first"), prev).cast("int").alias("broker"),
            F.lit(initial_minute).cast("long").alias("minute"),
            F.lit(1).alias("delta"),
        ),
        F.struct(prev.cast("int").alias("broker"), minute.alias("minute"), F.lit(-1).alias("delta")),
        F.struct(F.col("leader").cast("int").alias("broker"), minute.alias("minute"), F.lit(1).alias("delta")),
    ).cast(T.ArrayType(delta))
    exploded = (
        walked.where(changed & (F.col("ts") < F.lit(window.end_ms)))
        .select("cluster", F.explode(F.filter(entries, lambda e: e["broker"] >= 0)).alias("d"))
        .select("cluster", "d.broker", "d.minute", "d.delta")
    )
    return exploded.groupBy("cluster", "broker", "minute").agg(F.sum("delta").cast("long").alias("delta"))


def known_brokers(events: DataFrame, deltas: DataFrame, seeds: DataFrame | None = None) -> DataFrame:
    """Every broker the cluster is known to have: ever a leader, named by a broker change or
    failover record, or carried in the checkpoint.

    Leader skew divides by the number of brokers, so a broker that leads nothing (new, or back
    from a crash before the rebalance) must still count, with zero leaders, and must count the
    same whether the window was computed in one run or day by day.
    """
    named = (
        events.where(F.col("extra.kind").isin(R.KIND_BROKER_CHANGE, R.KIND_FAILOVER))
        .select("cluster", F.explode("extra.brokers").alias("broker"))
        .where(F.col("broker") >= 0)
    )
    brokers = deltas.select("cluster", "broker").unionByName(named.select("cluster", F.col("broker").cast("int")))
    if seeds is not None:
        brokers = brokers.unionByName(seeds.select("cluster", F.col("broker").cast("int")))
    return brokers.distinct()


def leader_counts(deltas: DataFrame, brokers: DataFrame, window: ReportWindow) -> DataFrame:
    """Return each broker's leader count at the end of every minute of the window.

    Running sums of the per-minute deltas give the count after each minute with a change, which
    holds until the broker's next change: each such interval is spread over its minutes (clipped to
    the window). Every known broker gets a zero change just before the window, so one that never led
    counts 0 and none starts with a gap. Rows are brokers x minutes, never partitions x minutes, and
    no sort of them: only the changes are ordered (a grid of every broker and minute carried forward
    by a window function sorted those rows too).
    """
    first_minute = window.counted_from_ms // MINUTE_MS
    # Exclusive; a started minute is shown.
    last_minute = max(first_minute + 1, -(-window.effective_end_ms // MINUTE_MS))
    initial = brokers.select(
        "cluster", "broker", F.lit(first_minute - 1).cast("long").alias("minute"), F.lit(0).cast("long").alias("delta")
    )
    changes = deltas.select("cluster", "broker", "minute", "delta").unionByName(initial)
    # Changes land at or after the minute before the window (leader_deltas clamps them there). When a
    # broker's change shares the seed's minute, whichever row comes first spans no minute (its next
    # row starts there) and the second's running sum holds both.
    by_broker = Window.partitionBy("cluster", "broker").orderBy("minute")
    held = changes.select(
        "cluster",
        "broker",
        "minute",
        F.sum("delta").over(by_broker.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("leaders"),
        F.coalesce(F.lead("minute").over(by_broker), F.lit(last_minute)).alias("until"),
    )
    start = F.greatest(F.col("minute"), F.lit(first_minute))
    stop = F.least(F.col("until"), F.lit(last_minute))
    return held.where(stop > start).select(
        "cluster",
        "broker",
        F.explode(F.sequence(start, stop - 1)).alias("minute"),
        F.col("leaders").cast("long").alias("leaders"),
    )


def leader_skew(counts: DataFrame) -> DataFrame:
    """Per minute: max, min and mean leaders over the brokers seen, and skew = max / mean (1 = even)."""
    return (
        counts.groupBy("cluster", "minute")
        .agg(
            F.max("leaders").alias("max_leaders"),
            F.min("leaders").alias("min_leaders"),
            F.avg("leaders").alias("mean_leaders"),
            F.count(F.lit(1)).alias("brokers"),
        )
        .withColumn("skew", F.when(F.col("mean_leaders") > 0, F.col("max_leaders") / F.col("mean_leaders")))
    )


# --- 7. controller failovers --------------------------------------------------------------------------


def controller_epochs(events: DataFrame, seeds: DataFrame | None = None) -> DataFrame:
    """Per controller epoch: its controller, first and last record (seeds add the last epoch seen)."""
    epochs = (
        events.where(F.col("epoch") >= 0)
        .groupBy("cluster", "epoch")
        .agg(
            F.max("controller_id").alias("controller_id"),
            F.min("ts").alias("first_ms"),
            F.max("ts").alias("last_ms"),
        )
    )
    if seeds is None:
        return epochs
    seeded = seeds.select("cluster", "epoch", "controller_id", F.lit(None).cast("double").alias("first_ms"), "last_ms")
    return (
        epochs.unionByName(seeded)
        .groupBy("cluster", "epoch")
        .agg(
            F.max("controller_id").alias("controller_id"),
            F.min("first_ms").alias("first_ms"),
            F.max("last_ms").alias("last_ms"),
        )
    )


def failovers(events: DataFrame, epochs: DataFrame, window: ReportWindow) -> DataFrame:
    """One row per controller change whose new epoch began in the window.

    ``gap_ms`` is the time from the old controller's last record to the new one's first: how long
    the cluster had nobody acting. It is negative when the deposed controller kept writing after its
    successor started (it is fenced by the epoch, so those writes failed). ``failover_ms`` is the
    new controller's own ``completed_at_ms - elected_at_ms`` when it wrote a ``failover`` record.
    """
    w = Window.partitionBy("cluster").orderBy("epoch")
    ordered = epochs.select(
        "*",
        F.lag("epoch").over(w).alias("previous_epoch"),
        F.lag("controller_id").over(w).alias("previous_controller_id"),
        F.lag("last_ms").over(w).alias("previous_last_ms"),
    )
    records = (
        rare(events, R.KIND_FAILOVER)
        .groupBy("cluster", "epoch")
        .agg(
            F.min("elected_at_ms").alias("elected_at_ms"),
            F.max("completed_at_ms").alias("completed_at_ms"),
            F.max("duration_ms").alias("duration_ms"),
        )
    )
    changes = ordered.where(F.col("previous_epoch").isNotNull() & in_window(F.col("first_ms"), window))
    return changes.join(records, ["cluster", "epoch"], "left").select(
        "cluster",
        F.col("epoch").alias("controller_epoch"),
        "controller_id",
        "previous_epoch",
        "previous_controller_id",
        "previous_last_ms",
        "first_ms",
        (F.col("first_ms") - F.col("previous_last_ms")).alias("gap_ms"),
        "elected_at_ms",
        "completed_at_ms",
        F.coalesce(F.col("completed_at_ms") - F.col("elected_at_ms"), F.col("duration_ms")).alias("failover_ms"),
    )


# --- 8. reassignments -----------------------------------------------------------------------------------


def reassignment_rows(events: DataFrame, seeds: DataFrame | None = None) -> DataFrame:
    """The reassignment records (plus still-open ones from a checkpoint) in one shape."""
    rows = (
        rare(events, R.KIND_REASSIGNMENT)
        .where(F.col("topic").isNotNull() & F.col("partition").isNotNull() & F.col("phase").isNotNull())
        .select(*PARTITION_KEYS, "ts", "epoch", "seq", "phase", "action_id", "origin_replicas", "target_replicas")
    )
    if seeds is not None:
        rows = rows.unionByName(
            seeds.select(
                *PARTITION_KEYS,
                F.col("started_ms").alias("ts"),
                F.lit(-1).cast("long").alias("epoch"),
                F.lit(-1).cast("long").alias("seq"),
                F.lit(R.PHASE_STARTED).alias("phase"),
                "action_id",
                "origin_replicas",
                "target_replicas",
            )
        )
    return rows


def reassignments(rows: DataFrame) -> DataFrame:
    """Pair each ``started`` with the partition's next reassignment record.

    ``status`` is ``completed`` or ``cancelled`` from that record, ``superseded`` when another
    reassignment started first (Kafka replaces a running one), ``in_progress`` when nothing followed.
    Ends without a start (the history began mid-way) are dropped: their duration is unknown.
    """
    w = Window.partitionBy(*PARTITION_KEYS).orderBy("ts", "epoch", "seq")
    paired = rows.select("*", F.lead("phase").over(w).alias("next_phase"), F.lead("ts").over(w).alias("next_ts"))
    next_phase = F.col("next_phase")
    status = (
        F.when(next_phase.isin(R.PHASE_COMPLETED, R.PHASE_CANCELLED), next_phase)
        .when(next_phase == R.PHASE_STARTED, F.lit("superseded"))
        .when(next_phase.isNull(), F.lit("in_progress"))
        .otherwise(F.concat(F.lit("unknown:"), next_phase))
    )
    return (
        paired.where(F.col("phase") == R.PHASE_STARTED)
        .select(
            *PARTITION_KEYS,
            "action_id",
            F.col("ts").alias("started_ms"),
            "next_ts",
            status.alias("status"),
            "origin_replicas",
            "target_replicas",
        )
        .select(
            "*",
            F.when(F.col("status") != "in_progress", F.col("next_ts")).alias("ended_ms"),
        )
        .drop("next_ts")
        .withColumn("duration_ms", F.col("ended_ms") - F.col("started_ms"))
    )


AUDIT_PREFIX = "audit:"


def reassignment_actions(rows: DataFrame) -> DataFrame:
    """Per action (one request, many partitions): partitions, outcome counts, start, end, duration.

    ``ended_ms`` is the last partition's end, and null while any partition is still moving.
    """
    open_count = F.sum(F.when(F.col("status") == "in_progress", 1).otherwise(0))
    # An operator action matched from the audit export (``actions.attribute_reassignments``) is the
    # request; without one, the controller's own request id groups the partitions.
    audit = F.col("audit_action_id")
    key = F.when(audit.isNotNull(), F.concat(F.lit(AUDIT_PREFIX), audit.cast("string"))).otherwise(F.col("action_id"))
    return (
        rows.groupBy("cluster", key.alias("action_id"))
        .agg(
            F.first(audit, ignorenulls=True).alias("audit_action_id"),
            F.first("requested_by", ignorenulls=True).alias("requested_by"),
            F.first("requested_ms", ignorenulls=True).alias("requested_ms"),
            F.first("requested_partitions", ignorenulls=True).alias("requested_partitions"),
            F.count(F.lit(1)).alias("partitions"),
            F.sum(F.when(F.col("status") == R.PHASE_COMPLETED, 1).otherwise(0)).alias("completed"),
            F.sum(F.when(F.col("status") == R.PHASE_CANCELLED, 1).otherwise(0)).alias("cancelled"),
            open_count.alias("in_progress"),
            F.min("started_ms").alias("started_ms"),
            F.max("ended_ms").alias("last_end_ms"),
            F.collect_set("topic").alias("topics"),
        )
        .select(
            "*",
            F.when(F.col("in_progress") == 0, F.col("last_end_ms")).alias("ended_ms"),
        )
        .drop("last_end_ms")
        .withColumn("duration_ms", F.col("ended_ms") - F.col("started_ms"))
        .withColumn("start_delay_ms", F.col("started_ms") - F.col("requested_ms"))
        .withColumn("request_to_end_ms", F.col("ended_ms") - F.col("requested_ms"))
    )


# --- 9. ISR flapping --------------------------------------------------------------------------------


def isr_flapping(days: DataFrame, window: ReportWindow, top: int) -> DataFrame:
    """ISR shrinks and expands per partition and day; the ``top`` partitions per day by flaps.

    ``flaps`` is ``min(shrinks, expands)``: completed out-and-back cycles, which is what flapping
    means; a partition that only shrinks lost a replica rather than flapped. ``days`` is
    :func:`partition_days`.
    """
    counts = days.where(
        (F.col("day") >= window.start_day)
        & (F.col("day") <= window.end_day)
        & ((F.col("shrinks") > 0) | (F.col("expands") > 0))
    ).select(*PARTITION_KEYS, "day", "shrinks", "expands", F.least("shrinks", "expands").alias("flaps"))
    rank_w = Window.partitionBy("cluster", "day").orderBy(
        F.desc("flaps"), F.desc(F.col("shrinks") + F.col("expands")), "topic", "partition"
    )
    return counts.withColumn("rank", F.row_number().over(rank_w)).where(F.col("rank") <= top)
