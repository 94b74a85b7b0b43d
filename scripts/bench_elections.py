"""The elections' CPU, measured on the controller's own state machines over an in-memory store.

``scripts/bench`` measures the controller end to end against a real ZooKeeper, and its figures move
by 10 to 15 % between invocations on a shared 2-core VM. The per-partition work that bounds the broker
failure and the preferred election (docs/performance.md, "What bounds each figure") needs a steadier
measure to compare two versions of the code. This runs the partition state machine, the context, the
request batch and the deferred state-change log wired by ``scripts.support.fakes.make_harness`` (its store keeps
ZooKeeper's conditional-write rules) through several rounds in one process, and reports the CPU of
each step on the calling thread:

* ``broker_failure``: one broker's partitions to Offline, then the offline elections and their
  requests, as ``Controller._elect_offline_leaders`` does (the dead broker's ISR removals come after the
  send and are not included);
* ``records``: building the deferred state-change records of that step afterwards;
* ``preferred_election``: the same partitions back to their preferred leader once it is in the ISR again;
* ``replica_startup``: the replica state machine's start-up over every partition (a failover's, the
  warm standby's takeover included: every replica state initialised and a LeaderAndIsr per online
  replica and an UpdateMetadata of every partition to every broker built and sent), with no replica
  state recorded before it; fake store only.
* ``controlled_shutdown``: after the rounds, brokers 1, 4, 7, ... (three apart, so that no two share a
  partition at RF 3) shut down one after the other through ``controller_core.controlled_shutdown``, as
  the controller runs it once it has accepted the request: 10,000 leaders elected away and the broker
  out of the ISR of the 20,000 partitions it follows at 100,000 partitions and 10 brokers (the
  ``controlled_shutdown_s`` of ``scripts/bench``); the first is warm-up, so it needs ``--brokers 7``
  or more.

With ``--zookeeper`` the state machines write through the real ``ZkStore`` to a private ZooKeeper
(started here, removed afterwards) and each step also reports its wall time, next to
``write_floor``: the same number of conditional writes made straight through the store, in the same
round, as ``scripts/bench``'s ``zk_floor_write_s``. Wall minus CPU is what the event thread waited
for; CPU over the floor is the part of ``broker_failure_s / zk_floor_write_s`` no overlap can remove.

Usage::

    .venv/bin/python scripts/bench_elections.py [--partitions 100000] [--brokers 10] [--rounds 10]
                                                [--zookeeper] [--json]

To compare two checkouts, run both alternately and compare the best rounds: the median moves with
the machine, the minimum much less.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

from kazoo.client import KazooClient  # noqa: E402 - after the path set-up above

from controller_core.controlled_shutdown import move_off_broker  # noqa: E402
from controller_core.election import PreferredStrategy  # noqa: E402
from controller_core.gc_policy import gc_paused  # noqa: E402
from controller_core.model import (  # noqa: E402
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.partition_state_machine import PartitionStateMachine  # noqa: E402
from controller_core.ports import ZkCode  # noqa: E402
from controller_core.replica_state_machine import ReplicaStateMachine  # noqa: E402
from controller_core.state_change_log import DEFERRED_RECORDS  # noqa: E402
from controller_core.states import PartitionState, ReplicaState  # noqa: E402
from controller_core.zk.store import ControllerEpoch, ZkStore  # noqa: E402
from scripts.devservices import ZooKeeperServer, free_port  # noqa: E402
from scripts.support.fakes import Harness, broker, make_harness  # noqa: E402

PER_TOPIC = 50


def _check_shape(partitions: int, brokers: int) -> None:
    if brokers < 3:
        raise SystemExit("--brokers must be at least 3 (replication factor 3)")
    if partitions < brokers:
        raise SystemExit("--partitions must be at least --brokers")


def replicas_at(i: int, brokers: int) -> list[int]:
    """Partition ``i``'s replicas at RF 3: leaders spread evenly over the brokers."""
    first = i % brokers
    return [(first + k) % brokers + 1 for k in range(3)]


def partition_at(i: int) -> TopicPartition:
    return TopicPartition(f"t{i // PER_TOPIC:05d}", i % PER_TOPIC)


def build(partitions: int, brokers: int) -> Harness:
    """A controller core over the fake store: ``partitions`` at RF 3, leaders spread evenly."""
    _check_shape(partitions, brokers)
    # As the controller: decisions on the cache, records built after the event.
    harness = make_harness(brokers=range(1, brokers + 1), decide_from_cache=True, defer_records=DEFERRED_RECORDS)
    for i in range(partitions):
        replicas = replicas_at(i, brokers)
        harness.seed_partition(
            partition_at(i),
            replicas,
            leader=replicas[0],
            partition_state=PartitionState.ONLINE,
            replica_state=ReplicaState.ONLINE,
        )
    return harness


