"""``scripts/services`` (``python -m scripts.devservices``): up, down, status and env of the private services."""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections.abc import Sequence

from scripts.devservices.process import ServiceError
from scripts.devservices.service_set import default_service_set, install_debian_packages, missing_debian_packages

SERVICE_NAMES = ("zookeeper", "redis", "postgresql")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/services",
        description="Private ZooKeeper, Redis, the analytics' Spark Connect server (and on demand PostgreSQL)"
        " on loopback ports, data under var/services.",
    )
    parser.add_argument("action", choices=["up", "down", "status", "env"])
    parser.add_argument(
        "names",
        nargs="*",
        metavar="NAME",
        help="up/env: which of zookeeper, redis, postgresql (default: zookeeper redis; postgresql only when named)",
    )
    parser.add_argument("--no-install", action="store_true", help="fail instead of installing packages")
    args = parser.parse_args(argv)
    unknown = sorted(set(args.names) - set(SERVICE_NAMES))
    if unknown:
        parser.error(f"unknown service {', '.join(unknown)} (choose from {', '.join(SERVICE_NAMES)})")
    names = set(args.names or ("zookeeper", "redis"))
    core = bool(names & {"zookeeper", "redis"})
    services = default_service_set()
    try:
        if args.action == "up":
            missing = missing_debian_packages(postgres="postgresql" in names)
            if missing and args.no_install:
                raise ServiceError("missing: " + ", ".join(missing))
            install_debian_packages(missing)
            services.up(postgres="postgresql" in names, core=core)
            print("\n".join(services.status()))
        elif args.action == "down":
            services.down()
            print("\n".join(services.status()))
        elif args.action == "status":
            print("\n".join(services.status()))
            spark_ok = services.spark is None or services.spark.running()
            return 0 if services.zookeeper.running() and services.redis.running() and spark_ok else 3
        else:  # env: lines a shell can eval
            if core:
                print(f"export ZOOKEEPER_CONNECT={services.zookeeper.connect_string}")
                print(f"export REDIS_URL={services.redis.url}")
                if services.spark is not None:
                    print(f"export SPARK_REMOTE={services.spark.remote}")
            if "postgresql" in names:
                if not services.postgres.running():
                    raise ServiceError("postgresql is not running: `scripts/services up postgresql`")
                print(f"export DATABASE_URL={services.postgres.url}")
    except (ServiceError, subprocess.CalledProcessError) as exc:
        print(f"services: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
