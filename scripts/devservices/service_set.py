"""The services of one environment (the dev stack, a test session, a benchmark), and installing them."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from scripts.devservices.paths import (
    DEFAULT_PG_PORT,
    DEFAULT_REDIS_PORT,
    DEFAULT_SPARK_CONNECT_PORT,
    DEFAULT_VAR,
    DEFAULT_ZK_PORT,
    REPO_ROOT,
)
from scripts.devservices.postgres import PostgresServer, postgres_bin_dir
from scripts.devservices.process import ServiceError
from scripts.devservices.redis_server import RedisServer
from scripts.devservices.spark import SparkConnectServer
from scripts.devservices.zookeeper import ZooKeeperServer, zookeeper_classpath
from workers.local_processes import free_port


def missing_debian_packages(postgres: bool = False) -> list[str]:
    """Debian packages the stack needs that this machine lacks (``postgresql`` only when asked)."""
    missing = []
    if postgres and postgres_bin_dir() is None:
        missing.append("postgresql")
    try:
        zookeeper_classpath()
    except ServiceError:
        missing.append("zookeeper")
    if not (os.environ.get("REDIS_SERVER") or shutil.which("redis-server")):
        missing.append("redis-server")
    return missing


def install_debian_packages(packages: Sequence[str]) -> None:
    """apt-get install what is missing (as root, or through sudo), without starting system services."""
    if not packages:
        return
    if not shutil.which("apt-get"):
        raise ServiceError(
            "missing " + ", ".join(packages) + " and this is not a Debian/Ubuntu machine: see README "
            "(macOS: `brew install zookeeper redis`, then ZK_HOME=$(brew --prefix zookeeper)/libexec)"
        )
    prefix: list[str] = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    print(f"installing Debian packages: {' '.join(packages)}", flush=True)
    subprocess.run([*prefix, "apt-get", "update", "-qq"], check=True, env=env)
    # policy-rc.d 101 keeps the packages' own system services from being started.
    policy = Path("/usr/sbin/policy-rc.d")
    created_policy = False
    if os.geteuid() == 0 and not policy.exists():
        policy.write_text("#!/bin/sh\nexit 101\n")
        policy.chmod(0o755)
        created_policy = True
    try:
        subprocess.run(
            [*prefix, "apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages],
            check=True,
            env=env,
        )
    finally:
        if created_policy:
            policy.unlink(missing_ok=True)


@dataclass(kw_only=True)
class ServiceSet:
    """The services of one environment (dev stack, a test session, a benchmark).

    ZooKeeper and Redis always, the warm Spark Connect server when ``spark_port`` is set (the dev
    stack); PostgreSQL on demand (``up(postgres=True)``): SQLite stays the
    dashboard's embedded default, PostgreSQL is what CI runs the Django tests on."""

    base_dir: Path
    zk_port: int
    redis_port: int
    pg_port: int = DEFAULT_PG_PORT
    host: str = "127.0.0.1"
    zk_heap_mb: int = 512  # the benchmark raises it for a million partitions
    zk_java_options: str = ""  # more JVM options for ZooKeeper (the test suite's: tests/conftest.py)
    spark_port: int = 0  # a Spark Connect server too when non-zero (the dev stack; tests start their own)
    owner: str = str(REPO_ROOT)  # the checkout whose services these are: only it stops them (process.py)

    @property
    def zookeeper(self) -> ZooKeeperServer:
        return ZooKeeperServer(
            host=self.host,
            port=self.zk_port,
            base_dir=self.base_dir,
            heap_mb=self.zk_heap_mb,
            java_options=self.zk_java_options,
            owner=self.owner,
        )

    @property
    def redis(self) -> RedisServer:
        return RedisServer(host=self.host, port=self.redis_port, base_dir=self.base_dir, owner=self.owner)

    @property
    def spark(self) -> SparkConnectServer | None:
        if not self.spark_port:
            return None
        return SparkConnectServer(
            host=self.host,
            port=self.spark_port,
            base_dir=self.base_dir,
            master=os.environ.get("SPARK_CONNECT_MASTER", SparkConnectServer.master),
            driver_memory=os.environ.get("SPARK_CONNECT_MEMORY", SparkConnectServer.driver_memory),
            log_level=os.environ.get("SPARK_CONNECT_LOG_LEVEL", SparkConnectServer.log_level),
            java_options=os.environ.get("SPARK_CONNECT_JAVA_OPTIONS", SparkConnectServer.java_options),
            owner=self.owner,
        )

    @property
    def postgres(self) -> PostgresServer:
        return PostgresServer(host=self.host, port=self.pg_port, base_dir=self.base_dir, owner=self.owner)

    def up(self, *, postgres: bool = False, core: bool = True) -> None:
        if core:
            self.zookeeper.start()
            self.redis.start()
            if self.spark is not None:
                self.spark.start(timeout=120.0)  # a cold JVM on a busy 2-core machine takes 15-40 s
        if postgres:
            self.postgres.start()

    def down(self) -> None:
        if self.spark is not None:
            self.spark.stop()
        self.postgres.stop()  # only when this set started it (its pid file names a live process of ours)
        self.redis.stop()
        self.zookeeper.stop()

    def status(self) -> list[str]:
        lines = [self.zookeeper.status_line(), self.redis.status_line()]
        if self.spark is not None:
            lines.append(self.spark.status_line())
        if self.postgres.data_dir.exists():
            lines.append(self.postgres.status_line())
        return lines


def default_service_set() -> ServiceSet:
    return ServiceSet(
        base_dir=Path(os.environ.get("SERVICES_DIR", DEFAULT_VAR / "services")),
        zk_port=int(os.environ.get("ZK_PORT", DEFAULT_ZK_PORT)),
        redis_port=int(os.environ.get("REDIS_PORT", DEFAULT_REDIS_PORT)),
        spark_port=int(os.environ.get("SPARK_CONNECT_PORT", DEFAULT_SPARK_CONNECT_PORT)),
        pg_port=int(os.environ.get("PG_PORT", DEFAULT_PG_PORT)),
    )


@contextlib.contextmanager
def temporary_services(base_dir: Path, zk_heap_mb: int = 512) -> Iterator[ServiceSet]:
    """Fresh ZooKeeper and Redis on free ports for the length of a ``with`` block."""
    services = ServiceSet(base_dir=base_dir, zk_port=free_port(), redis_port=free_port(), zk_heap_mb=zk_heap_mb)
    try:
        services.up()
        yield services
    finally:
        services.down()