class ZooKeeperRounds:
    """The same controller core writing through ``ZkStore`` to a ZooKeeper (``hosts``, an empty chroot).

    The topics and their state znodes are created there in Kafka's layout and the context is seeded
    with what was written, as a failover would load it. The partition state machine is rebuilt on
    ``ZkStore``; the harness's fake store stays unused.
    """

    def __init__(self, partitions: int, brokers: int, hosts: str) -> None:
        _check_shape(partitions, brokers)
        self.client = KazooClient(hosts=hosts, timeout=30.0)
        self.client.start(timeout=30)
        try:
            self._seed(partitions, brokers)
        except BaseException:
            self.close()
            raise

    def _seed(self, partitions: int, brokers: int) -> None:
        self.store = ZkStore(self.client)
        self.store.ensure_persistent_paths()
        self.epoch: ControllerEpoch = self.store.register_controller_and_increment_epoch(1)
        self.harness = make_harness(
            brokers=range(1, brokers + 1),
            epoch=self.epoch.epoch,
            epoch_zk_version=self.epoch.epoch_zk_version,
            decide_from_cache=True,
            defer_records=DEFERRED_RECORDS,
        )
        ctx = self.harness.ctx
        states: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for first in range(0, partitions, PER_TOPIC):
            indices = range(first, min(first + PER_TOPIC, partitions))
            topic = partition_at(first).topic
            assignment = {partition_at(i).partition: replicas_at(i, brokers) for i in indices}
            self.store.create_topic(topic, assignment)
            ctx.add_topics([topic])
            for partition, replicas in assignment.items():
                tp = TopicPartition(topic, partition)
                ctx.update_partition_full_replica_assignment(tp, ReplicaAssignment.of(replicas))
                first_state = LeaderAndIsr(replicas[0], 0, tuple(replicas))
                states[tp] = LeaderIsrAndControllerEpoch(first_state, self.epoch.epoch)
                ctx.put_partition_state(tp, PartitionState.ONLINE)
        created = self.store.create_partition_states(states, self.epoch.epoch_zk_version)
        if set(created.values()) != {ZkCode.OK}:
            raise RuntimeError("could not create the partitions' state znodes")
        ctx.put_partition_leadership_infos(list(states.items()))
        for b in range(1, brokers + 1):  # every replica Online, as after a failover's start-up
            ctx.move_replica_ids_of_broker(b, ctx.partition_ids_on_broker(b), ReplicaState.ONLINE)
        self.harness.psm = PartitionStateMachine(
            ctx, self.store, self.harness.partition_batch, self.harness.log, decide_from_cache=True
        )
        self.harness.rsm = ReplicaStateMachine(
            ctx, self.store, self.harness.replica_batch, self.harness.log, decide_from_cache=True
        )

    def write(self, states: dict[TopicPartition, LeaderAndIsr]) -> float:
        """Write ``states`` straight through the store and cache what was written; the wall seconds of
        the store's call."""
        started = time.perf_counter()
        result = self.store.update_leader_and_isr(states, self.epoch.epoch, self.epoch.epoch_zk_version)
        elapsed = time.perf_counter() - started
        written: list[tuple[TopicPartition, LeaderIsrAndControllerEpoch]] = []
        for tp, outcome in result.finished.items():
            if not isinstance(outcome, LeaderAndIsr):
                raise RuntimeError(f"a direct write of {tp}'s state failed: {outcome}")
            written.append((tp, LeaderIsrAndControllerEpoch(outcome, self.epoch.epoch)))
        if result.needs_retry:
            raise RuntimeError("a direct state write conflicted: the benchmark's cache is out of step")
        self.harness.ctx.put_partition_leadership_infos(written)
        return elapsed

    def rejoin(self, partitions: Sequence[TopicPartition], returning: int) -> None:
        """The returning broker back in the ISR of ``partitions`` (its leaders' AlterIsr)."""
        ctx = self.harness.ctx
        current = {tp: _cached(ctx.partition_leadership_info(tp)) for tp in partitions}
        self.write(
            {tp: LeaderAndIsr(s.leader, s.leader_epoch, (*s.isr, returning), s.zk_version) for tp, s in current.items()}
        )

    def floor(self, partitions: Sequence[TopicPartition]) -> float:
        """Wall seconds of one conditional write per partition (a new leader epoch), straight through the
        store with the collector paused: ``scripts/bench``'s ``zk_floor_write_s`` for these partitions."""
        ctx = self.harness.ctx
        states = {tp: _cached(ctx.partition_leadership_info(tp)).new_epoch() for tp in partitions}
        gc.collect()
        with gc_paused():  # as bench_controller's floors
            return self.write(states)

    def close(self) -> None:
        self.client.stop()
        self.client.close()


