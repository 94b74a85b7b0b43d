"""Large control requests are encoded from their dataclasses directly (orjson), not via to_dict().

Whatever the path, the bytes must decode to exactly ``request.to_dict()``, and decode back into an
equal request on the broker side.
"""

from __future__ import annotations

import json

from controller_core.protocol import control_request_path, decode_control_request, encode_control_request
from controller_core.requests import (
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveLeader,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
)


def _leader_and_isr(n: int) -> LeaderAndIsrRequest:
    states = [
        LeaderAndIsrPartitionState(
            f"t{i % 7}",
            i,
            3,
            i % 5,
            10 + i,
            (i % 5, (i + 1) % 5),
            i,
            (i % 5, (i + 1) % 5, (i + 2) % 5),
            (4,) if i % 11 == 0 else (),
            (),
            i % 2 == 0,
        )
        for i in range(n)
    ]
    return LeaderAndIsrRequest(
        controller_id=9001,
        controller_epoch=3,
        broker_epoch=77,
        partition_states=states,
        live_leaders=[LiveLeader(0, "127.0.0.1", 9092), LiveLeader(1, None, -1)],
        topic_ids={"t0": "abc"},
    )


def _update_metadata(n: int) -> UpdateMetadataRequest:
    states = [
        UpdateMetadataPartitionState(
            f"t{i % 7}", i, 3, i % 5, 10 + i, (i % 5,), i, (i % 5, (i + 1) % 5), ((i + 1) % 5,)
        )
        for i in range(n)
    ]
    broker = UpdateMetadataBroker(1, (UpdateMetadataEndpoint("h", 1, "PLAINTEXT", "PLAINTEXT"),), "rack-a")
    return UpdateMetadataRequest(
        controller_id=9001, controller_epoch=3, broker_epoch=5, partition_states=states, live_brokers=[broker]
    )


def test_large_requests_encode_exactly_their_to_dict() -> None:
    for request in (_leader_and_isr(2500), _update_metadata(2500), _leader_and_isr(3), _update_metadata(3)):
        body = encode_control_request(request)
        assert json.loads(body) == json.loads(json.dumps(request.to_dict()))
        decoded = decode_control_request(control_request_path(request), body)
        assert decoded == request
