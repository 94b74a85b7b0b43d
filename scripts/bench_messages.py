"""The cost of the control messages on the wire: encoding on the controller, decoding on a broker.

A failover sends every broker a LeaderAndIsr and an UpdateMetadata for all its partitions; at
100,000 partitions that is ~19 MB of JSON per request. This builds such requests in one process
and times, per round, each step the two sides pay (``controller_core.protocol.messages``):

* controller: ``encode_leader_and_isr`` (the sender thread's encode), ``encode_update_metadata``
  (the first broker's copy) and ``encode_update_metadata_shared`` (every further broker's: the
  shared partition list comes from the cache), ``decode_leader_and_isr_response``;
* broker (a lightweight agent's ``BrokerApi`` path, collector paused as there):
  ``decode_leader_and_isr``, ``handle_leader_and_isr`` (a fresh replica manager creating every
  partition), ``encode_leader_and_isr_response``, ``decode_update_metadata``, and ``broker_total``
  (decode, handle and answer of the LeaderAndIsr through the HTTP route's handler).

Wall time on the calling thread; the report gives the minimum and the median over ``--rounds``.

Usage::

    .venv/bin/python scripts/bench_messages.py [--partitions 100000] [--rounds 5] [--json]
    .venv/bin/python scripts/bench_messages.py --quick      # 2,000 partitions, 2 rounds (the test suite)
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from controller_core.broker.api import BrokerApi  # noqa: E402 - after the path set-up above
from controller_core.broker.config import BrokerConfig  # noqa: E402
from controller_core.broker.replica_manager import ReplicaManager  # noqa: E402
from controller_core.gc_policy import gc_paused  # noqa: E402
from controller_core.protocol.messages import (  # noqa: E402
    LEADER_AND_ISR_PATH,
    UPDATE_METADATA_PATH,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
    LiveLeader,
    SharedList,
    UpdateMetadataBroker,
    UpdateMetadataEndpoint,
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    decode_control_request,
    decode_control_response,
    encode,
    encode_control_request,
    encode_control_request_parts,
)

BROKER_ID = 1
BROKER_EPOCH = 77
PER_TOPIC = 50
STEPS = (
    "encode_leader_and_isr",
    "encode_update_metadata",
    "encode_update_metadata_shared",
    "decode_leader_and_isr_response",
    "decode_leader_and_isr",
    "handle_leader_and_isr",
    "encode_leader_and_isr_response",
    "decode_update_metadata",
    "broker_total",
)

T = TypeVar("T")


def leader_and_isr(partitions: int, leader_epoch: int) -> LeaderAndIsrRequest:
    """Every partition of the cluster with this broker among its replicas (what a failover sends)."""
    states = [
        LeaderAndIsrPartitionState(
            f"topic-{i // PER_TOPIC}", i % PER_TOPIC, 3, 1 + i % 3, leader_epoch, (1, 2, 3), leader_epoch, (1, 2, 3)
        )
        for i in range(partitions)
    ]
    leaders = [LiveLeader(b, "127.0.0.1", 9000 + b) for b in (1, 2, 3)]
    return LeaderAndIsrRequest(9001, 3, BROKER_EPOCH, states, leaders, {})


def update_metadata_states(partitions: int) -> SharedList[UpdateMetadataPartitionState]:
    """One list for every broker's UpdateMetadata, as the request batch makes it."""
    return SharedList(
        UpdateMetadataPartitionState(f"topic-{i // PER_TOPIC}", i % PER_TOPIC, 3, 1 + i % 3, 5, (1, 2, 3), 5, (1, 2, 3))
        for i in range(partitions)
    )


def update_metadata(states: SharedList[UpdateMetadataPartitionState], broker_epoch: int) -> UpdateMetadataRequest:
    brokers = [
        UpdateMetadataBroker(b, (UpdateMetadataEndpoint("127.0.0.1", 9000 + b, "PLAINTEXT", "PLAINTEXT"),), None)
        for b in range(1, 11)
    ]
    return UpdateMetadataRequest(9001, 3, broker_epoch, states, brokers)


