"""The controller fleet in-process (the worker processes are in ``test_controller_host`` and the browser
test): a managed cluster whose ZooKeeper does not answer keeps its candidate slot while the candidate
retries, instead of losing it every few seconds to a worker that would fail the same way."""

from __future__ import annotations

import time

import pytest
import redis

from dashboard.clusters import hosting
from dashboard.clusters.models import Cluster
from workers.controller_fleet import ControllerFleet

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_candidate_of_an_unreachable_cluster_keeps_its_slot_while_it_retries(redis_url: str) -> None:
    Cluster.objects.create(name="dark", zookeeper_connect="127.0.0.1:1/kafka", mode="managed")
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    fleet = ControllerFleet(7, redis_url=redis_url, slot_ttl_s=6.0, poll_s=0.2, only=(), token="test:1")
    fleet.start()
    try:
        deadline = time.monotonic() + 10
        while client.get(hosting.slot_key("dark", 0)) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        value = hosting.slot_value(7, "test:1")
        assert client.get(hosting.slot_key("dark", 0)) == value
        until = time.monotonic() + 8.0  # longer than the slot's TTL, across several failed starts
        while time.monotonic() < until:
            assert client.get(hosting.slot_key("dark", 0)) == value
            time.sleep(0.2)
        assert fleet.held["dark"].host is None  # still retrying, never started
    finally:
        fleet.stop()
        client.close()
    assert client.get(hosting.slot_key("dark", 0)) is None  # released on the way out
