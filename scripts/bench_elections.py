"""The elections' CPU, measured on the controller's own state machines over an in-memory store.

``scripts/bench`` measures the controller end to end against a real ZooKeeper, and its figures move
by 10 to 15 % between invocations on a shared 2-core VM. The per-partition work that bounds the broker
failure and the preferred election (docs/performance.md, "What bounds each figure") needs a steadier
measure to compare two versions of the code. This runs the partition state machine, the context, the
request batch and the deferred state-change log wired by ``tests.fakes.make_harness`` (its store keeps
ZooKeeper's conditional-write rules) through several rounds in one process, and reports the CPU of
each step on the calling thread:

* ``broker_failure``: one broker's partitions to Offline, then the offline elections and their
  requests, as ``Controller._elect_offline_leaders`` does (the dead broker's ISR removals come after the
  send and are not included);
* ``records``: building the deferred state-change records of that step afterwards;
* ``preferred_election``: the same partitions back to their preferred leader once it is in the ISR again.

Usage::

    .venv/bin/python scripts/bench_elections.py [--partitions 100000] [--brokers 10] [--rounds 10] [--json]

To compare two checkouts, run both alternately and compare the best rounds: the median moves with
the machine, the minimum much less.
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

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from controller_core.election import PreferredStrategy  # noqa: E402 - after the path set-up above
from controller_core.model import TopicPartition  # noqa: E402
from controller_core.state_change_log import DEFERRED_RECORDS  # noqa: E402
from controller_core.states import PartitionState, ReplicaState  # noqa: E402
from tests.fakes import Harness, broker, make_harness  # noqa: E402

PER_TOPIC = 50


def build(partitions: int, brokers: int) -> Harness:
    """A controller core over the fake store: ``partitions`` at RF 3, leaders spread evenly."""
    if brokers < 3:
        raise SystemExit("--brokers must be at least 3 (replication factor 3)")
    if partitions < brokers:
        raise SystemExit("--partitions must be at least --brokers")
    # As the controller: decisions on the cache, records built after the event.
    harness = make_harness(brokers=range(1, brokers + 1), decide_from_cache=True, defer_records=DEFERRED_RECORDS)
    for i in range(partitions):
        tp = TopicPartition(f"t{i // PER_TOPIC:05d}", i % PER_TOPIC)
        first = i % brokers
        replicas = [(first + k) % brokers + 1 for k in range(3)]
        harness.seed_partition(
            tp, replicas, leader=replicas[0], partition_state=PartitionState.ONLINE, replica_state=ReplicaState.ONLINE
        )
    return harness


def _timed(step: Callable[[], object]) -> float:
    """CPU seconds of ``step`` on this thread, the collector paused as the controller pauses it."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        started = time.thread_time()
        step()
        return time.thread_time() - started
    finally:
        gc.enable()


def run_rounds(harness: Harness, rounds: int, brokers: int) -> dict[str, list[float]]:
    """Fail and restore one broker per round (1, 2, ... in turn); CPU seconds of each step per round."""
    ctx, psm, store = harness.ctx, harness.psm, harness.store
    figures: dict[str, list[float]] = {"broker_failure": [], "records": [], "preferred_election": []}
    moved: list[TopicPartition] = []
    for i in range(rounds):
        dead = i % brokers + 1
        store.update_calls.clear()
        harness.transport.clear()
        harness.sink.records.clear()

        def fail(dead: int = dead) -> None:
            ctx.remove_live_brokers([dead])
            offline = ctx.partitions_with_offline_leader()
            psm.handle_state_changes(offline, PartitionState.OFFLINE)
            psm.trigger_online_partition_state_change()
            moved[:] = sorted(offline)

        figures["broker_failure"].append(_timed(fail))
        figures["records"].append(_timed(harness.log.flush))
        # The broker returns and catches up (its leaders' AlterIsr puts it back in the ISR).
        ctx.add_live_brokers([broker(dead)])
        for tp in moved:
            store.leader_isr_change(tp, (*store.znodes[tp].isr, dead))
            state = store.state(tp)
            assert state is not None
            ctx.put_partition_leadership_info(tp, state)
        figures["preferred_election"].append(
            _timed(lambda: psm.handle_state_changes(moved, PartitionState.ONLINE, PreferredStrategy()))
        )
        harness.log.flush()
        wrong = [
            tp
            for tp in moved
            if (info := ctx.partition_leadership_info(tp)) is None or info.leader_and_isr.leader != dead
        ]
        if wrong:
            raise RuntimeError(f"{len(wrong)} partitions did not return to broker {dead}, e.g. {wrong[0]}")
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The elections' CPU on the controller's state machines, no ZooKeeper.")
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10, help="broker failures and returns (the first is warm-up)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the first round is warm-up)")
    started = time.perf_counter()
    harness = build(args.partitions, args.brokers)
    set_up_s = time.perf_counter() - started
    figures = run_rounds(harness, args.rounds, args.brokers)
    kept = {name: values[1:] for name, values in figures.items()}  # round 1 warms the interpreter's caches
    summary = {
        "partitions": args.partitions,
        "brokers": args.brokers,
        "rounds": args.rounds,
        "leaders_per_round": args.partitions // args.brokers,
        **{f"{name}_cpu_ms_min": round(1000 * min(values), 1) for name, values in kept.items()},
        **{f"{name}_cpu_ms_median": round(1000 * statistics.median(values), 1) for name, values in kept.items()},
        "set_up_s": round(set_up_s, 1),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{args.partitions:,} partitions, {args.brokers} brokers, {args.rounds - 1} timed rounds of "
            f"~{args.partitions // args.brokers:,} leaders each (set-up {set_up_s:.1f} s); CPU ms, min / median:"
        )
        for name, values in kept.items():
            print(f"  {name:20s} {1000 * min(values):8.1f} / {1000 * statistics.median(values):8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
