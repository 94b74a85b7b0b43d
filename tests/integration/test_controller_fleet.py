"""The controller fleet in-process (the worker processes are in ``test_controller_host`` and the browser
test): a managed cluster whose ZooKeeper does not answer keeps its candidate slot while the candidate
retries, instead of losing it every few seconds to a worker that would fail the same way."""

from __future__ import annotations

import time

import pytest
import redis

from dashboard.clusters import hosting
from dashboard.clusters.models import Cluster
from dashboard.lib.redis_keys import controller_status_key
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


def test_two_workers_with_one_controller_id_never_both_take_slots_of_a_cluster(redis_url: str) -> None:
    """The interleaving that read-then-SET-NX allowed: A reads the slots (0 held by worker C, 1 free),
    C lets slot 0 go, B (same id as A) takes slot 0, then A takes slot 1. The take is one script
    that re-checks the id, so A takes nothing."""
    from workers.hosting import Presence

    Cluster.objects.create(name="twin", zookeeper_connect="127.0.0.1:1/kafka", mode="managed")
    client = redis.Redis.from_url(redis_url)
    a = ControllerFleet(7, redis_url=redis_url, slot_ttl_s=6.0, poll_s=0.2, only=(), token="a:1")
    b = ControllerFleet(7, redis_url=redis_url, slot_ttl_s=6.0, poll_s=0.2, only=(), token="b:2")
    presence_a = Presence(client, "controller", "a:1", max_clusters=8, only=(), ttl_s=6.0, controller_id=7)
    presence_b = Presence(client, "controller", "b:2", max_clusters=8, only=(), ttl_s=6.0, controller_id=7)
    read_slots = a._slot_values
    client.set(hosting.slot_key("twin", 0), hosting.slot_value(8, "c:3"), px=6000)

    def stale_read(c: redis.Redis, name: str) -> list[tuple[int, str] | None]:
        values = read_slots(c, name)  # what A saw ...
        if c.delete(hosting.slot_key("twin", 0)):  # ... before C let its slot go
            b.tick(client, presence_b)  # and B, on another machine, took it
        return values

    a._slot_values = stale_read  # type: ignore[method-assign,assignment]
    try:
        a.tick(client, presence_a)
        assert "twin" in b.held
        assert "twin" not in a.held
        holders: list[bytes | None] = [client.get(hosting.slot_key("twin", i)) for i in range(2)]  # type: ignore[misc]
        assert sorted(v.decode() for v in holders if v is not None) == [hosting.slot_value(7, "b:2")]
    finally:
        for fleet in (a, b):
            for candidate in fleet.held.values():
                candidate.signal_stop()
            for candidate in fleet.held.values():
                candidate.join()
        client.close()


def test_a_removed_clusters_hosting_and_status_hashes_go_once_its_candidate_stopped(redis_url: str) -> None:
    Cluster.objects.create(name="stay", zookeeper_connect="127.0.0.1:1/kafka", mode="managed")
    Cluster.objects.create(name="brief", zookeeper_connect="127.0.0.1:1/kafka", mode="managed")
    client = redis.Redis.from_url(redis_url, decode_responses=True)
    fleet = ControllerFleet(7, redis_url=redis_url, slot_ttl_s=6.0, poll_s=0.2, only=(), token="test:1")
    fleet.start()
    try:
        deadline = time.monotonic() + 10
        while "brief" not in fleet.held and time.monotonic() < deadline:
            time.sleep(0.1)
        client.hset(hosting.cluster_hosting_key("brief"), "controller_active_at", 1)
        client.hset(controller_status_key("brief", 7), "active", 0)
        Cluster.objects.filter(name="brief").delete()
        deadline = time.monotonic() + 10
        while client.exists(hosting.cluster_hosting_key("brief")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not client.exists(hosting.cluster_hosting_key("brief"))
        assert not client.exists(controller_status_key("brief", 7))
        assert client.get(hosting.slot_key("brief", 0)) is None
        assert "stay" in fleet.held and "brief" not in fleet.held and "brief" not in fleet.stopping
    finally:
        fleet.stop()
        client.close()