def _cached(info: LeaderIsrAndControllerEpoch | None) -> LeaderAndIsr:
    if info is None:
        raise RuntimeError("a partition has no cached state")
    return info.leader_and_isr


@contextlib.contextmanager
def private_zookeeper() -> Iterator[str]:
    """A ZooKeeper of our own on loopback (1 GB heap), in a temporary directory removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="bench-elections-") as base:
        server = ZooKeeperServer(host="127.0.0.1", port=free_port(), base_dir=Path(base), heap_mb=1024)
        server.start()
        try:
            yield server.connect_string
        finally:
            server.stop()


def _timed(step: Callable[[], object]) -> tuple[float, float]:
    """(CPU seconds on this thread, wall seconds) of ``step``, the collector paused as the controller
    pauses it."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        started_cpu, started = time.thread_time(), time.perf_counter()
        step()
        return time.thread_time() - started_cpu, time.perf_counter() - started
    finally:
        gc.enable()


def run_rounds(
    harness: Harness, rounds: int, brokers: int, on_zookeeper: ZooKeeperRounds | None = None
) -> dict[str, list[float]]:
    """Fail and restore one broker per round (1, 2, ... in turn); CPU seconds of each step per round
    (and, on ZooKeeper, their wall seconds and the write floor for the same partitions)."""
    ctx, psm, store = harness.ctx, harness.psm, harness.store
    steps: tuple[str, ...] = ("broker_failure", "records", "preferred_election")
    if on_zookeeper is None:
        steps += ("replica_startup",)
    figures: dict[str, list[float]] = {step: [] for step in steps}
    if on_zookeeper is not None:
        figures.update({f"{step}_wall": [] for step in steps})
        figures["write_floor_wall"] = []
    moved: list[TopicPartition] = []

    def timed(step: str, work: Callable[[], object]) -> None:
        cpu, wall = _timed(work)
        figures[step].append(cpu)
        if on_zookeeper is not None:
            figures[f"{step}_wall"].append(wall)

    for i in range(rounds):
        dead = i % brokers + 1
        store.update_calls.clear()
        harness.transport.clear()
        harness.sink.records.clear()

        def fail(dead: int = dead) -> None:
            ctx.remove_live_brokers([dead])
            offline = ctx.partition_ids_with_offline_leader()  # as Controller._elect_offline_leaders
            psm.handle_partition_ids(offline, PartitionState.OFFLINE)
            psm.trigger_online_partition_state_change()
            moved[:] = sorted(ctx.partitions_of(offline))

        timed("broker_failure", fail)
        timed("records", harness.log.flush)
        # The broker returns and catches up (its leaders' AlterIsr puts it back in the ISR).
        ctx.add_live_brokers([broker(dead)])
        if on_zookeeper is not None:
            figures["write_floor_wall"].append(on_zookeeper.floor(moved))
            on_zookeeper.rejoin(moved, dead)
        else:
            for tp in moved:
                store.leader_isr_change(tp, (*store.znodes[tp].isr, dead))
                state = store.state(tp)
                assert state is not None
                ctx.put_partition_leadership_info(tp, state)
        timed("preferred_election", lambda: psm.handle_state_changes(moved, PartitionState.ONLINE, PreferredStrategy()))
        harness.log.flush()
        if on_zookeeper is None:
            ctx.table.replica_states[:] = [None] * len(ctx.table.replica_states)  # as a new context holds
            harness.transport.clear()
            timed("replica_startup", harness.rsm.startup)
            harness.log.flush()
        wrong = [
            tp
            for tp in moved
            if (info := ctx.partition_leadership_info(tp)) is None or info.leader_and_isr.leader != dead
        ]
        if wrong:
            raise RuntimeError(f"{len(wrong)} partitions did not return to broker {dead}, e.g. {wrong[0]}")
    return figures


def shutdown_brokers(brokers: int) -> list[int]:
    """Brokers 1, 4, 7, ...: at RF 3 with replicas ``[b, b+1, b+2]`` rotated, brokers at least three
    apart (around the ring too) share no partition, so each shutdown finds its partitions untouched."""
    return [b for b in range(1, brokers + 1, 3) if brokers - b >= 2 or b == 1]


