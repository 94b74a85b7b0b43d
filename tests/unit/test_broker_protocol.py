"""The wire protocol: every message round-trips, bad bodies fail with a message naming the field."""

from __future__ import annotations

import gc
import json

import pytest

from controller_core.model import TopicPartition
from controller_core.protocol import (
    LEADER_AND_ISR_PATH,
    STOP_REPLICA_PATH,
    UPDATE_METADATA_PATH,
    AlterIsrPartition,
    AlterIsrPartitionResult,
    AlterIsrRequest,
    AlterIsrResponse,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    control_request_path,
    controller_endpoint,
    decode_control_request,
    decode_control_response,
    encode_control_request,
    encode_control_response,
    gc_paused,
    split_url,
)
from controller_core.requests import (
    ErrorCode,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    PartitionError,
    StopReplicaPartitionState,
    StopReplicaRequest,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)


def update_metadata(states: list[UpdateMetadataPartitionState], broker_epoch: int = 7) -> UpdateMetadataRequest:
    broker = UpdateMetadataBroker(1, (UpdateMetadataEndpoint("h", 1, "PLAINTEXT", "PLAINTEXT"),), None)
    return UpdateMetadataRequest(0, 3, broker_epoch, states, [broker], {"t": "id"})


def test_control_requests_round_trip_on_their_paths() -> None:
    lai = LeaderAndIsrRequest(
        0, 3, 7, [LeaderAndIsrPartitionState("t", 0, 3, 1, 2, (1, 2), 5, (1, 2))], [LiveLeader(1, "h", 1)]
    )
    stop = StopReplicaRequest(0, 3, 7, [StopReplicaPartitionState("t", 0, -2, True)])
    meta = update_metadata([UpdateMetadataPartitionState("t", 0, 3, 1, 2, (1, 2), 5, (1, 2))])
    for request, path in ((lai, LEADER_AND_ISR_PATH), (stop, STOP_REPLICA_PATH), (meta, UPDATE_METADATA_PATH)):
        assert control_request_path(request) == path
        assert decode_control_request(path, encode_control_request(request)) == request


def test_a_large_shared_update_metadata_list_is_encoded_once_and_spliced_correctly() -> None:
    states = [UpdateMetadataPartitionState("t", p, 3, 1, 2, (1, 2), 5, (1, 2)) for p in range(3000)]
    first, second = update_metadata(states, broker_epoch=7), update_metadata(states, broker_epoch=8)
    for request in (first, second):
        body = encode_control_request(request)
        assert json.loads(body) == request.to_dict()
        assert decode_control_request(UPDATE_METADATA_PATH, body) == request


