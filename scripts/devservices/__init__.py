"""Private ZooKeeper and Redis processes for development, tests, benchmarks and the demo.

Why this exists: every developer, test session and newcomer needs *real* ZooKeeper and Redis, but
must never touch the machine's system services. This module starts private instances on loopback
ports with data and logs under a directory of ours (``var/`` by default), records their pids, and
stops only what it started.

It imports nothing from the project but ``workers.local_processes`` (free ports, and pid files that
record each process's start time, so a reused pid is never signalled). ``scripts/services``, the
pytest fixtures and the benchmarks share it.

One module a job: ``paths`` (defaults), ``process`` (``ManagedProcess``, errors), ``zookeeper``,
``redis_server``, ``spark``, ``postgres``, ``service_set`` (``ServiceSet``, ``temporary_services``,
Debian packages) and ``cli`` (``scripts/services``). This package re-exports what its users import.

ZooKeeper is run straight from its jars (Debian's ``zookeeper`` package puts them in
``/usr/share/java``; ``ZK_HOME`` points at any other install, e.g. Homebrew's ``libexec``), with
``java`` from ``PATH`` or ``JAVA_HOME``. Redis is ``redis-server`` from ``PATH`` (or ``REDIS_SERVER``).
"""

from __future__ import annotations

from scripts.devservices.cli import SERVICE_NAMES, main
from scripts.devservices.paths import (
    DEFAULT_PG_PORT,
    DEFAULT_REDIS_PORT,
    DEFAULT_SPARK_CONNECT_PORT,
    DEFAULT_VAR,
    DEFAULT_ZK_PORT,
    REPO_ROOT,
)
from scripts.devservices.postgres import PostgresServer, postgres_bin_dir, unprivileged_user
from scripts.devservices.process import ManagedProcess, ServiceError, java_binary, process_cpu_seconds
from scripts.devservices.redis_server import RedisServer, redis_binary
from scripts.devservices.service_set import (
    ServiceSet,
    default_service_set,
    install_debian_packages,
    missing_debian_packages,
    temporary_services,
)
from scripts.devservices.spark import CONNECT_SERVER_CLASS, SparkConnectServer, pyspark_home
from scripts.devservices.zookeeper import ZooKeeperServer, four_letter_word, zookeeper_classpath
from workers.local_processes import free_port, port_open

__all__ = [
    "CONNECT_SERVER_CLASS",
    "DEFAULT_PG_PORT",
    "DEFAULT_REDIS_PORT",
    "DEFAULT_SPARK_CONNECT_PORT",
    "DEFAULT_VAR",
    "DEFAULT_ZK_PORT",
    "REPO_ROOT",
    "SERVICE_NAMES",
    "ManagedProcess",
    "PostgresServer",
    "RedisServer",
    "ServiceError",
    "ServiceSet",
    "SparkConnectServer",
    "ZooKeeperServer",
    "default_service_set",
    "four_letter_word",
    "free_port",
    "install_debian_packages",
    "java_binary",
    "main",
    "missing_debian_packages",
    "port_open",
    "postgres_bin_dir",
    "process_cpu_seconds",
    "pyspark_home",
    "redis_binary",
    "temporary_services",
    "unprivileged_user",
    "zookeeper_classpath",
]
