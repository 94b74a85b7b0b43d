"""Fixtures shared by the integration modules that run controllers and brokers (imported by conftest).

Each yields a group that the test starts members of, and stops every member afterwards, whether
the test passed or not: ``agents`` (real broker agent processes), ``fake_brokers`` (broker
registrations only) and ``candidates`` (in-process controller candidates). ``operator`` and
``no_tasks`` are the web side of an operator's action: a logged-in operator's test client, and
Celery's ``send_task`` recorded instead of sent, so the test runs the task itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client

from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates, FakeBrokers


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
def no_tasks(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The web process queues tasks; the test runs them itself."""
    from dashboard.celery import app

    calls: list[Any] = []

    class Result:
        id = "t"

    def send_task(name: str, args: Any = None, **kwargs: Any) -> Result:
        calls.append((name, args))
        return Result()

    monkeypatch.setattr(app, "send_task", send_task)
    return calls
