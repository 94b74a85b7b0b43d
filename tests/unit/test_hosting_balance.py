"""Hosting decisions that need no services: the optional name filters and the balance rule."""

from __future__ import annotations

import pytest

from dashboard.clusters.hosting import WorkerRecord, decode_worker, parse_slot_value, slot_value
from workers.hosting import env_filter, least_loaded


def worker(token: str, held: tuple[str, ...], max_clusters: int = 8, only: tuple[str, ...] = ()) -> WorkerRecord:
    return WorkerRecord("mirror", token, "h", 1, max_clusters, only, held, None, 0)


def test_the_filters_are_optional_name_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MIRROR_CLUSTERS", raising=False)
    assert env_filter("MIRROR_CLUSTERS") == ()
    monkeypatch.setenv("MIRROR_CLUSTERS", " b, a ,,a")
    assert env_filter("MIRROR_CLUSTERS") == ("a", "b")


def test_a_worker_takes_a_cluster_only_when_no_eligible_worker_with_room_holds_fewer() -> None:
    assert least_loaded(0, [], "x")
    assert least_loaded(1, [worker("w2", ("a",))], "x")  # a tie: both try, the lease picks one
    assert not least_loaded(2, [worker("w2", ("a",))], "x")
    assert least_loaded(2, [worker("w2", ("a",), max_clusters=1)], "x")  # the other is full
    assert least_loaded(2, [worker("w2", (), only=("y",))], "x")  # the other may not host x


def test_worker_records_and_slot_values_round_trip() -> None:
    raw = {b"host": b"h", b"pid": b"7", b"max": b"3", b"filter": b"a,b", b"held": b"a", b"controller_id": b""}
    record = decode_worker("mirror", "h:7", raw)
    assert record is not None and record.accepts("a") and not record.accepts("c")
    assert record.held == ("a",) and record.controller_id is None and record.max_clusters == 3
    assert decode_worker("mirror", "h:7", {}) is None
    assert parse_slot_value(slot_value(9001, "h:7")) == (9001, "h:7")
    assert parse_slot_value("garbage") is None
