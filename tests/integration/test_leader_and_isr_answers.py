"""A broker's LeaderAndIsr answer, digested on the sender thread (``controller_core.answer_digest``), still
does what the whole answer did: a KAFKA_STORAGE_ERROR takes the replica offline (its partition's ISR
shrinks in ZooKeeper), a later NONE for it brings it back from the failed log directory. Real ZooKeeper,
a real controller; the answers are handed to the controller's response callback as a sender hands them.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from kazoo.client import KazooClient

from controller_core.answer_digest import LeaderAndIsrAnswer
from controller_core.controller import Controller
from controller_core.events import Probe
from controller_core.model import TopicPartition
from controller_core.protocol.messages import ErrorCode, LeaderAndIsrResponse, PartitionError
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from tests.support.controllers import Candidates, FakeBrokers
from tests.support.zk import wait_for

pytestmark = pytest.mark.integration


def test_the_digest_keeps_the_failures_and_the_partitions_answered_none_per_topic() -> None:
    none, storage = ErrorCode.NONE, ErrorCode.KAFKA_STORAGE_ERROR
    response = LeaderAndIsrResponse(
        none,
        [
            PartitionError("a", 0, none),
            PartitionError("a", 1, storage),
            PartitionError("b", 0, none),
            PartitionError("a", 2, none),
            PartitionError("b", 3, ErrorCode.FENCED_LEADER_EPOCH),
        ],
    )
    answer = LeaderAndIsrAnswer.of(response)
    assert answer.error_code is none
    assert answer.failed == (PartitionError("a", 1, storage), PartitionError("b", 3, ErrorCode.FENCED_LEADER_EPOCH))
    assert answer.ok == {"a": [0, 2], "b": [0]}
    assert LeaderAndIsrAnswer.of(LeaderAndIsrResponse(ErrorCode.STALE_CONTROLLER_EPOCH)).error_code is (
        ErrorCode.STALE_CONTROLLER_EPOCH
    )


def _on_event_thread(controller: Controller, action: Any) -> Any:
    done, out = threading.Event(), []

    def run() -> None:
        out.append(action())
        done.set()

    controller.enqueue(Probe(run))
    assert done.wait(10)
    return out[0]


def _isr(zk: KazooClient, tp: TopicPartition) -> tuple[int, ...]:
    data, stat = zk.get(paths.partition_state_path(tp))
    return tuple(codecs.decode_partition_state(data, stat.version).leader_and_isr.isr)


def test_a_storage_error_takes_the_replica_offline_and_a_later_none_brings_it_back(
    zk: KazooClient, fake_brokers: FakeBrokers, candidates: Candidates
) -> None:
    for b in (1, 2, 3):
        fake_brokers.start(b)
    tp = TopicPartition("orders", 0)
    ZkStore(zk).create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1]})
    runner = candidates.start(100)
    wait_for(lambda: any(r["kind"] == "failover" for r in candidates.sinks[100].records), what="failover")
    wait_for(lambda: zk.exists(paths.partition_state_path(TopicPartition("orders", 1))) is not None, what="states")
    controller = runner.controller
    assert controller is not None
    storage_error = LeaderAndIsrResponse(
        ErrorCode.NONE,
        [PartitionError("orders", 0, ErrorCode.NONE), PartitionError("orders", 1, ErrorCode.KAFKA_STORAGE_ERROR)],
    )
    controller._enqueue_response(3, storage_error)  # as broker 3's sender hands its answer over
    wait_for(lambda: 3 not in _isr(zk, TopicPartition("orders", 1)), what="broker 3 out of orders-1's ISR")
    offline = _on_event_thread(controller, lambda: set(controller.ctx.replicas_on_offline_dirs(3)))
    assert offline == {TopicPartition("orders", 1)}
    assert 3 in _isr(zk, tp)  # answered NONE: untouched
    recovered = LeaderAndIsrResponse(ErrorCode.NONE, [PartitionError("orders", 1, ErrorCode.NONE)])
    controller._enqueue_response(3, recovered)
    wait_for(
        lambda: not _on_event_thread(controller, lambda: controller.ctx.replicas_on_offline_dirs(3)),
        what="orders-1 back from broker 3's failed log directory",
    )
