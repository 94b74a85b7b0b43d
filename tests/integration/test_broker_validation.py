"""A real broker agent validates the controller's requests as Kafka's brokers do (reference §6.5)."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from controller_core.model import TopicPartition
from controller_core.protocol.client import HttpStatusError, JsonConnection
from controller_core.protocol.messages import (
    LEADER_AND_ISR_PATH,
    ErrorCode,
    LeaderAndIsrResponse,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)
from tests.integration.test_broker_harness import leader_and_isr, partition_state
from tests.support.broker_agents import AgentProcess, Agents

TP = TopicPartition("orders", 0)
OTHER = TopicPartition("orders", 1)


@pytest.fixture
def broker(agents: Agents) -> AgentProcess:
    agent = agents.start(1)
    lead = leader_and_isr(agent, [partition_state(TP, 1, 2, [1], [1])], [agent], controller_epoch=5)
    response = agent.send(lead)
    assert isinstance(response, LeaderAndIsrResponse)
    assert response.error_code == ErrorCode.NONE
    return agent


def errors(response: LeaderAndIsrResponse | StopReplicaResponse) -> dict[TopicPartition, ErrorCode]:
    return response.errors_by_partition()


def test_a_request_from_an_older_controller_epoch_is_rejected(broker: AgentProcess) -> None:
    stale = leader_and_isr(broker, [partition_state(OTHER, 1, 0, [1], [1])], [broker], controller_epoch=4)
    response = broker.send(stale)
    assert isinstance(response, LeaderAndIsrResponse)
    assert response.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    stop = broker.send(StopReplicaRequest(100, 4, broker.epoch, [StopReplicaPartitionState(TP.topic, 0, -1, True)]))
    assert stop.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    meta = broker.send(UpdateMetadataRequest(100, 4, broker.epoch, [], []))
    assert meta.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    state = broker.state()
    assert [r["partition"] for r in state["replicas"]] == [0]  # nothing changed
    assert state["controller_epoch"] == 5
    assert state["requests_rejected"]["LeaderAndIsr:STALE_CONTROLLER_EPOCH"] == 1


def test_a_request_for_an_older_broker_epoch_is_rejected(broker: AgentProcess) -> None:
    stale = leader_and_isr(broker, [partition_state(OTHER, 1, 0, [1], [1])], [broker], broker_epoch=broker.epoch - 1)
    response = broker.send(stale)
    assert isinstance(response, LeaderAndIsrResponse)
    assert response.error_code == ErrorCode.STALE_BROKER_EPOCH
    assert set(errors(response).values()) == {ErrorCode.STALE_BROKER_EPOCH}
    meta = broker.send(UpdateMetadataRequest(100, 5, broker.epoch - 1, [], []))
    assert meta.error_code == ErrorCode.STALE_BROKER_EPOCH
    unknown_epoch = leader_and_isr(
        broker, [partition_state(OTHER, 1, 0, [1], [1])], [broker], controller_epoch=5, broker_epoch=-1
    )
    assert broker.send(unknown_epoch).error_code == ErrorCode.NONE  # -1: "not known", accepted


def test_a_partition_state_with_an_older_leader_epoch_is_ignored(broker: AgentProcess) -> None:
    older = leader_and_isr(broker, [partition_state(TP, 2, 1, [1, 2], [1, 2])], [broker], controller_epoch=5)
    response = broker.send(older)
    assert isinstance(response, LeaderAndIsrResponse)
    assert response.error_code == ErrorCode.NONE
    assert errors(response) == {TP: ErrorCode.STALE_CONTROLLER_EPOCH}
    replica = broker.replica(TP)
    assert (replica["role"], replica["leader"], replica["leader_epoch"]) == ("leader", 1, 2)


def test_stop_replica_is_fenced_then_deletes(broker: AgentProcess) -> None:
    fenced = broker.send(StopReplicaRequest(100, 5, broker.epoch, [StopReplicaPartitionState(TP.topic, 0, 2, True)]))
    assert isinstance(fenced, StopReplicaResponse)
    assert errors(fenced) == {TP: ErrorCode.FENCED_LEADER_EPOCH}
    deleted = broker.send(StopReplicaRequest(100, 5, broker.epoch, [StopReplicaPartitionState(TP.topic, 0, -2, True)]))
    assert isinstance(deleted, StopReplicaResponse)
    assert errors(deleted) == {TP: ErrorCode.NONE}
    assert broker.state()["replicas"] == []


def test_update_metadata_reaches_the_metadata_cache(broker: AgentProcess) -> None:
    state = UpdateMetadataPartitionState(TP.topic, 0, 5, 1, 2, (1,), 0, (1,))
    assert broker.send(UpdateMetadataRequest(100, 5, broker.epoch, [state], [])).error_code == ErrorCode.NONE
    metadata = broker.state()["metadata"]
    assert metadata["controller_id"] == 100
    assert metadata["partitions"] == [
        {
            "topic": "orders",
            "partition": 0,
            "leader": 1,
            "leader_epoch": 2,
            "isr": [1],
            "replicas": [1],
            "offline_replicas": [],
        }
    ]


def test_malformed_bodies_are_refused_with_400_and_unknown_paths_with_404(broker: AgentProcess) -> None:
    conn = JsonConnection("127.0.0.1", broker.port, timeout=5.0)
    try:
        with pytest.raises(HttpStatusError) as bad:
            conn.post(LEADER_AND_ISR_PATH, b'{"kind": "LeaderAndIsr", "controller_id": "x"}')
        assert bad.value.status == HTTPStatus.BAD_REQUEST
        assert bad.value.message == "LeaderAndIsr request: Expected `int`, got `str` - at `$.controller_id`"
        with pytest.raises(HttpStatusError) as missing:
            conn.post("/v1/nope", b"{}")
        assert missing.value.status == HTTPStatus.NOT_FOUND
    finally:
        conn.close()
