"""/healthz against real ZooKeeper, Redis, the test database and a real Celery worker."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from scripts.devservices import REPO_ROOT, RedisServer, ZooKeeperServer
from tests.support.processes import CELERY_WORKER
from tests.support.zk import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def live_settings(settings: Any, zk_chroot: str, redis_url: str) -> Any:
    from dashboard.celery import app

    settings.ZOOKEEPER_CONNECT = zk_chroot
    settings.REDIS_URL = redis_url
    settings.HEALTH_CHECK_TIMEOUT_S = 2.0
    app.conf.update(broker_url=redis_url, result_backend=redis_url)
    app.close()  # drop broker connections an earlier test may have opened with other settings
    # close() keeps the producer pool of the old broker (kombu's pidbox publishes through it), so a
    # ping made by an earlier test (the home page runs the checks) would send this one's elsewhere.
    app.amqp._producer_pool = None  # type: ignore[attr-defined]  # celery-types omits the private pool
    return settings


@pytest.fixture
def celery_worker_process(redis_url: str) -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ, REDIS_URL=redis_url, DJANGO_SETTINGS_MODULE="dashboard.settings")
    proc = subprocess.Popen(
        [
            *CELERY_WORKER,
            "--pool",
            "solo",
            "-n",
            "healthz@%h",
            "-l",
            "WARNING",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _health(client: Client) -> tuple[int, dict[str, Any]]:
    response = client.get("/healthz")
    return response.status_code, response.json()


def test_all_green_with_every_service_up(live_settings: Any, celery_worker_process: Any) -> None:
    client = Client()
    # A worker takes a few seconds to start, much longer on a loaded CI box: a generous deadline.
    deadline = time.monotonic() + 90
    status, body = _health(client)
    while status != 200 and time.monotonic() < deadline:
        time.sleep(0.5)
        status, body = _health(client)
    assert status == 200, body
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"zookeeper", "redis", "database", "celery"}
    assert "worker" in body["checks"]["celery"]["detail"]


def test_zookeeper_down_is_a_503_naming_it_then_recovers(live_settings: Any, zk_server: ZooKeeperServer) -> None:
    client = Client()
    zk_server.kill()
    try:
        started = time.monotonic()
        status, body = _health(client)
        assert time.monotonic() - started < 5
        assert status == 503
        assert "zookeeper" in body["down"]
        assert "unreachable" in body["checks"]["zookeeper"]["detail"]
    finally:
        zk_server.start()
    wait_for(lambda: _health(client)[1]["checks"]["zookeeper"]["ok"], timeout=15, what="zookeeper check recovers")


def test_redis_down_is_reported(live_settings: Any, redis_server: RedisServer) -> None:
    client = Client()
    redis_server.stop()
    try:
        status, body = _health(client)
        assert status == 503
        assert "redis" in body["down"]
    finally:
        redis_server.start()


def test_unmigrated_database_is_reported(live_settings: Any) -> None:
    from django.core.management import call_command

    call_command("migrate", "auth", "zero", verbosity=0)
    try:
        status, body = _health(Client())
        assert status == 503
        assert "not applied" in body["checks"]["database"]["detail"]
    finally:
        call_command("migrate", verbosity=0)


def test_healthz_needs_no_login_and_only_get(live_settings: Any) -> None:
    assert Client().post("/healthz").status_code == 405
