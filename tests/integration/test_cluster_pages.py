"""Cluster pages, member lists and the metrics endpoint, read from a real Redis snapshot."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client

from controller_core.model import ReplicaAssignment, TopicPartition
from dashboard.clusters.models import Cluster
from workers.mirror.snapshot import SnapshotWriter
from workers.mirror.state import OBSERVED, MirrorState, StateRead

pytestmark = pytest.mark.django_db

NAME = "pages"


@pytest.fixture
def snapshot(settings: Any, redis_url: str) -> None:
    """orders: 60 partitions over brokers 1-3; broker 3 is down, so what it led is offline."""
    settings.REDIS_URL = redis_url
    settings.METRICS_TOKEN = "s3cret-token"
    state = MirrorState(NAME, mode=OBSERVED)
    state.set_brokers(
        {b: {"id": b, "endpoints": [f"PLAINTEXT://h{b}:9092"], "rack": f"r{b}", "epoch": 10 + b} for b in (1, 2)}
    )
    state.set_controller(1, 4)
    state.set_topic_names(["orders", "tiny"])
    replicas = {p: [(p % 3) + 1, ((p + 1) % 3) + 1] for p in range(60)}
    state.set_topic("orders", "id1", {p: ReplicaAssignment.of(r) for p, r in replicas.items()}, min_isr=2)
    state.set_topic("tiny", None, {0: ReplicaAssignment.of([1])})
    reads = {TopicPartition("orders", p): StateRead(r[0], 1, tuple(r), 4, 1, 100 + p) for p, r in replicas.items()}
    reads[TopicPartition("tiny", 0)] = StateRead(1, 0, (1,), 4, 0, 99)
    state.apply_state_reads(reads)
    client = redis.Redis.from_url(redis_url)
    now = int(time.time() * 1000)
    meta = {"gen": "g", "seq": 5, "mode": OBSERVED, "zk_state": "CONNECTED", "synced_at": now, "heartbeat_at": now,
            "controller_id": 1, "controller_epoch": 4, "lag_ms": 120}  # fmt: skip
    SnapshotWriter(client, NAME).write_full(state, meta)
    client.close()
    Cluster.objects.create(name=NAME, zookeeper_connect="127.0.0.1:2181/pages", mode=OBSERVED)


@pytest.fixture
def alice(client: Client, django_user_model: type[User]) -> Client:
    client.force_login(django_user_model.objects.create_user("alice", password="correct horse battery"))
    return client


def test_pages_need_a_login(snapshot: None, client: Client) -> None:
    for url in ("/clusters/", f"/clusters/{NAME}/", f"/clusters/{NAME}/topics/", f"/clusters/{NAME}/diagram/"):
        response = client.get(url)
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_overview_shows_counts_controller_and_skew(snapshot: None, alice: Client) -> None:
    page = alice.get(f"/clusters/{NAME}/").content.decode()
    assert 'data-count="partitions">61<' in page
    assert 'data-count="offline">20<' in page  # broker 3 led 20 of the 60
    assert 'data-controller="id">1<' in page and 'data-controller="epoch">4<' in page
    assert 'failovers <span data-controller="failovers">3<' in page
    assert 'data-bskew="replicas"' in page and "down" in page  # broker 3 listed as down
    assert "data-live-scope" not in page and 'data-scope="cluster"' in page


def test_the_overview_shows_where_the_controllers_time_went(snapshot: None, alice: Client, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.hset("kcp:pages:controller:1", mapping={"active": "1", "state": "IDLE", "per_state_ms": json.dumps({
        "IDLE": {"count": 9, "total_ms": 1.0, "max_ms": 1.0, "cpu_ms": 1.0},
        "BROKER_CHANGE": {"count": 2, "total_ms": 4000.0, "max_ms": 3000.0, "cpu_ms": 1000.0},
        "CONTROLLED_SHUTDOWN": {"count": 1, "total_ms": 1900.0, "max_ms": 1900.0, "cpu_ms": 1600.0},
        "TOPIC_CHANGE": {"count": 3, "total_ms": 12.0, "max_ms": 5.0}})})  # fmt: skip
    client.close()
    page = alice.get(f"/clusters/{NAME}/").content.decode()
    assert "Where the controller's time went" in page
    rows = [line for line in page.splitlines() if "<tr data-state=" in line]
    assert [r.split('"')[1] for r in rows] == ["BROKER_CHANGE", "CONTROLLED_SHUTDOWN", "TOPIC_CHANGE"]  # busiest first
    assert "1000 ms (25 %)" in page and "1600 ms (84 %)" in page
    assert 'data-state="IDLE"' not in page


def test_topics_are_paginated_sorted_and_filtered_on_the_server(snapshot: None, alice: Client) -> None:
    page = alice.get(f"/clusters/{NAME}/topics/?only=offline").content.decode()
    assert ">orders<" in page and ">tiny<" not in page
    page = alice.get(f"/clusters/{NAME}/topics/?sort=partitions&dir=desc&per_page=25&page=1").content.decode()
    assert page.index(">orders<") < page.index(">tiny<")
    assert alice.get(f"/clusters/{NAME}/topics/?sort=bogus").status_code == 200  # falls back to name


def test_a_topic_page_lists_partitions_with_isr_and_preferred_flags(snapshot: None, alice: Client) -> None:
    page = alice.get(f"/clusters/{NAME}/topics/orders/?per_page=25&page=2").content.decode()
    assert 'data-partition="orders-25"' in page and 'data-partition="orders-24"' not in page
    assert "page 2 of 3" in page
    rows = alice.get(f"/clusters/{NAME}/topics/orders/rows.json?page=1&per_page=25").json()
    assert rows["seq"] == 5 and len(rows["rows"]) == 25
    first = rows["rows"][2]  # orders-2: replicas [3, 1], broker 3 is down
    assert (first["leader"], first["state"], first["derived"], first["preferred_leader"]) == (
        3,
        "OfflinePartition",
        True,
        True,
    )
    assert alice.get(f"/clusters/{NAME}/topics/nope/").status_code == 404


def test_a_partition_page_has_the_history_slot(snapshot: None, alice: Client) -> None:
    page = alice.get(f"/clusters/{NAME}/topics/orders/4/").content.decode()
    assert 'id="partition-history"' in page and "orders-4" in page
    assert alice.get(f"/clusters/{NAME}/topics/orders/999/").status_code == 404


def test_diagram_members_are_paginated_by_the_server(snapshot: None, alice: Client) -> None:
    url = f"/clusters/{NAME}/members.json"
    body = alice.get(url, {"machine": "partition", "state": "OfflinePartition", "scope": "cluster"}).json()
    assert body["total"] == 20 and len(body["items"]) == 20 and body["items"][0]["label"] == "orders-2"
    body = alice.get(url, {"machine": "replica", "state": "OfflineReplica", "scope": "broker:3"}).json()
    assert body["total"] == 40 and body["items"][0]["label"] == "orders-1 on broker 3"
    body = alice.get(url, {"machine": "partition", "state": "OnlinePartition", "scope": "topic:tiny"}).json()
    assert [i["label"] for i in body["items"]] == ["tiny-0"]
    assert alice.get(url, {"machine": "partition", "state": "Nope", "scope": "cluster"}).status_code == 400


def test_brokers_page_and_agent_absence(snapshot: None, alice: Client) -> None:
    page = alice.get(f"/clusters/{NAME}/brokers/").content.decode()
    assert "PLAINTEXT://h1:9092" in page and "r2" in page
    agent = alice.get(f"/clusters/{NAME}/brokers/1/agent.json").json()
    assert agent["available"] is False and "no agent answering" in agent["reason"]
    assert alice.get(f"/clusters/{NAME}/brokers/3/").status_code == 200  # down but hosting replicas
    assert alice.get(f"/clusters/{NAME}/brokers/42/").status_code == 404


def test_metrics_need_the_token_or_a_login(snapshot: None, client: Client) -> None:
    url = f"/clusters/{NAME}/metrics"
    denied = client.get(url)
    assert denied.status_code == 401 and denied["WWW-Authenticate"].startswith("Bearer")
    assert client.get(url, HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    ok = client.get(url, HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert ok.status_code == 200
    text = ok.content.decode()
    assert 'kafka_controller_kafkacontroller_offlinepartitionscount{cluster="pages"} 20.0' in text
    assert 'kafka_controller_kafkacontroller_globalpartitioncount{cluster="pages"} 61.0' in text
    assert 'kafka_controller_kafkacontroller_activecontrollercount{cluster="pages"} 1.0' in text
    assert 'kcp_partition_state_count{cluster="pages",state="OfflinePartition"} 20.0' in text
    assert "kcp_mirror_lag_seconds" in text and "kcp_mirror_staleness_seconds" in text


def test_metrics_include_the_controller_status_in_managed_mode(snapshot: None, alice: Client, redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.hset("kcp:pages:controller:1", mapping={"active": "1", "state": "BROKER_CHANGE", "event_queue_size": 3,
                                                   "event_queue_time_ms_p50": 1.5, "event_queue_time_ms_max": 9,
                                                   "unclean_elections_total": 2,
                                                   "per_state_ms": json.dumps({
                                                       "CONTROLLED_SHUTDOWN": {"count": 2, "total_ms": 3500.0,
                                                                               "max_ms": 2000.0, "cpu_ms": 2750.0},
                                                       "IDLE": "garbage"})})  # fmt: skip
    client.close()
    text = alice.get(f"/clusters/{NAME}/metrics").content.decode()
    assert 'kcp_controller_state_events_total{cluster="pages",state="CONTROLLED_SHUTDOWN"} 2.0' in text
    assert 'kcp_controller_state_seconds_total{cluster="pages",state="CONTROLLED_SHUTDOWN"} 3.5' in text
    assert 'kcp_controller_state_cpu_seconds_total{cluster="pages",state="CONTROLLED_SHUTDOWN"} 2.75' in text
    assert 'state="IDLE"' not in text
    assert 'kafka_controller_controllerstats_uncleanleaderelectionspersec_total{cluster="pages"} 2.0' in text
    assert 'kafka_controller_controllereventmanager_eventqueuesize{cluster="pages"} 3.0' in text
    assert 'kafka_controller_controllereventmanager_eventqueuetimems{cluster="pages",quantile="0.5"} 1.5' in text
    assert 'kafka_controller_kafkacontroller_controllerstate{cluster="pages"} 2.0' in text


def test_home_lists_clusters(snapshot: None, alice: Client, settings: Any) -> None:
    # The home page also runs the health checks, whose Celery ping waits out its whole budget when no
    # worker runs (none here): what this test reads is the cluster list, so a short budget.
    settings.HEALTH_CHECK_TIMEOUT_S = 0.3
    assert f'href="/clusters/{NAME}/"' in alice.get("/").content.decode()
