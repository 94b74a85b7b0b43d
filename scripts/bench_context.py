"""The controller context's memory at scale: what the partition table holds per partition.

``scripts/bench`` reports the controller's peak RSS over a whole round at a million partitions (~18
minutes, ~17 GB of the machine); most of that peak is transient (requests, their encodings, the
failover's snapshot record). This measures the part that stays: a ``ControllerContext`` loaded as a
failover loads it (assignments topic by topic, the leadership cache, every partition Online, every
replica Online), in this process, as the growth of its RSS. ~10 s and ~0.7 GB at 1,000,000.

Usage::

    .venv/bin/python scripts/bench_context.py [--partitions 1000000] [--brokers 5] [--json]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from controller_core.context import ControllerContext  # noqa: E402 - after the path set-up above
from controller_core.model import (  # noqa: E402
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.states import PartitionState, ReplicaState  # noqa: E402
from scripts.bench_elections import PER_TOPIC, partition_at, replicas_at  # noqa: E402
from scripts.support.fakes import broker  # noqa: E402


def rss_mb() -> float:
    """This process's resident set (Linux ``/proc/self/statm``), MB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20


def load(partitions: int, brokers: int) -> ControllerContext:
    """A context of ``partitions`` at RF 3 (topics of 50), loaded as a failover does; every value
    object its own, as decoding znodes makes them."""
    ctx = ControllerContext(controller_id=1)
    ctx.set_live_brokers([broker(b) for b in range(1, brokers + 1)])
    for first in range(0, partitions, PER_TOPIC):
        topic = partition_at(first).topic
        ctx.add_topics([topic])
        assignments: dict[TopicPartition, ReplicaAssignment] = {}
        leadership: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for i in range(first, min(first + PER_TOPIC, partitions)):
            replicas = tuple(replicas_at(i, brokers))
            tp = TopicPartition(topic, i - first)  # the topic's name shared, as decoding a topic znode gives
            assignments[tp] = ReplicaAssignment(replicas)
            leadership[tp] = LeaderIsrAndControllerEpoch(LeaderAndIsr(replicas[0], 0, tuple(replicas), 0), 1)
        ctx.load_topic_assignment(topic, assignments)
        ctx.load_partition_leadership_info(leadership)
    ctx.put_partition_states(dict.fromkeys(ctx.all_partitions(), PartitionState.ONLINE))
    ctx.load_replica_states({tp: dict.fromkeys(a.replicas, ReplicaState.ONLINE) for tp, a in ctx.iter_assignments()})
    return ctx


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The controller context's RSS at N partitions.")
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.partitions < 1 or args.brokers < 3:
        parser.error("--partitions must be at least 1 and --brokers at least 3 (replication factor 3)")
    gc.collect()
    before = rss_mb()
    started = time.process_time()
    ctx = load(args.partitions, args.brokers)
    gc.collect()
    summary = {
        "partitions": ctx.partition_count,
        "brokers": args.brokers,
        "context_rss_mb": round(rss_mb() - before, 1),
        "bytes_per_partition": round((rss_mb() - before) * 2**20 / args.partitions),
        "load_cpu_s": round(time.process_time() - started, 2),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{summary['partitions']:,} partitions: context {summary['context_rss_mb']} MB of RSS "
            f"({summary['bytes_per_partition']} bytes each), loaded in {summary['load_cpu_s']} s of CPU"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
