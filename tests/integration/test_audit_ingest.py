"""State-change ingest from the Redis stream: in order, exactly once across restarts and crashes."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client

from dashboard.audit.models import IngestCursor, StateChange
from dashboard.lib.redis_keys import state_change_stream_key as stream_key
from workers.audit import ingest_state_changes, ingest_stream

pytestmark = pytest.mark.django_db

NAME = "ing"


def record(epoch: int, seq: int, **extra: Any) -> dict[str, Any]:
    return {
        "ts": 1_700_000_000_000.0 + seq, "controller_id": 1, "controller_epoch": epoch, "seq": seq,
        "kind": "election", "event_id": "e", "cause": "BrokerChange", "entity": f"orders-{seq % 2}",
        "topic": "orders", "partition": seq % 2, "replica": None, "from_state": "OfflinePartition",
        "to_state": "OnlinePartition", "leader_before": -1, "leader_after": 2, "isr_before": [1],
        "isr_after": [2], "leader_epoch_before": seq, "leader_epoch_after": seq + 1, "unclean": False,
        "error": None, **extra,
    }  # fmt: skip


@pytest.fixture
def stream(redis_url: str, settings: Any) -> redis.Redis:
    settings.REDIS_URL = redis_url
    return redis.Redis.from_url(redis_url)


def add(client: redis.Redis, *records: dict[str, Any]) -> None:
    for r in records:
        client.xadd(stream_key(NAME), {"r": json.dumps(r, separators=(",", ":"))})


def keys() -> list[tuple[int, int]]:
    return list(StateChange.objects.filter(cluster=NAME).values_list("controller_epoch", "seq"))


def test_ingest_is_ordered_and_idempotent(stream: redis.Redis) -> None:
    add(stream, *(record(1, s) for s in range(1, 6)))
    assert ingest_stream(stream, NAME, batch=2) == 5
    assert keys() == [(1, s) for s in range(1, 6)]
    assert ingest_stream(stream, NAME) == 0  # nothing new
    # a restarted worker whose cursor was lost re-reads everything: nothing is stored twice
    IngestCursor.objects.filter(cluster=NAME).update(last_id="0-0")
    assert ingest_stream(stream, NAME) == 5 and len(keys()) == 5
    add(stream, record(2, 1, kind="failover"), record(2, 2), {"bad": "entry"})
    assert ingest_state_changes.run(NAME) == {NAME: 3}
    assert keys()[-2:] == [(2, 1), (2, 2)]
    change = StateChange.objects.get(cluster=NAME, controller_epoch=1, seq=3)
    assert (change.leader_after, change.isr_after, change.partition, change.record["unclean"]) == (2, [2], 1, False)


def test_a_crash_before_commit_loses_nothing(stream: redis.Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    add(stream, *(record(1, s) for s in range(1, 4)))
    real_update = IngestCursor.objects.filter

    def crash(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("worker killed")

    monkeypatch.setattr(IngestCursor.objects, "filter", crash)
    with pytest.raises(RuntimeError):
        ingest_stream(stream, NAME)
    assert keys() == []  # rows rolled back with the cursor
    monkeypatch.setattr(IngestCursor.objects, "filter", real_update)
    assert ingest_stream(stream, NAME) == 3 and keys() == [(1, 1), (1, 2), (1, 3)]


def test_partition_history_page_and_csv(stream: redis.Redis, client: Client) -> None:
    add(stream, *(record(1, s) for s in range(1, 5)))
    ingest_stream(stream, NAME)
    url = f"/actions/clusters/{NAME}/topics/orders/1/history/"
    assert client.get(url).status_code == 302  # anonymous
    client.force_login(User.objects.create_user("vera"))
    html = client.get(url).content.decode()
    assert "1.1" in html and "1.3" in html and "1.2" not in html
    rows = list(csv.reader(io.StringIO(client.get(url + "?format=csv").content.decode())))
    assert rows[0][:3] == ["controller_epoch", "seq", "ts"] and [r[1] for r in rows[1:]] == ["1", "3"]


def test_partition_page_history_block(stream: redis.Redis) -> None:
    from django.template import Context, Template

    add(stream, *(record(1, s) for s in range(1, 5)))
    ingest_stream(stream, NAME)
    html = Template("{% load audit_history %}{% partition_history c t p %}").render(
        Context({"c": NAME, "t": "orders", "p": 1})
    )
    assert "2 state change(s) ingested" in html and "1.3" in html and "1.1" in html
    assert f"/actions/clusters/{NAME}/topics/orders/1/history/?format=csv" in html
