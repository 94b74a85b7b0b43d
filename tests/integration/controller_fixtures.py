"""Fixtures shared by the integration modules (imported by the integration conftest).

Controllers and brokers: each yields a group that the test starts members of, and stops every
member afterwards, whether the test passed or not: ``agents`` (real broker agent processes),
``fake_brokers`` (broker registrations only), ``candidates`` (in-process controller candidates);
``election_consumer`` is a stand-in controller that carries out each
``/admin/preferred_replica_election`` request. The web side of an operator's action: ``operator``
(a logged-in operator's test client) and ``sent`` (Celery's ``send_task`` recorded instead of
sent, so the test runs the task itself). ``rds``: a Redis client on the test's flushed database.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from django.contrib.auth.models import Group, User
from django.test import Client
from kazoo.client import KazooClient

from controller_core.model import LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates, FakeBrokers


@pytest.fixture
def rds(redis_url: str) -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()


@pytest.fixture
def agents(zk_chroot: str, tmp_path: Path) -> Iterator[Agents]:
    group = Agents(zk_chroot, tmp_path)
    try:
        yield group
    finally:
        group.close()


@pytest.fixture
def fake_brokers(zk_chroot: str) -> Iterator[FakeBrokers]:
    group = FakeBrokers(zk_chroot)
    try:
        yield group
    finally:
        group.stop_all()


@pytest.fixture
def candidates(zk_chroot: str) -> Iterator[Candidates]:
    group = Candidates(zk_chroot)
    try:
        yield group
    finally:
        group.stop_all()


@pytest.fixture
def operator(settings: Any, redis_url: str) -> Client:
    settings.REDIS_URL = redis_url
    settings.ACTION_RATE_LIMIT = "0"
    user = User.objects.create_user("otto")
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """The tasks the web process sends, as ``(name, args)``, instead of sending them (task id
    ``task-1``): no worker runs in these tests, so a test runs the task itself when it needs it."""
    from dashboard.celery import app

    calls: list[tuple[str, Any]] = []

    class Result:
        id = "task-1"

    def send_task(name: str, args: Any = None, **kwargs: Any) -> Result:
        calls.append((name, args))
        return Result()

    monkeypatch.setattr(app, "send_task", send_task)
    return calls


@pytest.fixture
def election_consumer(zk: KazooClient) -> Iterator[list[set[TopicPartition]]]:
    """Plays the controller's part: takes each request and elects the preferred replica."""
    seen: list[set[TopicPartition]] = []
    stop = threading.Event()
    store = ZkStore(zk)

    def loop() -> None:
        while not stop.wait(0.02):
            got = store.get_preferred_replica_election()
            if got is None:
                continue
            seen.append(got)
            for tp in got:
                data, stat = zk.get(paths.partition_state_path(tp))
                state = codecs.decode_partition_state(data, stat.version)
                preferred = store.get_replica_assignments([tp.topic])[tp.topic].partitions[tp.partition].replicas[0]
                new = LeaderIsrAndControllerEpoch(state.leader_and_isr.new_leader(preferred), state.controller_epoch)
                zk.set(paths.partition_state_path(tp), codecs.encode_partition_state(new), version=stat.version)
            zk.delete(paths.PREFERRED_REPLICA_ELECTION_PATH)

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        stop.set()
        thread.join(5)