def replica_manager() -> ReplicaManager:
    manager = ReplicaManager(BrokerConfig(broker_id=BROKER_ID, zookeeper_connect="unused:1", lightweight=True))
    manager.set_broker_epoch(BROKER_EPOCH)
    return manager


def _timed(step: Callable[[], T]) -> tuple[float, T]:
    started = time.perf_counter()
    result = step()
    return (time.perf_counter() - started) * 1000.0, result


def one_round(partitions: int, leader_epoch: int) -> tuple[dict[str, float], dict[str, int]]:
    """Each step's milliseconds for one pair of requests, and the body sizes in bytes."""
    ms: dict[str, float] = {}
    request = leader_and_isr(partitions, leader_epoch)
    ms["encode_leader_and_isr"], body = _timed(lambda: encode_control_request(request))
    with gc_paused():
        ms["decode_leader_and_isr"], decoded = _timed(lambda: decode_control_request(LEADER_AND_ISR_PATH, body))
        assert isinstance(decoded, LeaderAndIsrRequest) and decoded == request
        manager = replica_manager()
        ms["handle_leader_and_isr"], response = _timed(lambda: manager.handle_leader_and_isr(decoded))
        ms["encode_leader_and_isr_response"], answer = _timed(lambda: encode(response))
    ms["decode_leader_and_isr_response"], back = _timed(lambda: decode_control_response("LeaderAndIsr", answer))
    assert back == response and len(response.partition_errors) == partitions

    route = BrokerApi(replica_manager(), state=lambda query: {}, health=lambda: (True, {})).post_routes()
    ms["broker_total"], _ = _timed(lambda: route[LEADER_AND_ISR_PATH](body))

    states = update_metadata_states(partitions)
    ms["encode_update_metadata"], first = _timed(lambda: encode_control_request(update_metadata(states, BROKER_EPOCH)))
    # Another broker's request sharing the list, as its sender encodes it (the shared part not copied).
    ms["encode_update_metadata_shared"], _ = _timed(
        lambda: encode_control_request_parts(update_metadata(states, BROKER_EPOCH + 1))
    )
    with gc_paused():
        ms["decode_update_metadata"], _ = _timed(lambda: decode_control_request(UPDATE_METADATA_PATH, first))
    sizes = {"leader_and_isr_bytes": len(body), "response_bytes": len(answer), "update_metadata_bytes": len(first)}
    return ms, sizes


def run_rounds(partitions: int, rounds: int) -> tuple[dict[str, list[float]], dict[str, int]]:
    """Each step's milliseconds per round, and the body sizes in bytes."""
    figures: dict[str, list[float]] = {step: [] for step in STEPS}
    sizes: dict[str, int] = {}
    for round_ in range(rounds):
        gc.collect()
        ms, sizes = one_round(partitions, leader_epoch=5 + round_)
        for step, value in ms.items():
            figures[step].append(value)
    return figures, sizes


def summary(partitions: int, figures: dict[str, list[float]], sizes: dict[str, int]) -> dict[str, Any]:
    out: dict[str, Any] = {"partitions": partitions, "rounds": len(figures[STEPS[0]]), **sizes}
    for step, values in figures.items():
        out[f"{step}_ms_min"] = round(min(values), 1)
        out[f"{step}_ms_median"] = round(statistics.median(values), 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Encode and decode cost of the control messages.")
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2,000 partitions, 2 rounds")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    options = parser.parse_args(argv)
    if options.quick:
        options.partitions, options.rounds = 2_000, 2
    if options.partitions < 1 or options.rounds < 1:
        raise SystemExit("--partitions and --rounds must be at least 1")
    figures, sizes = run_rounds(options.partitions, options.rounds)
    result = summary(options.partitions, figures, sizes)
    if options.json:
        print(json.dumps(result))
        return 0
    size = sizes["leader_and_isr_bytes"]
    print(f"{options.partitions} partitions, {options.rounds} rounds; LeaderAndIsr {size:,} bytes")
    for step in STEPS:
        print(f"  {step:32s} min {result[f'{step}_ms_min']:8.1f} ms   median {result[f'{step}_ms_median']:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