def test_a_request_posted_to_the_wrong_path_is_refused() -> None:
    stop = StopReplicaRequest(0, 3, 7, [])
    with pytest.raises(ValueError, match="kind is 'StopReplica'"):
        decode_control_request(LEADER_AND_ISR_PATH, encode_control_request(stop))
    with pytest.raises(ValueError, match="not a control request path"):
        decode_control_request("/v1/nope", b"{}")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"not json", "not JSON"),
        (b"[1]", "must be a JSON object"),
        (b'{"controller_id": 0}', "malformed"),
    ],
)
def test_malformed_control_bodies_fail_clearly(body: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_control_request(STOP_REPLICA_PATH, body)


def test_control_responses_round_trip() -> None:
    response = LeaderAndIsrResponse(ErrorCode.NONE, [PartitionError("t", 0, ErrorCode.STALE_CONTROLLER_EPOCH)])
    assert decode_control_response(encode_control_response(response)) == response


def test_fetch_messages_round_trip() -> None:
    request = FetchRequest(2, 1024, (FetchPartition("t", 0, 10, 3, 0),), broker_epoch=99)
    assert FetchRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
    data = FetchedPartition("t", 0, ErrorCode.NONE, 12, 0, 40, 5, 2560, ((3, 10), (4, 12)))
    response = FetchResponse(ErrorCode.NONE, (data,))
    assert FetchResponse.from_dict(json.loads(json.dumps(response.to_dict()))) == response


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"replica_id": 2, "partitions": []}, "missing 'max_bytes'"),
        ({"replica_id": "2", "max_bytes": 1, "partitions": []}, "'replica_id' must be an integer"),
        ({"replica_id": 2, "max_bytes": 0, "partitions": []}, "must be positive"),
        ({"replica_id": 2, "max_bytes": 1, "partitions": [{"topic": "t"}]}, "missing 'partition'"),
        ({"replica_id": 2, "max_bytes": 1, "partitions": "all"}, "list of objects"),
    ],
)
def test_bad_fetch_requests_name_the_problem(body: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        FetchRequest.from_dict(body)


def test_alter_isr_messages_match_the_controller_side() -> None:
    request = AlterIsrRequest(1, 55, (AlterIsrPartition("t", 0, 4, (1, 2), 9),))
    assert request.to_dict() == {
        "broker_id": 1,
        "broker_epoch": 55,
        "partitions": [{"topic": "t", "partition": 0, "leader_epoch": 4, "new_isr": [1, 2], "current_isr_version": 9}],
    }
    assert AlterIsrRequest.from_dict(request.to_dict()) == request
    # The controller answers errors with topic, partition and error_code only.
    answer = {
        "error_code": 0,
        "partitions": [
            {
                "topic": "t",
                "partition": 0,
                "error_code": 0,
                "leader": 1,
                "leader_epoch": 4,
                "isr": [1, 2],
                "zk_version": 10,
            },
            {"topic": "t", "partition": 1, "error_code": 95},
        ],
    }
    response = AlterIsrResponse.from_dict(answer)
    assert response.partitions[0] == AlterIsrPartitionResult("t", 0, ErrorCode.NONE, 1, 4, (1, 2), 10)
    assert response.partitions[1].error_code == ErrorCode.INVALID_UPDATE_VERSION
    assert AlterIsrResponse.from_dict(response.to_dict()) == response


def test_an_empty_isr_is_not_a_proposal() -> None:
    with pytest.raises(ValueError, match="must not be empty"):
        AlterIsrPartition.from_dict(
            {"topic": "t", "partition": 0, "leader_epoch": 1, "new_isr": [], "current_isr_version": 0}
        )


def test_controlled_shutdown_succeeds_only_with_nothing_remaining() -> None:
    assert ControlledShutdownRequest.from_dict({"broker_id": 3, "broker_epoch": 8}) == ControlledShutdownRequest(3, 8)
    done = ControlledShutdownResponse.from_dict({"error_code": 0, "remaining_partitions": []})
    assert done.succeeded
    remaining = ControlledShutdownResponse.from_dict(
        {"error_code": 0, "remaining_partitions": [{"topic": "t", "partition": 2}]}
    )
    assert not remaining.succeeded
    assert remaining.remaining_partitions == (TopicPartition("t", 2),)
    assert not ControlledShutdownResponse.from_dict({"error_code": 41}).succeeded


def test_the_controller_endpoint_comes_from_controller_extra_keys() -> None:
    assert controller_endpoint({"endpoint": "http://127.0.0.1:8080"}) == "http://127.0.0.1:8080"
    assert controller_endpoint({"endpoint": "ftp://x"}) is None
    assert controller_endpoint({}) is None
    assert split_url("http://h:1") == ("h", 1)
    with pytest.raises(ValueError, match="not an http"):
        split_url("http://nohost")


def test_the_bulk_decoders_build_what_from_dict_builds() -> None:
    states = [
        LeaderAndIsrPartitionState("t", p, 3, p % 3, p, (1, 2), p * 2, (1, 2, 3), (3,) if p % 2 else (), (), p % 5 == 0)
        for p in range(50)
    ]
    request = LeaderAndIsrRequest(0, 3, 7, states, [LiveLeader(1, "h", 1)], {"t": "abc"})
    body = encode_control_request(request)
    assert decode_control_request(LEADER_AND_ISR_PATH, body) == LeaderAndIsrRequest.from_dict(json.loads(body))
    response = LeaderAndIsrResponse(
        ErrorCode.NONE,
        [PartitionError("t", p, ErrorCode.FENCED_LEADER_EPOCH if p % 2 else ErrorCode.NONE) for p in range(9)],
    )
    assert decode_control_response(encode_control_response(response)) == LeaderAndIsrResponse.from_dict(
        response.to_dict()
    )


@pytest.mark.parametrize(
    ("state", "message"),
    [
        ({"topic": "t"}, "lacks 'partition'"),
        (
            {
                "topic": "t",
                "partition": "0",
                "controller_epoch": 1,
                "leader": 1,
                "leader_epoch": 1,
                "zk_version": 0,
                "isr": [1],
                "replicas": [1],
            },
            "wrong type",
        ),
        (
            {
                "topic": "t",
                "partition": 0,
                "controller_epoch": 1,
                "leader": 1,
                "leader_epoch": 1,
                "zk_version": 0,
                "isr": ["1"],
                "replicas": [1],
            },
            "isr: expected a list of integers",
        ),
    ],
)
def test_the_bulk_decoder_names_bad_partition_states(state: dict[str, object], message: str) -> None:
    body = json.dumps(
        {
            "kind": "LeaderAndIsr",
            "controller_id": 0,
            "controller_epoch": 1,
            "broker_epoch": 1,
            "partition_states": [state],
        }
    ).encode()
    with pytest.raises(ValueError, match=message):
        decode_control_request(LEADER_AND_ISR_PATH, body)


def test_the_collector_pause_nests_and_restores_the_previous_setting() -> None:
    assert gc.isenabled()
    with gc_paused():
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()
