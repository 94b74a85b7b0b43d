"""Large control requests: the bytes on the wire are the JSON written out field by field, whatever size.

Encoding is msgspec's, with one special path (a large UpdateMetadata list shared by every broker's
request is encoded once and embedded raw); the expectations are built here from the same numbers,
never by the product's encoder.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from controller_core.protocol.messages import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveLeader,
    SharedList,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    control_request_path,
    decode_control_request,
    encode_control_request,
    encode_control_request_parts,
)


def _replicas(i: int) -> list[int]:
    return [i % 5, (i + 1) % 5, (i + 2) % 5]


def _leader_and_isr(n: int) -> tuple[LeaderAndIsrRequest, dict[str, Any]]:
    states = [
        LeaderAndIsrPartitionState(
            f"t{i % 7}",
            i,
            3,
            i % 5,
            10 + i,
            tuple(_replicas(i)[:2]),
            i,
            tuple(_replicas(i)),
            (4,) if i % 11 == 0 else (),
            (),
            i % 2 == 0,
        )
        for i in range(n)
    ]
    request = LeaderAndIsrRequest(
        controller_id=9001,
        controller_epoch=3,
        broker_epoch=77,
        partition_states=states,
        live_leaders=[LiveLeader(0, "127.0.0.1", 9092), LiveLeader(1, None, -1)],
        topic_ids={"t0": "abc"},
    )
    wire = {
        "kind": "LeaderAndIsr",
        "controller_id": 9001,
        "controller_epoch": 3,
        "broker_epoch": 77,
        "partition_states": [
            {
                "topic": f"t{i % 7}",
                "partition": i,
                "controller_epoch": 3,
                "leader": i % 5,
                "leader_epoch": 10 + i,
                "isr": _replicas(i)[:2],
                "zk_version": i,
                "replicas": _replicas(i),
                "adding_replicas": [4] if i % 11 == 0 else [],
                "removing_replicas": [],
                "is_new": i % 2 == 0,
            }
            for i in range(n)
        ],
        "live_leaders": [{"id": 0, "host": "127.0.0.1", "port": 9092}, {"id": 1, "host": None, "port": -1}],
        "topic_ids": {"t0": "abc"},
    }
    return request, wire


def _update_metadata(n: int) -> tuple[UpdateMetadataRequest, dict[str, Any]]:
    states = [
        UpdateMetadataPartitionState(
            f"t{i % 7}", i, 3, i % 5, 10 + i, (i % 5,), i, tuple(_replicas(i)[:2]), ((i + 1) % 5,)
        )
        for i in range(n)
    ]
    broker = UpdateMetadataBroker(1, (UpdateMetadataEndpoint("h", 1, "PLAINTEXT", "PLAINTEXT"),), "rack-a")
    request = UpdateMetadataRequest(
        controller_id=9001, controller_epoch=3, broker_epoch=5, partition_states=states, live_brokers=[broker]
    )
    wire = {
        "kind": "UpdateMetadata",
        "controller_id": 9001,
        "controller_epoch": 3,
        "broker_epoch": 5,
        "partition_states": [
            {
                "topic": f"t{i % 7}",
                "partition": i,
                "controller_epoch": 3,
                "leader": i % 5,
                "leader_epoch": 10 + i,
                "isr": [i % 5],
                "zk_version": i,
                "replicas": _replicas(i)[:2],
                "offline_replicas": [(i + 1) % 5],
            }
            for i in range(n)
        ],
        "live_brokers": [
            {
                "id": 1,
                "endpoints": [{"host": "h", "port": 1, "listener": "PLAINTEXT", "security_protocol": "PLAINTEXT"}],
                "rack": "rack-a",
            }
        ],
        "topic_ids": {},
    }
    return request, wire


def test_large_and_small_requests_encode_to_their_json_and_decode_back() -> None:
    for request, wire in (_leader_and_isr(2500), _update_metadata(2500), _leader_and_isr(3), _update_metadata(3)):
        body = encode_control_request(request)
        assert json.loads(body) == wire
        assert decode_control_request(control_request_path(request), body) == request


def test_a_shared_update_metadata_list_is_encoded_once_and_sent_as_a_part_of_each_body() -> None:
    request, wire = _update_metadata(2500)
    states = SharedList(request.partition_states)
    held_here = sys.getrefcount(states)
    bodies = []
    for broker_epoch in (5, 6):
        one = UpdateMetadataRequest(9001, 3, broker_epoch, states, request.live_brokers)
        parts = encode_control_request_parts(one)
        assert len(parts) == 3
        assert b"".join(parts) == encode_control_request(one)
        assert json.loads(b"".join(parts)) == wire | {"broker_epoch": broker_epoch}
        assert decode_control_request(control_request_path(one), b"".join(parts)) == one
        bodies.append(parts)
    assert bodies[0][1] is bodies[1][1] is states.json  # one encoding, shared, kept on the list
    del one
    assert sys.getrefcount(states) == held_here  # no cache holds the list: it goes with its requests


def test_a_plain_or_small_list_is_one_part() -> None:
    for request, _ in (_update_metadata(2500), _update_metadata(3)):
        small = UpdateMetadataRequest(9001, 3, 5, SharedList(request.partition_states[:3]), request.live_brokers)
        for one in (request, small):
            parts = encode_control_request_parts(one)
            assert len(parts) == 1
            assert decode_control_request(control_request_path(one), bytes(parts[0])) == one
