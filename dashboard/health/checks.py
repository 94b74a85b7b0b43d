"""Probes of the services the stack depends on, each bounded in time and run concurrently.

Why concurrent and bounded: ``/healthz`` is polled by operators and load balancers; when a service
hangs (a dead ZooKeeper host, a blackholed Redis) the endpoint must still answer within about
``HEALTH_CHECK_TIMEOUT_S`` and say which dependency is down, with HTTP 503.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import asdict, dataclass
from typing import Any

from django.conf import settings
from django.db import connection, connections
from django.db.migrations.executor import MigrationExecutor

from controller_core.zk import paths


@dataclass(frozen=True)
class CheckResult:
    name: str
    ok: bool
    detail: str
    latency_ms: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_zookeeper(timeout: float) -> str:
    from kazoo.client import KazooClient
    from kazoo.retry import KazooRetry

    connect = settings.ZOOKEEPER_CONNECT
    client = KazooClient(
        hosts=connect,
        timeout=max(timeout, 1.0),
        connection_retry=KazooRetry(max_tries=0),
        command_retry=KazooRetry(max_tries=0),
    )
    try:
        client.start(timeout=timeout)
        root_exists = client.exists("/") is not None
        controller = client.exists(paths.CONTROLLER_PATH) is not None
    except Exception as exc:
        raise RuntimeError(f"ZooKeeper {connect} unreachable: {exc.__class__.__name__} {exc}".strip()) from exc
    finally:
        client.stop()
        client.close()
    chroot = connect.partition("/")[2]
    where = f"{connect}" + ("" if root_exists or not chroot else " (chroot not created yet)")
    return f"{where}; controller {'elected' if controller else 'not elected'}"


def check_redis(timeout: float) -> str:
    import redis

    conn = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=timeout, socket_connect_timeout=timeout)
    try:
        conn.ping()
        version = conn.info("server").get("redis_version", "?")
    except redis.RedisError as exc:
        raise RuntimeError(f"Redis {settings.REDIS_URL} unreachable: {exc}") from exc
    finally:
        conn.close()
    return f"{settings.REDIS_URL} (redis {version})"


def check_database(timeout: float) -> str:
    try:
        executor = MigrationExecutor(connection)
        pending = executor.migration_plan(executor.loader.graph.leaf_nodes())
    finally:
        connections.close_all()
    if pending:
        names = ", ".join(f"{m.app_label}.{m.name}" for m, _ in pending[:5])
        raise RuntimeError(f"{len(pending)} migration(s) not applied ({names}): run `python manage.py migrate`")
    return f"{connection.vendor} migrated"


def check_celery(timeout: float) -> str:
    from dashboard.celery import app

    # A broadcast ping waits its whole timeout for replies: keep it short.
    replies = app.control.ping(timeout=min(timeout, 1.0))
    if not replies:
        raise RuntimeError("no Celery worker answered a ping")
    workers = sorted(name for reply in replies for name in reply)
    return f"{len(workers)} worker(s): {', '.join(workers)}"


CHECKS: dict[str, Callable[[float], str]] = {
    "zookeeper": check_zookeeper,
    "redis": check_redis,
    "database": check_database,
    "celery": check_celery,
}


def _timed(name: str, probe: Callable[[float], str], timeout: float) -> CheckResult:
    started = time.perf_counter()
    try:
        detail = probe(timeout)
        ok = True
    except Exception as exc:
        detail = str(exc) or exc.__class__.__name__
        ok = False
    return CheckResult(name, ok, detail, round((time.perf_counter() - started) * 1000, 1))


def run_checks(timeout: float | None = None) -> list[CheckResult]:
    """Run every probe concurrently; a probe still running after the deadline is reported as down."""
    budget = settings.HEALTH_CHECK_TIMEOUT_S if timeout is None else timeout
    pool = ThreadPoolExecutor(max_workers=len(CHECKS), thread_name_prefix="healthz")
    futures = {name: pool.submit(_timed, name, probe, budget) for name, probe in CHECKS.items()}
    wait(futures.values(), timeout=budget + 1.0)
    pool.shutdown(wait=False, cancel_futures=True)
    results = []
    for name, future in futures.items():
        if future.done():
            results.append(future.result())
        else:
            results.append(CheckResult(name, False, f"no answer within {budget + 1.0:.1f}s", (budget + 1.0) * 1000))
    return results
