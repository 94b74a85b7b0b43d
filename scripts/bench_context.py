"""The controller context's memory at scale: what the partition table holds per partition.

``scripts/bench`` reports the controller's peak RSS over a whole round at a million partitions (~18
minutes, ~17 GB of the machine); most of that peak is transient (requests, their encodings, the
failover's snapshot record). This measures the part that stays: a ``ControllerContext`` loaded as a
failover loads it (assignments topic by topic, the leadership cache, every partition Online, every
replica Online), in this process, as the growth of its RSS. ~10 s and ~0.7 GB at 1,000,000. Then
the failover's state-snapshot record built from it (``controller_core.state_snapshot``) as the
controller builds it: its CPU, its JSON's size and the peak RSS it added over the context (``VmHWM``
reset through ``/proc/self/clear_refs``; Linux).

With ``--zookeeper`` the context is read instead through the real ``ZkStore`` from a private
ZooKeeper (started here with the partitions written in Kafka's layout, removed afterwards), as a cold
failover reads it (``Controller._load_controller_context`` without the watches): topics, assignments,
then every partition state, with each batch's initial states and start-up request states built as
it lands (``controller_core.failover_read``), then the two state machines' start-ups (requests built
for the fake harness's transport, not encoded). A fresh process does the read, so its figures are its
own: each phase's CPU (its thread's) and wall, the RSS the read keeps and the peak (``VmHWM``).
~1 minute at 200,000 partitions, most of it writing them.

Usage::

    .venv/bin/python scripts/bench_context.py [--partitions 1000000] [--brokers 5] [--json]
    .venv/bin/python scripts/bench_context.py --zookeeper [--partitions 200000] [--brokers 5] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from controller_core import malloc_policy  # noqa: E402 - after the path set-up above
from controller_core.context import ControllerContext  # noqa: E402
from controller_core.model import (  # noqa: E402
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.record_kinds import RecordKind  # noqa: E402
from controller_core.state_change_log import MemorySink, StateChangeLogger  # noqa: E402
from controller_core.state_snapshot import snapshot_json_fields  # noqa: E402
from controller_core.states import PartitionState, ReplicaState  # noqa: E402
from scripts.bench_elections import PER_TOPIC, ZooKeeperRounds, partition_at, replicas_at  # noqa: E402
from scripts.devservices import ZooKeeperServer, free_port  # noqa: E402
from scripts.support.fakes import broker, make_harness  # noqa: E402


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


def snapshot_record(ctx: ControllerContext) -> dict[str, float]:
    """Build the failover's state-snapshot record of ``ctx`` (as ``Controller._record_state_snapshot``
    does, into a sink that keeps it): its CPU, its JSON's size and the peak RSS it added."""
    gc.collect()
    before = rss_mb()
    with contextlib.suppress(OSError), open("/proc/self/clear_refs", "w") as clear_refs:
        clear_refs.write("5")  # VmHWM from here on (Linux 4.0+)
    started = time.process_time()
    log = StateChangeLogger(MemorySink(), ctx.controller_id, lambda: ctx.epoch)
    record = log.record_json(RecordKind.STATE_SNAPSHOT, snapshot_json_fields(ctx.table))
    return {
        "snapshot_cpu_s": round(time.process_time() - started, 3),
        "snapshot_json_mb": round(len(record.json) / 2**20, 1),
        "snapshot_peak_mb": round(vm_hwm_mb() - before, 1),
    }


