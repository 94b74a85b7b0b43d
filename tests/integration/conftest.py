"""The Spark Connect server the analytics tests run against: the same kind of server the product uses.

Started once per test session, and only when a test asks for it (starting a JVM costs 15-40 s on a
busy 2-core machine); stopped at the session's end, so no Spark outlives the tests that needed it.
With ``TEST_REUSE_SERVICES=1`` the one ``scripts/services up`` runs is used instead.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from scripts.devservices import SparkConnectServer, default_service_set, free_port
from workers.analytics.job import build_spark


@pytest.fixture(scope="session")
def spark_connect(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkConnectServer]:
    """A Spark Connect server on a free loopback port (``local[2]``: the machine has two cores)."""
    if os.environ.get("TEST_REUSE_SERVICES") == "1":
        reused = default_service_set().spark
        if reused is None or not reused.running():
            pytest.exit("TEST_REUSE_SERVICES=1 but `scripts/services up` runs no Spark Connect server", returncode=4)
        yield reused
        return
    server = SparkConnectServer(
        port=free_port(),
        host="127.0.0.1",
        base_dir=tmp_path_factory.mktemp("spark"),
        master="local[2]",
        driver_memory="2g",
    )
    server.start(timeout=180.0)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def spark(spark_connect: SparkConnectServer) -> Iterator[SparkSession]:
    """A Connect client session; settings as the job sets them, two shuffle partitions for tiny data."""
    session = build_spark(remote=spark_connect.remote, app_name="analytics-tests", shuffle_partitions=2)
    yield session
    session.stop()
