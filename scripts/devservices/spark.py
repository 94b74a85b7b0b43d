"""The analytics' warm Spark Connect server, submitted from the installed pyspark's jars."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from scripts.devservices.process import ManagedProcess, ServiceError
from workers.local_processes import port_open


def pyspark_home() -> Path:
    """The installed pyspark package, which ships Spark itself (``bin/``, ``sbin/``, ``jars/``)."""
    import importlib.util

    spec = importlib.util.find_spec("pyspark")
    if spec is None or spec.origin is None:
        raise ServiceError("pyspark is not installed in this Python: run scripts/bootstrap")
    return Path(spec.origin).parent


CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


#: What ``spark.log.level`` accepts (log4j's levels).
LOG_LEVELS: Final = ("ALL", "TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")


@dataclass(kw_only=True)
class SparkConnectServer(ManagedProcess):
    """A warm Spark Connect server (the class Spark's ``sbin/start-connect-server.sh`` submits) on a loopback port.

    The analytics worker is a Connect client (``SPARK_REMOTE=sc://host:port``), so no JVM runs in a
    Celery child and the JIT and the session stay warm between runs. ``master`` is ``local[*]`` by
    default; the same client talks to a server in front of a real cluster (docs/deployment.md).
    """

    name: str = "spark-connect"
    master: str = "local[*]"
    driver_memory: str = "4g"
    #: The server's log level (``spark.log.level``). At Spark's default, INFO, the nine Spark test
    #: modules' server logged 2.7-2.8 MB, mostly query-plan text; at WARN 2.4 KB, warnings and errors
    #: kept. Its CPU did not measurably change (217, 223 CPU-s at INFO; 219 at WARN; load 3-6): the
    #: reason is the log's size. ``SPARK_CONNECT_LOG_LEVEL=INFO scripts/services up`` gets the plans back.
    log_level: str = "WARN"
    #: Generated classes the server keeps (``spark.sql.codegen.cache.maxEntries``, static; Spark's
    #: default is 100). Spark compiles each operator's generated code with Janino; the analytics job's
    #: ~13 tables and their state parts generate more distinct classes than 100, so a warm server that
    #: runs the same job every few minutes compiled evicted ones again. The nine Spark test modules on
    #: one server (a fresh clone, 3 workers): 4,296 and 4,321 compilations, 256.0 and 258.0 server
    #: CPU-s at 100; 1,743 compilations and 239.2 CPU-s at 4,000 (load 0.1 to 10.6, one run each).
    codegen_cache_entries: int = 4000
    #: The JVM's own options (``--driver-java-options``: with ``local[*]`` the driver is the whole
    #: server), none by default: Java 17's G1. The throughput collector (``-XX:+UseParallelGC``)
    #: measured better only on tiny runs, so only the test suite's server uses it
    #: (tests/integration/conftest.py). The benchmark's 10-million history, one run each on the same
    #: day (G1 / Parallel, wall then server CPU-s): full recompute 37.7 s, 70.2 / 37.9 s, 70.0; from the
    #: JSON 68.6 s, 131.5 / 89.3 s, 131.8; the last day 12.1 s, 20.6 / 11.0 s, 18.5.
    java_options: str = ""

    def __post_init__(self) -> None:
        # Spark would take a wrong level too and fail at the JVM's start, in a log the operator has
        # to find: refused here, with the levels it knows.
        level = self.log_level.strip().upper()
        if level not in LOG_LEVELS:
            raise ServiceError(
                f"spark-connect: log level {self.log_level!r} is not one of {', '.join(LOG_LEVELS)}"
                " (SPARK_CONNECT_LOG_LEVEL)"
            )
        self.log_level = level

    @property
    def remote(self) -> str:
        return f"sc://{self.host}:{self.port}"

    def command(self) -> list[str]:
        home = pyspark_home()
        env = [
            f"SPARK_HOME={home}",
            f"SPARK_LOG_DIR={self.base_dir}",
            f"SPARK_PID_DIR={self.base_dir}",
            f"SPARK_LOCAL_IP={self.host}",
            f"PYSPARK_PYTHON={sys.executable}",
        ]
        if os.environ.get("JAVA_HOME"):
            env.append(f"JAVA_HOME={os.environ['JAVA_HOME']}")
        confs = {
            "spark.connect.grpc.binding.address": self.host,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": self.host,
            "spark.driver.bindAddress": self.host,
            "spark.ui.enabled": "false",
            "spark.sql.session.timeZone": "UTC",
            "spark.log.level": self.log_level,
            "spark.sql.codegen.cache.maxEntries": str(self.codegen_cache_entries),
        }
        args = ["--master", self.master, "--driver-memory", self.driver_memory]
        if self.java_options:
            args += ["--driver-java-options", self.java_options]
        for key, value in confs.items():
            args += ["--conf", f"{key}={value}"]
        # What sbin/start-connect-server.sh submits, without its daemon script: that one runs the
        # JVM as a child of a shell, so our pid file would hold the shell and a stop could leave the
        # JVM behind on the port. spark-submit execs spark-class, which execs java: the pid is the JVM.
        submit = [str(home / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS, "--name", "Spark Connect server"]
        return ["env", *env, *submit, *args]

    def ready(self) -> bool:
        return port_open(self.host, self.port, timeout=1.0)
