"""§6d controlled shutdown on the controller's HTTP API: bad requests change nothing in ZooKeeper.

A real controller candidate (in process) and broker registrations in real ZooKeeper. The broker
API answers Kafka-style: HTTP 200 with an error code for protocol-level refusals (unknown broker,
stale broker epoch), HTTP 400 with a message for bodies that are not a request at all.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from controller_core.protocol.messages import ErrorCode
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from tests.support.controllers import Candidates, FakeBrokers
from tests.support.snapshots import zk_tree
from tests.support.zk import wait_for

pytestmark = pytest.mark.slow


def leader_isr(zk: KazooClient, topic: str, partition: int) -> tuple[int, list[int]]:
    data, _ = zk.get(paths.partition_state_path(TopicPartition(topic, partition)))
    lai = codecs.decode_partition_state(data, 0).leader_and_isr
    return lai.leader, list(lai.isr)


@pytest.fixture
def running(zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates) -> tuple[str, dict[int, int]]:
    """Brokers 1 and 3 live (2 never registered); orders-2 = [1, 2] therefore has broker 1 as its only ISR."""
    epochs = {b: fake_brokers.start(b) for b in (1, 3)}
    ZkStore(zk).create_topic("orders", {0: [1, 3], 1: [3, 1], 2: [1, 2]})
    runner = candidates.start(100)
    wait_for(
        lambda: (
            zk.exists(paths.partition_state_path(TopicPartition("orders", 2))) is not None
            and leader_isr(zk, "orders", 0) == (1, [1, 3])
        ),
        timeout=30,
        what="orders online",
    )
    assert runner.api is not None
    return runner.api.url, epochs


def post(url: str, body: Any) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        url + "/v1/controlled_shutdown", data=data, method="POST", headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def shutdown_records(candidates: Candidates) -> list[Mapping[str, Any]]:
    return [r for r in candidates.sinks[100].records if r["kind"] == "controlled_shutdown"]


def rejections(candidates: Candidates) -> list[Mapping[str, Any]]:
    """Kafka answers a refusal with an error code only; the state-change history records it too."""
    return [r for r in candidates.sinks[100].records if r["kind"] == "controlled_shutdown_rejected"]


def test_an_unknown_broker_is_refused_and_nothing_changes(
    zk: KazooClient, running: tuple[str, dict[int, int]], candidates: Candidates
) -> None:
    url, _ = running
    before = zk_tree(zk)
    status, answer = post(url, {"broker_id": 42, "broker_epoch": 5})
    assert status == 200 and answer["error_code"] == ErrorCode.BROKER_NOT_AVAILABLE
    assert answer["remaining_partitions"] == []
    assert zk_tree(zk) == before and not shutdown_records(candidates)
    (rejected,) = rejections(candidates)
    assert (rejected["broker_id"], rejected["error_code"]) == (42, ErrorCode.BROKER_NOT_AVAILABLE)


def test_a_stale_broker_epoch_is_refused_and_nothing_changes(
    zk: KazooClient, running: tuple[str, dict[int, int]], candidates: Candidates
) -> None:
    url, epochs = running
    before = zk_tree(zk)
    status, answer = post(url, {"broker_id": 1, "broker_epoch": epochs[1] - 1})
    assert status == 200 and answer["error_code"] == ErrorCode.STALE_BROKER_EPOCH
    assert zk_tree(zk) == before and not shutdown_records(candidates)
    (rejected,) = rejections(candidates)
    assert (rejected["broker_id"], rejected["error_code"]) == (1, ErrorCode.STALE_BROKER_EPOCH)
    assert "STALE_BROKER_EPOCH" in rejected["error"]
    assert leader_isr(zk, "orders", 0) == (1, [1, 3])


def test_the_last_isr_member_is_not_forced_and_a_repeat_is_idempotent(
    zk: KazooClient, running: tuple[str, dict[int, int]], candidates: Candidates
) -> None:
    url, epochs = running
    status, answer = post(url, {"broker_id": 1, "broker_epoch": epochs[1]})
    assert status == 200 and answer["error_code"] == ErrorCode.NONE
    # orders-2's only ISR member is broker 1: it is reported as remaining, not moved to an out-of-ISR replica.
    assert answer["remaining_partitions"] == [{"topic": "orders", "partition": 2}]
    assert leader_isr(zk, "orders", 0)[0] == 3
    assert leader_isr(zk, "orders", 2) == (1, [1])
    after_first = zk_tree(zk)
    # Already shutting down: the same answer, and no second write.
    status, again = post(url, {"broker_id": 1, "broker_epoch": epochs[1]})
    assert status == 200 and again == answer
    assert zk_tree(zk) == after_first


_bodies = st.one_of(
    st.binary(max_size=64).filter(lambda b: not b.strip().startswith(b"{")),
    st.dictionaries(
        st.sampled_from(["broker_id", "broker_epoch", "other"]),
        st.one_of(st.none(), st.booleans(), st.floats(allow_nan=False), st.text(max_size=5), st.lists(st.integers())),
        max_size=3,
    ),
)


@given(body=_bodies)
@hsettings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_bodies_that_are_not_requests_are_400_with_a_message(
    zk: KazooClient, running: tuple[str, dict[int, int]], candidates: Candidates, body: Any
) -> None:
    url, _ = running
    before = zk_tree(zk)
    status, answer = post(url, body if isinstance(body, bytes) and body else body or {})
    assert status == 400 and isinstance(answer.get("error"), str) and answer["error"]
    assert zk_tree(zk) == before and not shutdown_records(candidates)