def shutdown_rounds(
    harness: Harness, brokers: int, on_zookeeper: ZooKeeperRounds | None = None
) -> dict[str, list[float]]:
    """Shut down ``shutdown_brokers(brokers)`` in turn; CPU seconds of each (and, on ZooKeeper, wall)."""
    ctx = harness.ctx
    figures: dict[str, list[float]] = {"controlled_shutdown": []}
    if on_zookeeper is not None:
        figures["controlled_shutdown_wall"] = []
    for b in shutdown_brokers(brokers):
        harness.transport.clear()
        harness.sink.records.clear()
        led = len(ctx.partition_leaders_on_broker(b))
        ctx.add_shutting_down_broker(b)

        def shut_down(b: int = b) -> None:
            move_off_broker(ctx, harness.psm, harness.rsm, harness.partition_batch, lambda: None, b)

        cpu, wall = _timed(shut_down)
        harness.log.flush()
        left = ctx.partition_leaders_on_broker(b)
        if left or not led:
            raise RuntimeError(f"broker {b} led {led} partitions and still leads {len(left)} after its shutdown")
        figures["controlled_shutdown"].append(cpu)
        if on_zookeeper is not None:
            figures["controlled_shutdown_wall"].append(wall)
    return figures


def _summary_key(name: str, stat: str) -> str:
    return f"{name}_ms_{stat}" if name.endswith("_wall") else f"{name}_cpu_ms_{stat}"


def _ratios(figures: dict[str, list[float]], name: str) -> list[float]:
    return [value / floor for value, floor in zip(figures[name], figures["write_floor_wall"], strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The elections' CPU on the controller's state machines.")
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=10, help="broker failures and returns (the first is warm-up)")
    parser.add_argument(
        "--zookeeper",
        action="store_true",
        help="write through ZkStore to a private ZooKeeper; report wall times and the write floor too",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.rounds < 2:
        parser.error("--rounds must be at least 2 (the first round is warm-up)")
    _check_shape(args.partitions, args.brokers)
    with contextlib.ExitStack() as stack:
        started = time.perf_counter()
        on_zookeeper: ZooKeeperRounds | None = None
        if args.zookeeper:
            print("starting a private ZooKeeper ...", file=sys.stderr, flush=True)
            hosts = stack.enter_context(private_zookeeper())
            print(f"writing {args.partitions:,} partitions in Kafka's layout ...", file=sys.stderr, flush=True)
            on_zookeeper = ZooKeeperRounds(args.partitions, args.brokers, hosts)
            stack.callback(on_zookeeper.close)
            harness = on_zookeeper.harness
        else:
            harness = build(args.partitions, args.brokers)
        set_up_s = time.perf_counter() - started
        print(f"set up in {set_up_s:.1f} s; {args.rounds} rounds ...", file=sys.stderr, flush=True)
        figures = run_rounds(harness, args.rounds, args.brokers, on_zookeeper)
        if len(shutdown_brokers(args.brokers)) >= 2:
            figures.update(shutdown_rounds(harness, args.brokers, on_zookeeper))
    kept = {name: values[1:] for name, values in figures.items()}  # round 1 warms the interpreter's caches
    summary: dict[str, object] = {
        "partitions": args.partitions,
        "brokers": args.brokers,
        "rounds": args.rounds,
        "store": "zookeeper" if args.zookeeper else "fake",
        "leaders_per_round": args.partitions // args.brokers,
        **{_summary_key(name, "min"): round(1000 * min(values), 1) for name, values in kept.items()},
        **{_summary_key(name, "median"): round(1000 * statistics.median(values), 1) for name, values in kept.items()},
        "set_up_s": round(set_up_s, 1),
    }
    if args.zookeeper:
        for key, name in (("broker_failure_wall", "broker_failure_wall"), ("broker_failure_cpu", "broker_failure")):
            ratios = _ratios(kept, name)
            summary[f"{key}_over_floor_min"] = round(min(ratios), 2)
            summary[f"{key}_over_floor_median"] = round(statistics.median(ratios), 2)
    if args.json:
        print(json.dumps(summary))
        return 0
    print(
        f"{args.partitions:,} partitions, {args.brokers} brokers, {args.rounds - 1} timed rounds of "
        f"~{args.partitions // args.brokers:,} leaders each, {summary['store']} store (set-up {set_up_s:.1f} s); "
        "ms, min / median:"
    )
    for name, values in kept.items():
        label = name.replace("_wall", " (wall)") if name.endswith("_wall") else f"{name} (CPU)"
        print(f"  {label:28s} {1000 * min(values):8.1f} / {1000 * statistics.median(values):8.1f}")
    if args.zookeeper:
        for key, label in (("broker_failure_wall", "wall"), ("broker_failure_cpu", "CPU")):
            print(
                f"  broker_failure {label} / write floor: {summary[f'{key}_over_floor_min']} / "
                f"{summary[f'{key}_over_floor_median']} x"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
