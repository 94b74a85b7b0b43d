"""The job's second input: operator actions exported from the audit table, matched to the controller's records.

``manage.py export_audit`` (``audit_export``) writes ``<actions>/<cluster>/actions-YYYY-MM-DD.jsonl``;
this module reads those files with :data:`ACTION_SCHEMA` (no Django: it runs on Spark executors) and
attributes what the controller did to the operator action that asked for it:

* **reassignments**: the controller's ``reassignment`` records say when each partition's move
  started and ended but not who asked. A partition reassignment is attributed to the action of kind
  ``reassignment`` of the same cluster that lists the partition and was created before the move
  started (allowing :data:`CLOCK_SKEW_MS` for the dashboard's and the controller's clocks) and no
  later than :data:`START_WITHIN_MS` after the action finished writing its request (the controller
  acts on the znode within seconds; a move starting much later belongs to someone else). When
  several qualify, the most recent wins: Kafka replaces a running reassignment with the newer one.
* **preferred elections**: the controller's ``election`` records with strategy ``preferred`` of a
  partition the action submitted, in the same time bounds: per action, how many of its partitions
  were elected and how long after the request the first and the last election came.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

KIND_REASSIGNMENT = "reassignment"
KIND_PREFERRED_ELECTION = "preferred_election"
STRATEGY_PREFERRED = "preferred"
#: Rejected actions never reached ZooKeeper; everything else may have.
NOT_SUBMITTED = ("rejected",)
CLOCK_SKEW_MS = 5_000.0
START_WITHIN_MS = 600_000.0

ACTION_SCHEMA = T.StructType(
    [
        T.StructField("id", T.LongType()),
        T.StructField("cluster", T.StringType()),
        T.StructField("kind", T.StringType()),
        T.StructField("status", T.StringType()),
        T.StructField("username", T.StringType()),
        T.StructField("created_ms", T.DoubleType()),
        T.StructField("started_ms", T.DoubleType()),
        T.StructField("finished_ms", T.DoubleType()),
        T.StructField("duration_ms", T.LongType()),
        T.StructField("controller_epoch", T.LongType()),
        T.StructField("reason", T.StringType()),
        T.StructField(
            "partitions",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("topic", T.StringType()),
                        T.StructField("partition", T.IntegerType()),
                        T.StructField("replicas", T.ArrayType(T.IntegerType())),
                    ]
                )
            ),
        ),
        T.StructField("parameters", T.StringType()),
    ]
)


def action_files(actions_dir: Path | None, clusters: Sequence[str]) -> list[str]:
    """Every exported day file of ``clusters`` (the export already bounds them by retention)."""
    if actions_dir is None:
        return []
    out: list[str] = []
    for cluster in clusters:
        root = actions_dir / cluster
        if root.is_dir():
            out += sorted(str(p) for p in root.iterdir() if p.name.startswith("actions-") and p.suffix == ".jsonl")
    return out


def read_actions(spark: SparkSession, actions_dir: Path | None, clusters: Sequence[str]) -> DataFrame:
    """The exported actions of ``clusters`` (an empty frame with the schema when there are none)."""
    files = action_files(actions_dir, clusters)
    if not files:
        return spark.createDataFrame([], ACTION_SCHEMA)
    # The cluster comes from the file's directory too, but the line carries it: keep the line's.
    return spark.read.schema(ACTION_SCHEMA).option("mode", "PERMISSIVE").json(files).where(F.col("id").isNotNull())


def action_partitions(actions: DataFrame, kind: str) -> DataFrame:
    """One row per (submitted action of ``kind``, partition it names), with the match bounds."""
    submitted = actions.where((F.col("kind") == kind) & ~F.col("status").isin(*NOT_SUBMITTED))
    finished = F.coalesce(F.col("finished_ms"), F.col("started_ms"), F.col("created_ms"))
    return (
        submitted.select(
            "cluster",
            F.col("id").alias("audit_action_id"),
            F.col("username").alias("requested_by"),
            F.col("created_ms").alias("requested_ms"),
            (F.col("created_ms") - F.lit(CLOCK_SKEW_MS)).alias("_from_ms"),
            (finished + F.lit(START_WITHIN_MS)).alias("_to_ms"),
            F.size("partitions").alias("requested_partitions"),
            F.explode("partitions").alias("p"),
        )
        .select("*", F.col("p.topic").alias("topic"), F.col("p.partition").alias("partition"))
        .drop("p")
    )


def _attribute(facts: DataFrame, candidates: DataFrame, time_column: str, key: Sequence[str]) -> DataFrame:
    """Left-join each fact to the latest candidate whose bounds contain ``time_column``."""
    joined = facts.alias("f").join(
        F.broadcast(candidates.alias("a")),
        (F.col("f.cluster") == F.col("a.cluster"))
        & (F.col("f.topic") == F.col("a.topic"))
        & (F.col("f.partition") == F.col("a.partition"))
        & (F.col(f"f.{time_column}") >= F.col("a._from_ms"))
        & (F.col(f"f.{time_column}") <= F.col("a._to_ms")),
        "left",
    )
    w = Window.partitionBy(*[F.col(f"f.{k}") for k in key]).orderBy(
        F.col("a.requested_ms").desc_nulls_last(), F.col("a.audit_action_id").desc_nulls_last()
    )
    return (
        joined.withColumn("_rank", F.row_number().over(w))
        .where(F.col("_rank") == 1)
        .select(
            "f.*",
            F.col("a.audit_action_id"),
            F.col("a.requested_by"),
            F.col("a.requested_ms"),
            F.col("a.requested_partitions"),
        )
    )


def attribute_reassignments(moves: DataFrame, actions: DataFrame) -> DataFrame:
    """``moves`` (``metrics.reassignments``) plus the audit action each belongs to (or nulls).

    Adds ``audit_action_id``, ``requested_by``, ``requested_ms``, ``requested_partitions`` and
    ``start_delay_ms`` (the request to this partition's first reassignment record).
    """
    candidates = action_partitions(actions, KIND_REASSIGNMENT)
    out = _attribute(moves, candidates, "started_ms", ("cluster", "topic", "partition", "started_ms"))
    return out.withColumn("start_delay_ms", F.col("started_ms") - F.col("requested_ms"))


def election_actions(elections: DataFrame, actions: DataFrame) -> DataFrame:
    """Per preferred-election action: partitions asked for, elected, first and last election after it.

    ``elected`` counts distinct partitions with a preferred election attributed to the action;
    ``first_delay_ms``/``last_delay_ms`` are from the request to the first and last of them (null
    when none happened: the controller had not acted, or the preferred replica could not lead).
    """
    candidates = action_partitions(actions, KIND_PREFERRED_ELECTION)
    attributed = _attribute(elections, candidates, "ts", ("cluster", "topic", "partition", "ts", "epoch", "seq"))
    per_action = (
        attributed.where(F.col("audit_action_id").isNotNull())
        .groupBy("cluster", "audit_action_id")
        .agg(
            F.countDistinct("topic", "partition").alias("elected"),
            F.min("ts").alias("first_election_ms"),
            F.max("ts").alias("last_election_ms"),
        )
    )
    asked = candidates.groupBy("cluster", "audit_action_id", "requested_by", "requested_ms").agg(
        F.count(F.lit(1)).alias("requested_partitions")
    )
    return asked.join(per_action, ["cluster", "audit_action_id"], "left").select(
        "cluster",
        "audit_action_id",
        "requested_by",
        "requested_ms",
        "requested_partitions",
        F.coalesce(F.col("elected"), F.lit(0)).cast("long").alias("elected"),
        "first_election_ms",
        "last_election_ms",
        (F.col("first_election_ms") - F.col("requested_ms")).alias("first_delay_ms"),
        (F.col("last_election_ms") - F.col("requested_ms")).alias("last_delay_ms"),
    )