def vm_hwm_mb() -> float:
    """This process's peak resident set so far (Linux ``VmHWM``), MB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def read_as_cold_failover(hosts: str, brokers: int) -> dict[str, float | int]:
    """Load a context from the ZooKeeper at ``hosts`` as a cold failover does (its reads, without the
    watches), with brokers 1 to ``brokers`` live, then run both state machines' start-ups on it as the
    cold failover does (over the fake harness's transport: requests built, not encoded or sent), in
    this process; each phase's CPU and wall seconds, the RSS the read kept and the peak."""
    from kazoo.client import KazooClient

    from controller_core.failover_read import read_partition_states
    from controller_core.standby.warm_context import start_partition_state_machine, start_replica_state_machine
    from controller_core.zk.store import ZkStore

    client = KazooClient(hosts=hosts, timeout=30.0)
    client.start(timeout=30)
    try:
        store = ZkStore(client)
        gc.collect()
        before, figures = rss_mb(), {}
        harness = make_harness(brokers=(), decide_from_cache=True)
        ctx = harness.ctx
        ctx.set_live_brokers([broker(b) for b in range(1, brokers + 1)])  # as read from /brokers/ids
        gc.disable()  # the controller pauses its collector during events (controller_core.gc_policy)
        clock = (time.thread_time(), time.perf_counter())

        def mark(phase: str) -> None:
            nonlocal clock
            now = (time.thread_time(), time.perf_counter())
            figures[f"{phase}_cpu_s"] = round(now[0] - clock[0], 3)
            figures[f"{phase}_wall_s"] = round(now[1] - clock[1], 3)
            clock = now

        topics = set(store.get_all_topics())
        ctx.set_all_topics(topics)
        for assignments in store.iter_replica_assignments(topics):  # as Controller._store_assignments
            for topic, assignment in assignments.items():
                by_partition = {tuple.__new__(TopicPartition, (topic, p)): a for p, a in assignment.partitions.items()}
                ctx.load_topic_assignment(topic, by_partition)
        mark("assignments")
        ctx.clear_partition_leadership_info()
        cold = read_partition_states(ctx, store)  # with the start-ups' states and requests built as it reads
        mark("partition_states")
        context_rss_mb = round(rss_mb() - before, 1)
        if cold is None:
            raise RuntimeError("the cold read built no start-up (replicas on failed log directories?)")
        start_replica_state_machine(harness.rsm, harness.replica_batch, ctx, harness.log, cold.kept)
        start_partition_state_machine(harness.psm, ctx, harness.log)
        mark("start_ups")
        gc.enable()
        return {
            "partitions": ctx.partition_count,
            "with_leaders": ctx.partition_with_leaders_count,
            "requests": len(harness.transport.sent),
            **figures,
            "context_rss_mb": context_rss_mb,
            "peak_rss_mb": round(vm_hwm_mb(), 1),
            "start_rss_mb": round(before, 1),
        }
    finally:
        client.stop()
        client.close()


@contextlib.contextmanager
def private_zookeeper(partitions: int) -> Iterator[str]:
    """A ZooKeeper of our own on loopback (heap 1 GB, or 2 KB per partition if more), removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench-context-") as base:
        heap = max(1024, partitions * 2048 // 2**20)
        server = ZooKeeperServer(host="127.0.0.1", port=free_port(), base_dir=Path(base), heap_mb=heap)
        server.start()
        try:
            yield server.connect_string
        finally:
            server.stop()


def on_zookeeper(partitions: int, brokers: int) -> dict[str, float | int]:
    """Write the partitions to a private ZooKeeper, then read them in a fresh process (its own RSS)."""
    with private_zookeeper(partitions) as hosts:
        started = time.perf_counter()
        ZooKeeperRounds(partitions, brokers, hosts).close()
        written_s = time.perf_counter() - started
        gc.collect()
        child = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--read-from", hosts, "--brokers", str(brokers)],
            capture_output=True,
            text=True,
            check=False,
        )
        if child.returncode != 0:
            raise RuntimeError(f"the reading process failed ({child.returncode}): {child.stderr[-2000:]}")
        figures: dict[str, float | int] = json.loads(child.stdout.strip().splitlines()[-1])
    figures["written_s"] = round(written_s, 1)
    figures["brokers"] = brokers
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The controller context's RSS at N partitions.")
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--zookeeper", action="store_true", help="read through ZkStore as a cold failover does")
    parser.add_argument("--read-from", metavar="HOSTS", help=argparse.SUPPRESS)  # the reading process
    args = parser.parse_args(argv)
    malloc_policy.give_large_blocks_back()  # as in a controller's process (its Controller sets it)
    if args.read_from:
        print(json.dumps(read_as_cold_failover(args.read_from, args.brokers)))
        return 0
    if args.partitions < 1 or args.brokers < 3:
        parser.error("--partitions must be at least 1 and --brokers at least 3 (replication factor 3)")
    if args.zookeeper:
        figures = on_zookeeper(args.partitions, args.brokers)
        if args.json:
            print(json.dumps(figures))
        else:
            print(
                f"{figures['partitions']:,} partitions read as a cold failover: assignments "
                f"{figures['assignments_cpu_s']} s CPU / {figures['assignments_wall_s']} s wall, partition states "
                f"{figures['partition_states_cpu_s']} s / {figures['partition_states_wall_s']} s, start-ups "
                f"{figures['start_ups_cpu_s']} s / {figures['start_ups_wall_s']} s; context "
                f"{figures['context_rss_mb']} MB of RSS, peak {figures['peak_rss_mb']} MB "
                f"(from {figures['start_rss_mb']} MB at the start)"
            )
        return 0
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
        **snapshot_record(ctx),
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(
            f"{summary['partitions']:,} partitions: context {summary['context_rss_mb']} MB of RSS "
            f"({summary['bytes_per_partition']} bytes each), loaded in {summary['load_cpu_s']} s of CPU; "
            f"state snapshot record {summary['snapshot_json_mb']} MB of JSON in {summary['snapshot_cpu_s']} s of "
            f"CPU, peak {summary['snapshot_peak_mb']} MB over the context"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
