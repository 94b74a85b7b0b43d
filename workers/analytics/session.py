"""The Spark session of an analytics run: a Spark Connect client (the product's way) or a local JVM.

Why a module of its own: how the job reaches Spark (``SPARK_REMOTE``, the warm server of
``scripts/services``; or ``spark-submit``; or a JVM in this process) is independent of what it
computes, and the tests and the benchmark open sessions the same way the product does.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from typing import cast

from pyspark.sql import SparkSession

from workers.analytics.inputs import JobInputError

# The job caches its narrow projection of the history once and scans that cache five times. Spark's
# compressed column cache decides each column's encoding by feeding every value through boxed Scala
# hash maps, which cost more CPU than the smaller cache saves: on the 10-million-record benchmark,
# after warm-up, filling the compressed cache took 117 JVM CPU-s against 108-110 uncompressed
# (docs/analytics.md, "Performance"), and the cache grows only from ~190 MB to ~320 MB.
UNCOMPRESSED_CACHE_CONF = "spark.sql.inMemoryColumnarStorage.compressed"


def build_spark(
    master: str | None = None,
    app_name: str = "kcp-analytics",
    driver_memory: str | None = None,
    shuffle_partitions: int | None = None,
    extra: dict[str, str] | None = None,
    remote: str | None = None,
) -> SparkSession:
    """Return a SparkSession: a Spark Connect client when ``remote`` is given, else an in-process one.

    ``remote`` (``sc://host:port``, e.g. ``SPARK_REMOTE``) is how the product runs: the warm server
    started by ``scripts/services`` (or one in front of a real cluster) does the work and this process
    starts no JVM. Without it, the active session is returned, or one is started (``local[*]`` unless
    ``master`` says otherwise); a local session binds to the loopback interface and has no UI. Under
    ``spark-submit`` the submitter's master, memory and network settings stand unless ``master`` is
    given explicitly.
    """
    if remote:
        return _connect(remote, app_name, shuffle_partitions, extra)
    active = SparkSession.getActiveSession()
    if active is not None and master is None:
        return active
    submitted = master is None and "PYSPARK_GATEWAY_PORT" in os.environ
    local = not submitted and (master or "local[*]").startswith("local")
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.appName(app_name)
    for key, value in SESSION_CONF.items():
        builder = builder.config(key, value)
    if not submitted:
        builder = builder.master(master or "local[*]")
    if local:
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
        )
    if driver_memory and not submitted:
        builder = builder.config("spark.driver.memory", driver_memory)
    for key, value in (extra or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    context = spark.sparkContext
    if spark.conf.get(UNCOMPRESSED_CACHE_CONF, None) is None:  # unless the submitter chose
        spark.conf.set(UNCOMPRESSED_CACHE_CONF, "false")
    if shuffle_partitions:
        spark.conf.set("spark.sql.shuffle.partitions", str(shuffle_partitions))
    elif (context.master or "").startswith("local") and not context.getConf().contains("spark.sql.shuffle.partitions"):
        # Spark's default of 200 is for clusters; on a laptop it turns every small stage into 200 tasks.
        spark.conf.set("spark.sql.shuffle.partitions", str(context.defaultParallelism * 4))
    return spark


# Session settings the job relies on (runtime SQL settings, so a Connect client can set them too).
SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
    "spark.sql.sources.partitionOverwriteMode": "dynamic",
}


class SparkUnavailableError(RuntimeError):
    """The Spark Connect server named by ``SPARK_REMOTE`` does not answer."""


def remote_address(remote: str) -> tuple[str, int]:
    """``(host, port)`` of an ``sc://host[:port][/;params]`` URL (Spark's default port is 15002)."""
    if not remote.startswith("sc://"):
        raise JobInputError(f"SPARK_REMOTE {remote!r} is not a Spark Connect URL (expected sc://host:port)")
    authority = remote.removeprefix("sc://").split("/", 1)[0].split(";", 1)[0]
    host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "15002")
    try:
        return host, int(port)
    except ValueError:
        raise JobInputError(f"SPARK_REMOTE {remote!r} has no valid port") from None


def _connect(remote: str, app_name: str, shuffle_partitions: int | None, extra: dict[str, str] | None) -> SparkSession:
    """A new Spark Connect session: settings are per session on the server, so each client sets its own.

    Always a new one (``create``, not ``getOrCreate``): whoever asks owns it and may stop it, and
    stopping it never closes another caller's session in the same process (a runner's session in
    a worker that also holds one, or a test's).
    """
    host, port = remote_address(remote)
    try:
        socket.create_connection((host, port), timeout=5.0).close()
    except OSError as exc:
        # Fail fast and say what to do: the client would otherwise retry for minutes.
        raise SparkUnavailableError(
            f"no Spark Connect server answers at {remote} ({exc}): start one with `scripts/services up` "
            "(or `scripts/run`), or point SPARK_REMOTE at yours"
        ) from None
    spark = SparkSession.builder.remote(remote).appName(app_name).create()
    settings = dict(SESSION_CONF)
    if spark.conf.get(UNCOMPRESSED_CACHE_CONF, None) is None:  # unless the server was started with a choice
        settings[UNCOMPRESSED_CACHE_CONF] = "false"
    if shuffle_partitions:
        settings["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    elif str(spark.conf.get("spark.master", "")).startswith("local") and spark.conf.get(
        "spark.sql.shuffle.partitions", None
    ) in (None, "200"):
        # A local server on this machine: Spark's 200 shuffle tasks are for clusters.
        settings["spark.sql.shuffle.partitions"] = str((os.cpu_count() or 2) * 4)
    settings.update(extra or {})
    for key, value in settings.items():
        spark.conf.set(key, value)
    return spark


#: A session, or a function that opens one on first need (a run that needs none never connects).
SessionSource = SparkSession | Callable[[], SparkSession]


def resolve(source: SessionSource) -> SparkSession:
    """The session itself, or the one the function opens (a Connect session is no subclass of
    ``pyspark.sql.SparkSession``, so a session is told from a function by its ``read``)."""
    if hasattr(source, "read"):
        return cast(SparkSession, source)
    return source()
