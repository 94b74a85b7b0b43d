"""The wire protocol: every message's JSON written out by hand, and strict decoding.

Expectations here are literal JSON, never the product's own encoder: a message must encode to the
object docs/protocol.md shows and decode from it, and a body with a wrongly typed or missing field
anywhere must be refused with an error naming that field, before anything is applied.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from controller_core.broker.api import BrokerApi
from controller_core.broker.config import BrokerConfig
from controller_core.broker.replica_manager import ReplicaManager
from controller_core.model import TopicPartition
from controller_core.protocol.client import controller_endpoint, split_url
from controller_core.protocol.messages import (
    ALTER_ISR_PATH,
    LEADER_AND_ISR_PATH,
    STOP_REPLICA_PATH,
    UPDATE_METADATA_PATH,
    AlterIsrPartition,
    AlterIsrPartitionResult,
    AlterIsrRequest,
    AlterIsrResponse,
    AlterPartitionReassignmentsRequest,
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ErrorCode,
    FetchedPartition,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
    LiveLeader,
    MessageError,
    PartitionError,
    PartitionId,
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaResponse,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataResponse,
    control_request_path,
    decode,
    decode_control_request,
    decode_control_response,
    encode,
    encode_control_request,
)

pytestmark = pytest.mark.unit

# -- the wire form of each message, written out by hand -----------------------------------------------

LEADER_AND_ISR = {
    "kind": "LeaderAndIsr",
    "controller_id": 100,
    "controller_epoch": 3,
    "broker_epoch": 4294967302,
    "partition_states": [
        {
            "topic": "orders",
            "partition": 0,
            "controller_epoch": 3,
            "leader": 1,
            "leader_epoch": 7,
            "isr": [1, 2],
            "zk_version": 12,
            "replicas": [1, 2, 3],
            "adding_replicas": [3],
            "removing_replicas": [],
            "is_new": False,
        }
    ],
    "live_leaders": [{"id": 1, "host": "127.0.0.1", "port": 40001}, {"id": 2, "host": None, "port": -1}],
    "topic_ids": {"orders": "Vx3tYpc3QyKZ1nF2t4mHkQ"},
}
LEADER_AND_ISR_OBJECT = LeaderAndIsrRequest(
    100,
    3,
    4294967302,
    [LeaderAndIsrPartitionState("orders", 0, 3, 1, 7, (1, 2), 12, (1, 2, 3), (3,), (), False)],
    [LiveLeader(1, "127.0.0.1", 40001), LiveLeader(2, None, -1)],
    {"orders": "Vx3tYpc3QyKZ1nF2t4mHkQ"},
)

STOP_REPLICA = {
    "kind": "StopReplica",
    "controller_id": 100,
    "controller_epoch": 3,
    "broker_epoch": 77,
    "partitions": [
        {"topic": "orders", "partition": 0, "leader_epoch": -2, "delete_partition": True},
        {"topic": "orders", "partition": 1, "leader_epoch": 7, "delete_partition": False},
    ],
}
STOP_REPLICA_OBJECT = StopReplicaRequest(
    100,
    3,
    77,
    [StopReplicaPartitionState("orders", 0, -2, True), StopReplicaPartitionState("orders", 1, 7, False)],
)

UPDATE_METADATA = {
    "kind": "UpdateMetadata",
    "controller_id": 100,
    "controller_epoch": 3,
    "broker_epoch": 77,
    "partition_states": [
        {
            "topic": "orders",
            "partition": 0,
            "controller_epoch": 3,
            "leader": -2,
            "leader_epoch": 0,
            "isr": [2],
            "zk_version": 0,
            "replicas": [2, 3],
            "offline_replicas": [3],
        }
    ],
    "live_brokers": [
        {
            "id": 2,
            "endpoints": [{"host": None, "port": 9092, "listener": "PLAINTEXT", "security_protocol": "SSL"}],
            "rack": "rack-a",
        }
    ],
    "topic_ids": {},
}
UPDATE_METADATA_OBJECT = UpdateMetadataRequest(
    100,
    3,
    77,
    [UpdateMetadataPartitionState("orders", 0, 3, -2, 0, (2,), 0, (2, 3), (3,))],
    [UpdateMetadataBroker(2, (UpdateMetadataEndpoint(None, 9092, "PLAINTEXT", "SSL"),), "rack-a")],
)


@pytest.mark.parametrize(
    ("wire", "message", "path"),
    [
        (LEADER_AND_ISR, LEADER_AND_ISR_OBJECT, LEADER_AND_ISR_PATH),
        (STOP_REPLICA, STOP_REPLICA_OBJECT, STOP_REPLICA_PATH),
        (UPDATE_METADATA, UPDATE_METADATA_OBJECT, UPDATE_METADATA_PATH),
    ],
)
def test_control_requests_have_the_documented_json(wire: dict[str, Any], message: Any, path: str) -> None:
    assert control_request_path(message) == path
    assert json.loads(encode_control_request(message)) == wire
    assert decode_control_request(path, json.dumps(wire).encode()) == message


def test_optional_fields_take_their_documented_defaults() -> None:
    body = {
        "controller_id": 1,
        "controller_epoch": 2,
        "broker_epoch": -1,
        "partition_states": [
            {
                "topic": "t",
                "partition": 4,
                "controller_epoch": 2,
                "leader": 1,
                "leader_epoch": 0,
                "isr": [1],
                "zk_version": 0,
                "replicas": [1],
            }
        ],
        "live_leaders": [],
        "an_unknown_key": "is ignored",
    }
    request = decode_control_request(LEADER_AND_ISR_PATH, json.dumps(body).encode())
    assert request == LeaderAndIsrRequest(1, 2, -1, [LeaderAndIsrPartitionState("t", 4, 2, 1, 0, (1,), 0, (1,))], [])
    (state,) = request.partition_states
    assert (state.adding_replicas, state.removing_replicas, state.is_new) == ((), (), False)


def test_control_responses_have_the_documented_json() -> None:
    lai = LeaderAndIsrResponse(ErrorCode.NONE, [PartitionError("orders", 0, ErrorCode.KAFKA_STORAGE_ERROR)])
    assert json.loads(encode(lai)) == {
        "kind": "LeaderAndIsr",
        "error_code": 0,
        "partition_errors": [{"topic": "orders", "partition": 0, "error_code": 56}],
    }
    assert json.loads(encode(StopReplicaResponse(ErrorCode.STALE_CONTROLLER_EPOCH))) == {
        "kind": "StopReplica",
        "error_code": 11,
        "partition_errors": [],
    }
    assert json.loads(encode(UpdateMetadataResponse(ErrorCode.STALE_BROKER_EPOCH))) == {
        "kind": "UpdateMetadata",
        "error_code": 77,
    }
    body = (
        b'{"kind":"LeaderAndIsr","error_code":0,"partition_errors":[{"topic":"orders","partition":0,"error_code":56}]}'
    )
    assert decode_control_response("LeaderAndIsr", body) == lai
    assert lai.errors_by_partition() == {TopicPartition("orders", 0): ErrorCode.KAFKA_STORAGE_ERROR}
    assert decode_control_response("StopReplica", b'{"error_code":74}') == StopReplicaResponse(
        ErrorCode.FENCED_LEADER_EPOCH, []
    )


def test_a_large_shared_update_metadata_list_is_encoded_once_for_every_broker() -> None:
    states = [UpdateMetadataPartitionState("t", p, 3, 1, 2, (1, 2), 5, (1, 2)) for p in range(3000)]
    expected_states = [
        {
            "topic": "t",
            "partition": p,
            "controller_epoch": 3,
            "leader": 1,
            "leader_epoch": 2,
            "isr": [1, 2],
            "zk_version": 5,
            "replicas": [1, 2],
            "offline_replicas": [],
        }
        for p in range(3000)
    ]
    for broker_epoch in (7, 8):  # the second one comes from the cache
        request = UpdateMetadataRequest(0, 3, broker_epoch, states, [])
        body = encode_control_request(request)
        assert json.loads(body) == {
            "kind": "UpdateMetadata",
            "controller_id": 0,
            "controller_epoch": 3,
            "broker_epoch": broker_epoch,
            "partition_states": expected_states,
            "live_brokers": [],
            "topic_ids": {},
        }
        assert decode_control_request(UPDATE_METADATA_PATH, body) == request


def test_fetch_messages_have_the_documented_json() -> None:
    request = FetchRequest(2, 10485760, (FetchPartition("orders", 0, 1200, 7, 0, 1048576),), broker_epoch=4294967310)
    wire = {
        "replica_id": 2,
        "broker_epoch": 4294967310,
        "max_bytes": 10485760,
        "partitions": [
            {
                "topic": "orders",
                "partition": 0,
                "fetch_offset": 1200,
                "leader_epoch": 7,
                "log_start_offset": 0,
                "max_bytes": 1048576,
            }
        ],
    }
    assert json.loads(encode(request)) == wire
    assert decode(json.dumps(wire).encode(), FetchRequest, "fetch request") == request
    data = FetchedPartition("orders", 0, ErrorCode.NONE, 1190, 0, 1450, 250, 128000, ((7, 1200),))
    response_wire = {
        "error_code": 0,
        "partitions": [
            {
                "topic": "orders",
                "partition": 0,
                "error_code": 0,
                "high_watermark": 1190,
                "log_start_offset": 0,
                "log_end_offset": 1450,
                "record_count": 250,
                "records_bytes": 128000,
                "epochs": [[7, 1200]],
            }
        ],
    }
    assert json.loads(encode(FetchResponse(ErrorCode.NONE, (data,)))) == response_wire
    assert decode(json.dumps(response_wire).encode(), FetchResponse, "fetch response") == FetchResponse(
        ErrorCode.NONE, (data,)
    )


def test_alter_isr_messages_have_the_documented_json() -> None:
    request = AlterIsrRequest(1, 55, (AlterIsrPartition("t", 0, 4, (1, 2), 9),))
    wire = {
        "broker_id": 1,
        "broker_epoch": 55,
        "partitions": [{"topic": "t", "partition": 0, "leader_epoch": 4, "new_isr": [1, 2], "current_isr_version": 9}],
    }
    assert json.loads(encode(request)) == wire
    assert decode(json.dumps(wire).encode(), AlterIsrRequest, "AlterIsr request") == request
    # The controller answers an error with topic, partition and error_code only.
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
    response = AlterIsrResponse(
        ErrorCode.NONE,
        (
            AlterIsrPartitionResult("t", 0, ErrorCode.NONE, 1, 4, (1, 2), 10),
            AlterIsrPartitionResult("t", 1, ErrorCode.INVALID_UPDATE_VERSION),
        ),
    )
    assert decode(json.dumps(answer).encode(), AlterIsrResponse, "AlterIsr response") == response
    assert json.loads(encode(response)) == answer


def test_controlled_shutdown_succeeds_only_with_nothing_remaining() -> None:
    what = "ControlledShutdown"
    assert decode(b'{"broker_id":3,"broker_epoch":8}', ControlledShutdownRequest, what) == ControlledShutdownRequest(
        3, 8
    )
    assert decode(b'{"error_code":0,"remaining_partitions":[]}', ControlledShutdownResponse, what).succeeded
    remaining = decode(
        b'{"error_code":0,"remaining_partitions":[{"topic":"t","partition":2}]}', ControlledShutdownResponse, what
    )
    assert not remaining.succeeded
    assert remaining.remaining_partitions == (PartitionId("t", 2),)
    assert remaining.remaining_partitions[0].topic_partition == TopicPartition("t", 2)
    assert not decode(b'{"error_code":41}', ControlledShutdownResponse, what).succeeded
    assert json.loads(encode(ControlledShutdownResponse(ErrorCode.NONE, (PartitionId("t", 3),)))) == {
        "error_code": 0,
        "remaining_partitions": [{"topic": "t", "partition": 3}],
    }


# -- strict decoding: one wrong field anywhere refuses the whole message, naming the field ----------------


def _with(wire: dict[str, Any], path: tuple[str | int, ...], value: Any) -> bytes:
    """``wire`` (deep-copied through JSON) with the value at ``path`` replaced, or removed if ``...``."""
    copy = json.loads(json.dumps(wire))
    target = copy
    for key in path[:-1]:
        target = target[key]
    if value is ...:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return json.dumps(copy).encode()


BAD_CONTROL_REQUESTS = [
    (
        LEADER_AND_ISR_PATH,
        LEADER_AND_ISR,
        ("partition_states", 0, "leader_epoch"),
        4.9,
        "$.partition_states[0].leader_epoch",
    ),
    (LEADER_AND_ISR_PATH, LEADER_AND_ISR, ("partition_states", 0, "partition"), "0", "$.partition_states[0].partition"),
    (LEADER_AND_ISR_PATH, LEADER_AND_ISR, ("partition_states", 0, "is_new"), "false", "$.partition_states[0].is_new"),
    (LEADER_AND_ISR_PATH, LEADER_AND_ISR, ("partition_states", 0, "isr"), [1, "2"], "$.partition_states[0].isr[1]"),
    (
        LEADER_AND_ISR_PATH,
        LEADER_AND_ISR,
        ("partition_states", 0, "zk_version"),
        ...,
        "`zk_version` - at `$.partition_states[0]`",
    ),
    (LEADER_AND_ISR_PATH, LEADER_AND_ISR, ("live_leaders", 0, "port"), "40001", "$.live_leaders[0].port"),
    (LEADER_AND_ISR_PATH, LEADER_AND_ISR, ("controller_epoch",), True, "$.controller_epoch"),
    (LEADER_AND_ISR_PATH, LEADER_AND_ISR, ("kind",), "StopReplica", "$.kind"),
    (
        STOP_REPLICA_PATH,
        STOP_REPLICA,
        ("partitions", 1, "delete_partition"),
        "false",
        "$.partitions[1].delete_partition",
    ),
    (STOP_REPLICA_PATH, STOP_REPLICA, ("partitions", 0, "partition"), "0", "$.partitions[0].partition"),
    (STOP_REPLICA_PATH, STOP_REPLICA, ("partitions", 1, "leader_epoch"), 4.9, "$.partitions[1].leader_epoch"),
    (STOP_REPLICA_PATH, STOP_REPLICA, ("broker_epoch",), ..., "`broker_epoch`"),
    (STOP_REPLICA_PATH, STOP_REPLICA, ("kind",), "Fetch", "$.kind"),
    (UPDATE_METADATA_PATH, UPDATE_METADATA, ("partition_states", 0, "leader"), 1.0, "$.partition_states[0].leader"),
    (
        UPDATE_METADATA_PATH,
        UPDATE_METADATA,
        ("live_brokers", 0, "endpoints", 0, "port"),
        "9092",
        "$.live_brokers[0].endpoints[0].port",
    ),
    (UPDATE_METADATA_PATH, UPDATE_METADATA, ("topic_ids",), {"orders": 5}, "$.topic_ids[...]"),
    (UPDATE_METADATA_PATH, UPDATE_METADATA, ("partition_states",), {"orders": 0}, "$.partition_states"),
]


@pytest.mark.parametrize(("path", "wire", "where", "value", "named"), BAD_CONTROL_REQUESTS)
def test_a_wrongly_typed_or_missing_field_is_refused_naming_it(
    path: str, wire: dict[str, Any], where: tuple[str | int, ...], value: Any, named: str
) -> None:
    with pytest.raises(MessageError) as refused:
        decode_control_request(path, _with(wire, where, value))
    assert named in str(refused.value)
    assert str(refused.value).startswith(f"{wire['kind']} request: ")


@pytest.mark.parametrize(
    ("body", "message_type", "named"),
    [
        (
            b'{"kind":"LeaderAndIsr","error_code":0,"partition_errors":[{"topic":"t","partition":0,"error_code":9999}]}',
            LeaderAndIsrResponse,
            "$.partition_errors[0].error_code",
        ),
        (b'{"kind":"StopReplica","error_code":"0","partition_errors":[]}', StopReplicaResponse, "$.error_code"),
        (b'{"kind":"LeaderAndIsr","error_code":0}', UpdateMetadataResponse, "$.kind"),
        (b'{"broker_id":1,"broker_epoch":"5","partitions":[]}', AlterIsrRequest, "$.broker_epoch"),
        (
            b'{"broker_id":1,"broker_epoch":5,"partitions":[{"topic":"t","partition":0,"leader_epoch":1,"new_isr":[],"current_isr_version":0}]}',
            AlterIsrRequest,
            "$.partitions[0].new_isr",
        ),
        (
            b'{"error_code":0,"partitions":[{"topic":"t","partition":0,"error_code":0}]}',
            AlterIsrResponse,
            "$.partitions[0]",
        ),
        (
            b'{"error_code":0,"partitions":[{"topic":"t","partition":0,"error_code":0,"leader":1,"leader_epoch":2.5,"isr":[1],"zk_version":3}]}',
            AlterIsrResponse,
            "$.partitions[0].leader_epoch",
        ),
        (b'{"broker_id":true,"broker_epoch":5}', ControlledShutdownRequest, "$.broker_id"),
        (b'{"broker_id":1}', ControlledShutdownRequest, "`broker_epoch`"),
        (
            b'{"error_code":0,"remaining_partitions":[{"topic":"t","partition":"2"}]}',
            ControlledShutdownResponse,
            "$.remaining_partitions[0].partition",
        ),
        (b'{"replica_id":2,"max_bytes":0,"partitions":[]}', FetchRequest, "$.max_bytes"),
        (
            b'{"error_code":0,"partitions":[{"topic":"t","partition":0,"epochs":[[1,2,3]]}]}',
            FetchResponse,
            "$.partitions[0].epochs[0]",
        ),
        (b'{"partitions":[{"topic":"t","partition":0}]}', AlterPartitionReassignmentsRequest, "`replicas`"),
        (b'{"partitions":[]}', AlterPartitionReassignmentsRequest, "$.partitions"),
    ],
)
def test_every_other_message_is_decoded_strictly(body: bytes, message_type: type[Any], named: str) -> None:
    with pytest.raises(MessageError, match=r"^msg: ") as refused:
        decode(body, message_type, "msg")
    assert named in str(refused.value)


@pytest.mark.parametrize(
    ("body", "message"),
    [(b"not json", "body is not JSON"), (b"[1]", "Expected `object`, got `array`"), (b"", "body is not JSON")],
)
def test_a_body_that_is_no_json_object_is_refused(body: bytes, message: str) -> None:
    with pytest.raises(MessageError, match=message):
        decode_control_request(STOP_REPLICA_PATH, body)


def test_a_request_posted_to_another_path_is_refused() -> None:
    with pytest.raises(MessageError, match=r"Invalid value 'StopReplica' - at `\$.kind`"):
        decode_control_request(LEADER_AND_ISR_PATH, json.dumps(STOP_REPLICA).encode())
    with pytest.raises(MessageError, match="not a control request path"):
        decode_control_request("/v1/nope", b"{}")


# -- nothing is applied: the broker's HTTP routes over a real replica manager -----------------------------


@pytest.fixture
def broker_api() -> tuple[BrokerApi, ReplicaManager]:
    replicas = ReplicaManager(BrokerConfig(broker_id=1, zookeeper_connect="zk:2181", lightweight=True))
    replicas.set_broker_epoch(77)
    api = BrokerApi(replicas, state=lambda query: {}, health=lambda: (True, {}))
    return api, replicas


def _follow_and_lead(api: BrokerApi) -> None:
    lead = json.loads(json.dumps(LEADER_AND_ISR))
    lead["broker_epoch"] = 77
    answer = json.loads(api.post_routes()[LEADER_AND_ISR_PATH](json.dumps(lead).encode()))
    assert answer == {
        "kind": "LeaderAndIsr",
        "error_code": 0,
        "partition_errors": [{"topic": "orders", "partition": 0, "error_code": 0}],
    }


def _observable(replicas: ReplicaManager) -> tuple[Any, ...]:
    return (
        {tp: (p.role, p.leader_epoch, p.replicas) for tp, p in replicas.partitions.items()},
        dict(replicas.logs),
        replicas.controller_epoch,
        replicas.controller_id,
        dict(replicas.requests_handled),
        dict(replicas.metadata.partitions),
        dict(replicas.topic_ids),
    )


@pytest.mark.parametrize(("path", "wire", "where", "value", "named"), BAD_CONTROL_REQUESTS)
def test_a_refused_control_request_changes_nothing_on_the_broker(
    broker_api: tuple[BrokerApi, ReplicaManager],
    path: str,
    wire: dict[str, Any],
    where: tuple[str | int, ...],
    value: Any,
    named: str,
) -> None:
    api, replicas = broker_api
    _follow_and_lead(api)
    before = _observable(replicas)
    bad = json.loads(_with(wire, where, value))
    if isinstance(bad, dict) and "controller_epoch" in bad and where != ("controller_epoch",):
        bad["controller_epoch"] = 9  # would be accepted, and would move the broker's epoch
    with pytest.raises(MessageError, match=named.replace("$", "\\$").replace("[", "\\[").replace("]", "\\]")):
        api.post_routes()[path](json.dumps(bad).encode())
    assert _observable(replicas) == before
    assert replicas.partitions[TopicPartition("orders", 0)].role.value == "leader"


def test_stop_replica_with_delete_partition_false_as_a_string_keeps_the_log(
    broker_api: tuple[BrokerApi, ReplicaManager],
) -> None:
    """The defect that motivated strict decoding: ``bool("false")`` is True, which deleted the log."""
    api, replicas = broker_api
    _follow_and_lead(api)
    stop = {
        "kind": "StopReplica",
        "controller_id": 100,
        "controller_epoch": 3,
        "broker_epoch": 77,
        "partitions": [{"topic": "orders", "partition": 0, "leader_epoch": 8, "delete_partition": "false"}],
    }
    with pytest.raises(MessageError, match=r"\$\.partitions\[0\]\.delete_partition"):
        api.post_routes()[STOP_REPLICA_PATH](json.dumps(stop).encode())
    assert TopicPartition("orders", 0) in replicas.logs
    assert replicas.partitions[TopicPartition("orders", 0)].role.value == "leader"


def test_a_bad_fetch_is_refused_before_it_moves_a_follower(broker_api: tuple[BrokerApi, ReplicaManager]) -> None:
    api, replicas = broker_api
    _follow_and_lead(api)
    before = _observable(replicas)
    body = b'{"replica_id":2,"max_bytes":100,"partitions":[{"topic":"orders","partition":0,"fetch_offset":"5"}]}'
    with pytest.raises(MessageError, match=r"\$\.partitions\[0\]\.fetch_offset"):
        api.post_routes()["/v1/fetch"](body)
    assert _observable(replicas) == before


# -- the rest of the protocol's vocabulary --------------------------------------------------------------


def test_the_controller_endpoint_comes_from_controller_extra_keys() -> None:
    assert controller_endpoint({"endpoint": "http://127.0.0.1:8080"}) == "http://127.0.0.1:8080"
    assert controller_endpoint({"endpoint": "ftp://x"}) is None
    assert controller_endpoint({}) is None
    assert split_url("http://h:1") == ("h", 1)
    with pytest.raises(ValueError, match="not an http"):
        split_url("http://nohost")
    assert ALTER_ISR_PATH == "/v1/alter_isr"


@pytest.mark.parametrize(
    ("name", "code"),
    [
        ("NONE", 0),
        ("UNKNOWN_TOPIC_OR_PARTITION", 3),
        ("STALE_CONTROLLER_EPOCH", 11),
        ("NOT_CONTROLLER", 41),
        ("KAFKA_STORAGE_ERROR", 56),
        ("FENCED_LEADER_EPOCH", 74),
        ("STALE_BROKER_EPOCH", 77),
        ("PREFERRED_LEADER_NOT_AVAILABLE", 80),
        ("ELIGIBLE_LEADERS_NOT_AVAILABLE", 83),
        ("ELECTION_NOT_NEEDED", 84),
        ("INVALID_UPDATE_VERSION", 95),
        ("UNKNOWN_SERVER_ERROR", -1),
    ],
)
def test_error_codes_are_kafkas(name: str, code: int) -> None:
    assert ErrorCode[name] == code


def test_an_unknown_error_code_number_parses_as_unknown_server_error() -> None:
    assert ErrorCode.parse(9999) is ErrorCode.UNKNOWN_SERVER_ERROR
    assert ErrorCode.parse(74) is ErrorCode.FENCED_LEADER_EPOCH
