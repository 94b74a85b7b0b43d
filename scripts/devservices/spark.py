"""The analytics' warm Spark Connect server, submitted from the installed pyspark's jars."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

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
    #: More ``--conf`` settings of the server (the tests' server sets a static one; the product's none).
    conf: dict[str, str] = field(default_factory=dict)

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
            **self.conf,
        }
        args = ["--master", self.master, "--driver-memory", self.driver_memory]
        for key, value in confs.items():
            args += ["--conf", f"{key}={value}"]
        # What sbin/start-connect-server.sh submits, without its daemon script: that one runs the
        # JVM as a child of a shell, so our pid file would hold the shell and a stop could leave the
        # JVM behind on the port. spark-submit execs spark-class, which execs java: the pid is the JVM.
        submit = [str(home / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS, "--name", "Spark Connect server"]
        return ["env", *env, *submit, *args]

    def ready(self) -> bool:
        return port_open(self.host, self.port, timeout=1.0)
