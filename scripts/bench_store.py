#!/usr/bin/env python3
"""Benchmark ZkStore's batched reads and writes of partition-state znodes against one-at-a-time work.

What it does (``python scripts/bench_store.py [--partitions N | --quick] [--json]``):

1. Starts a private ZooKeeper (and Redis, which ``scripts.devservices.temporary_services`` always
   brings up; unused here) on free loopback ports under a temporary directory, and stops it at the end.
2. Elects a controller (epoch 1), creates topics of ``--partitions-per-topic`` partitions and N
   partition-state znodes through ``ZkStore.create_partition_states`` (timed: "create").
3. Times the same work done four ways:
   * read, batched: ``ZkStore.get_partition_states`` (multi-read, chunked under 900 KB, pipelined);
   * write, batched: ``ZkStore.update_leader_and_isr`` (conditional on the version read, fenced by the
     ``/controller_epoch`` version, many ops per multi, pipelined);
   * one at a time, pipelined: one ``get_async`` per znode / one fenced conditional multi
     ``[check(/controller_epoch), setData(state, version)]`` per znode (``commit_async``), with up to
     ``--window`` requests in flight — over all N znodes;
   * one at a time, sequential: synchronous ``get`` / fenced ``commit`` per znode on a sample of
     ``--sample`` znodes, **extrapolated** to N (marked ``*``).
   Every variant decodes (reads) or encodes (writes) Kafka's JSON, so the work is the same. The
   batched rows are the median of ``--repeat`` runs after one warm-up run (ZooKeeper's JIT makes a
   first sub-second run noisy); the one-at-a-time runs are long enough to need none.
4. Prints a table (time, throughput, time for N, speed-up of batched over each baseline) or, with
   ``--json``, the same figures as JSON. The target is batched >= 10x faster than one at a time.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import statistics
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kazoo.client import KazooClient  # noqa: E402

from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition  # noqa: E402
from controller_core.ports import ZkCode  # noqa: E402
from controller_core.zk import codecs, paths  # noqa: E402
from controller_core.zk.store import ControllerEpoch, ZkStore  # noqa: E402
from scripts.devservices import four_letter_word, temporary_services  # noqa: E402

TARGET_SPEEDUP = 10.0


@dataclass
class Row:
    operation: str
    method: str
    znodes: int
    seconds: float
    extrapolated: bool = False
    requests: int | None = None
    runs: list[float] | None = None  # every timed run when the row is a median

    @property
    def ops_per_second(self) -> float:
        return self.znodes / self.seconds if self.seconds > 0 else float("inf")

    def seconds_for(self, n: int) -> float:
        return self.seconds * n / self.znodes


# -- one-at-a-time baselines --------------------------------------------------------------------------
def _pipelined(
    items: Sequence[Any], submit: Callable[[Any], Any], finish: Callable[[Any, Any], None], window: int
) -> None:
    in_flight: deque[tuple[Any, Any]] = deque()
    for item in items:
        if len(in_flight) >= window:
            done_item, pending = in_flight.popleft()
            finish(done_item, pending.get(timeout=60))
        in_flight.append((item, submit(item)))
    while in_flight:
        done_item, pending = in_flight.popleft()
        finish(done_item, pending.get(timeout=60))


def _fenced_set(client: KazooClient, epoch: ControllerEpoch, tp: TopicPartition, lai: LeaderAndIsr) -> Any:
    tx = client.transaction()
    tx.check(paths.CONTROLLER_EPOCH_PATH, epoch.epoch_zk_version)
    tx.set_data(
        paths.partition_state_path(tp),
        codecs.encode_partition_state(LeaderIsrAndControllerEpoch(lai, epoch.epoch)),
        lai.zk_version,
    )
    return tx.commit_async()


def _check_fenced_result(tp: TopicPartition, results: list[Any]) -> int:
    if any(isinstance(r, Exception) for r in results):
        raise RuntimeError(f"one-at-a-time write of {tp} failed: {results}")
    return int(results[1].version)


# -- the benchmark ------------------------------------------------------------------------------------
def _zookeeper_version(host: str, port: int) -> str:
    for attempt in range(5):  # the four-letter word can time out on a busy machine
        found = re.search(r"version: ([0-9][0-9.]*)", four_letter_word(host, port, "srvr", timeout=10.0))
        if found:
            return found.group(1)
        time.sleep(0.5 * (attempt + 1))
    return "(version unknown)"


@contextmanager
def _zookeeper(hosts: str | None) -> Iterator[tuple[str, str]]:
    if hosts:
        yield hosts, "given"
        return
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp, temporary_services(Path(tmp)) as services:
        zk = services.zookeeper
        yield zk.connect_string, f"private, started for this run ({zk.connect_string})"


@dataclass(frozen=True)
class Settings:
    partitions: int = 100_000
    per_topic: int = 1000
    sample: int = 2000  # znodes for the sequential one-at-a-time runs
    window: int = 1000  # requests in flight for the pipelined one-at-a-time runs
    repeat: int = 3  # batched runs; the median is reported
    hosts: str | None = None  # an existing ZooKeeper instead of a private one


def run(settings: Settings, log: Callable[[str], None]) -> dict[str, Any]:
    """Run the benchmark and return the report (see ``render``)."""
    hosts = settings.hosts
    with _zookeeper(hosts) as (connect, origin):
        host, port = connect.split(",")[0].rsplit(":", 1)
        version = _zookeeper_version(host, int(port))
        chroot = f"/bench-store-{int(time.time() * 1000)}"
        admin = KazooClient(hosts=connect, timeout=30.0)
        admin.start(timeout=30)
        admin.ensure_path(chroot)
        admin.stop()
        client = KazooClient(hosts=connect + chroot, timeout=30.0)
        client.start(timeout=30)
        try:
            return _run(client, settings, origin, version, log)
        finally:
            client.stop()
            client.close()
            if hosts:  # do not leave 100k znodes behind on somebody else's server
                cleanup = KazooClient(hosts=connect, timeout=60.0)
                cleanup.start(timeout=30)
                cleanup.delete(chroot, recursive=True)
                cleanup.stop()


def _run(
    client: KazooClient, settings: Settings, origin: str, version: str, log: Callable[[str], None]
) -> dict[str, Any]:
    n, per_topic, sample = settings.partitions, settings.per_topic, settings.sample
    window, repeat = settings.window, settings.repeat
    store = ZkStore(client)
    store.ensure_persistent_paths()
    epoch = store.register_controller_and_increment_epoch(1)
    topics = [f"bench-{t:04d}" for t in range((n + per_topic - 1) // per_topic)]
    partitions: list[TopicPartition] = []
    log(f"creating {len(topics)} topics and {n:,} partition-state znodes ...")
    for i, topic in enumerate(topics):
        count = min(per_topic, n - i * per_topic)
        store.create_topic(topic, {p: [1, 2, 3] for p in range(count)})
        partitions.extend(TopicPartition(topic, p) for p in range(count))
    initial = {
        tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(1 + tp.partition % 3, 0, (1, 2, 3)), epoch.epoch)
        for tp in partitions
    }
    rows: list[Row] = []

    store.reset_counters()
    started = time.perf_counter()
    created = store.create_partition_states(initial, epoch.epoch_zk_version)
    rows.append(
        Row(
            "create",
            "batched: fenced multis (parents + states)",
            n,
            time.perf_counter() - started,
            requests=store.counters().multis,
        )
    )
    if set(created.values()) != {ZkCode.OK}:
        raise RuntimeError(f"creating the partition states failed: {set(created.values())}")

    # -- reads -----------------------------------------------------------------------------------
    log(f"reading: batched (one warm-up run, then the median of {repeat}) ...")
    store.get_partition_states(partitions)
    times = []
    for _ in range(repeat):
        store.reset_counters()
        started = time.perf_counter()
        reads = store.get_partition_states(partitions)
        times.append(time.perf_counter() - started)
    rows.append(
        Row(
            "read",
            "batched: ZkStore.get_partition_states (multi-read)",
            n,
            statistics.median(times),
            requests=store.counters().read_requests,
            runs=[round(t, 3) for t in times],
        )
    )
    current = {tp: r.state.leader_and_isr for tp, r in reads.items() if r.state is not None}
    if len(current) != n:
        raise RuntimeError("batched read missed partitions")

    log(f"reading: one at a time, pipelined (window {window}) ...")
    decoded: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
    started = time.perf_counter()
    _pipelined(
        partitions,
        lambda tp: client.get_async(paths.partition_state_path(tp)),
        lambda tp, value: decoded.__setitem__(tp, codecs.decode_partition_state(value[0], value[1].version)),
        window,
    )
    rows.append(
        Row(
            "read",
            f"one at a time: pipelined get_async (window {window})",
            n,
            time.perf_counter() - started,
            requests=n,
        )
    )

    k = min(sample, n)
    log(f"reading: one at a time, sequential (sample of {k:,}) ...")
    started = time.perf_counter()
    for tp in partitions[:k]:
        data, stat = client.get(paths.partition_state_path(tp))
        codecs.decode_partition_state(data, stat.version)
    rows.append(
        Row("read", "one at a time: sequential get", k, time.perf_counter() - started, extrapolated=k < n, requests=k)
    )

    # -- writes ----------------------------------------------------------------------------------
    log(f"writing: batched (one warm-up run, then the median of {repeat}) ...")
    warm_up = store.update_leader_and_isr(
        {tp: lai.new_epoch() for tp, lai in current.items()}, epoch.epoch, epoch.epoch_zk_version
    )
    current = {tp: lai for tp, lai in warm_up.finished.items() if isinstance(lai, LeaderAndIsr)}
    times = []
    for _ in range(repeat):
        store.reset_counters()
        started = time.perf_counter()
        result = store.update_leader_and_isr(
            {tp: lai.new_epoch() for tp, lai in current.items()}, epoch.epoch, epoch.epoch_zk_version
        )
        times.append(time.perf_counter() - started)
        if result.needs_retry or len(result.finished) != n:
            raise RuntimeError(f"batched write: {len(result.needs_retry)} version conflicts")
        current = {tp: lai for tp, lai in result.finished.items() if isinstance(lai, LeaderAndIsr)}
    rows.append(
        Row(
            "write",
            "batched: ZkStore.update_leader_and_isr (fenced multis)",
            n,
            statistics.median(times),
            requests=store.counters().multis,
            runs=[round(t, 3) for t in times],
        )
    )

    log(f"writing: one at a time, pipelined (window {window}) ...")
    started = time.perf_counter()
    _pipelined(
        partitions,
        lambda tp: _fenced_set(client, epoch, tp, current[tp].new_epoch()),
        lambda tp, results: current.__setitem__(
            tp, current[tp].new_epoch().with_zk_version(_check_fenced_result(tp, results))
        ),
        window,
    )
    rows.append(
        Row(
            "write",
            f"one at a time: pipelined fenced multi (window {window})",
            n,
            time.perf_counter() - started,
            requests=n,
        )
    )

    log(f"writing: one at a time, sequential (sample of {k:,}) ...")
    started = time.perf_counter()
    for tp in partitions[:k]:
        lai = current[tp].new_epoch()
        current[tp] = lai.with_zk_version(_check_fenced_result(tp, _fenced_set(client, epoch, tp, lai).get(timeout=60)))
    rows.append(
        Row(
            "write",
            "one at a time: sequential fenced multi",
            k,
            time.perf_counter() - started,
            extrapolated=k < n,
            requests=k,
        )
    )

    return _report(rows, n, repeat, origin, version, store)


def _report(rows: list[Row], n: int, repeat: int, origin: str, version: str, store: ZkStore) -> dict[str, Any]:
    batched = {r.operation: r for r in rows if r.method.startswith("batched")}
    out_rows = []
    for r in rows:
        base = batched[r.operation]
        out_rows.append(
            {
                **asdict(r),
                "ops_per_second": round(r.ops_per_second),
                "seconds_for_all": round(r.seconds_for(n), 3),
                "speedup_of_batched": None if r is base else round(r.seconds_for(n) / base.seconds_for(n), 1),
            }
        )
    speedups = [row["speedup_of_batched"] for row in out_rows if row["speedup_of_batched"] is not None]
    return {
        "partitions": n,
        "zookeeper": version,
        "server": origin,
        "max_multi_bytes": store.max_multi_bytes,
        "max_read_bytes": store.reader.max_batch_bytes,
        "max_in_flight": store.max_in_flight,
        "multi_read": store.reader.supported,
        "rows": out_rows,
        "repeat": repeat,
        "min_speedup": min(speedups),
        "target_speedup": TARGET_SPEEDUP,
        "target_met": min(speedups) >= TARGET_SPEEDUP,
    }


def render(report: dict[str, Any]) -> str:
    n = report["partitions"]
    lines = [
        f"ZkStore benchmark: {n:,} partition-state znodes; ZooKeeper {report['zookeeper']} ({report['server']})",
        f"multis <= {report['max_multi_bytes']:,} bytes ({report['max_in_flight']} in flight), "
        f"multi-reads <= {report['max_read_bytes']:,} bytes; multi-read supported: {report['multi_read']}",
        "",
        f"{'op':<7}{'method':<58}{'znodes':>9}{'requests':>10}{'seconds':>10}{'ops/s':>11}"
        f"{'time for all':>14}{'batched is':>12}",
    ]
    for row in report["rows"]:
        star = "*" if row["extrapolated"] else " "
        speed = "" if row["speedup_of_batched"] is None else f"{row['speedup_of_batched']:.1f}x faster"
        lines.append(
            f"{row['operation']:<7}{row['method']:<58}{row['znodes']:>9,}{row['requests'] or 0:>10,}"
            f"{row['seconds']:>10.3f}{row['ops_per_second']:>11,}{row['seconds_for_all']:>13.2f}{star}{speed:>12}"
        )
    lines += [
        "",
        "* extrapolated linearly from the sequential sample to all znodes. Batched read/write rows: median of "
        f"{report['repeat']} runs after one warm-up run.",
        "Every read decodes Kafka's JSON; every write is conditional on the version read and fenced by the",
        "/controller_epoch version (batched: one check per multi; one at a time: one check per znode).",
        f"Target: batched >= {report['target_speedup']:.0f}x faster than one at a time -> "
        f"{'MET' if report['target_met'] else 'NOT MET'} (smallest speed-up {report['min_speedup']:.1f}x).",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--partitions", type=int, default=100_000, help="partition-state znodes (default 100000)")
    parser.add_argument("--quick", action="store_true", help="20000 partitions")
    parser.add_argument("--partitions-per-topic", type=int, default=1000)
    parser.add_argument("--sample", type=int, default=2000, help="znodes for the sequential one-at-a-time runs")
    parser.add_argument("--window", type=int, default=1000, help="requests in flight for pipelined singles")
    parser.add_argument("--repeat", type=int, default=3, help="batched runs (the median is reported)")
    parser.add_argument("--zookeeper", help="use this ZooKeeper (host:port) instead of a private one")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    n = 20_000 if args.quick else args.partitions
    if min(n, args.partitions_per_topic, args.sample, args.window, args.repeat) < 1:
        parser.error("counts must be positive")

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.ERROR)  # its reconnect chatter is not a result

    settings = Settings(n, args.partitions_per_topic, args.sample, args.window, args.repeat, args.zookeeper)
    report = run(settings, log)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0 if report["target_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
