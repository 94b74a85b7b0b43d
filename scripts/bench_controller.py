#!/usr/bin/env python3
"""Benchmark the controller against a private ZooKeeper: failover, broker failure, controlled
shutdown, preferred election, and ZooKeeper's own floor for the same reads and writes.

``scripts/bench [--quick] [--partitions N] [--brokers B] [--runs R] [--unbatched-runs U] [--standby MODE]
[--scenarios all|failover] [--json]``

Set-up (once): a private ZooKeeper (``scripts.devservices.temporary_services``), N partitions in
Kafka's layout (topics of 50 partitions, RF 3, replicas spread over brokers 1..B, leader = preferred
replica, state znodes written with ``ZkStore.create_partition_states``), B lightweight broker agents
(``python -m controller_core.broker.main --lightweight``: real agents, replication off, every control
request answered), and two controller candidates, each its own process (``--serve-controller``, a
``ControllerRunner`` with auto rebalance off) so that RSS is the controller's alone. Each writes its
JSON-lines state-change log into the benchmark's temporary directory and, unless
``--no-redis-stream``, feeds the Redis state-change stream and status hash of a private Redis
(``workers.controller_redis``), as a deployment does.

Each run (the figures are the median of ``--runs``):

* ``failover_s``: SIGTERM the active controller (its session closes, ``/controller`` is deleted); the
  clock starts at the deletion as seen by a watch of the benchmark, and stops at the new controller's
  ``completed_at_ms`` in its "failover" record (context loaded, partitions and replicas started,
  LeaderAndIsr/UpdateMetadata enqueued to the brokers' senders). The killed candidate is restarted as
  the standby of the scenarios below: ``--standby warm`` (default) follows ZooKeeper as the product's
  does, ``cold`` only watches ``/controller``, ``none`` is no second candidate (what a warm standby
  costs the active controller on the same cores); the failovers start the standby they time.
* ``cold_failover_s``: the same, after the standby was replaced by a candidate started from nothing
  that does not follow ZooKeeper (``warm_standby=False``): the full reload. ``failover_s`` waits for
  the standby to report itself warm first (``controller_core.standby``); ``standby_rss_mb`` and
  ``cold_standby_rss_mb`` are the two standbys' resident memory just before they took over (the
  difference is what keeping the view costs).
* ``standby_lag_p99_s`` (``--standby warm``): after the broker failure below, once the standby's backlog
  is empty, the p99 of its lag (``now - mtime`` of each change it applied, its last 50,000 changes).
* ``broker_failure_s``: a broker agent is killed and its registration deleted; the clock stops when
  every partition it led has a new leader in ZooKeeper (the latest modification time of their state
  znodes, read once the controller's record below has come and every one is seen moved; nothing polls
  ZooKeeper while the controller works) **and** the controller has sent those elections'
  LeaderAndIsr to the brokers' senders (the wall-clock time of its ``request_batch`` record, forwarded
  on stdout), whichever is later. The controller sends them right after the elections, before the dead
  broker's ISR shrinks.
* ``controlled_shutdown_s``: POST ``/v1/controlled_shutdown`` for another broker to the controller's
  API; the answer stops the clock.
* ``preferred_election_s``: both brokers are restarted (leaders stay away from them), then
  ``/admin/preferred_replica_election`` is written for all N partitions; the clock stops at its
  deletion (seen by a watch).

Then the same scenarios ``--unbatched-runs`` times (default: ``--runs``) with both controllers
restarted with ``batched_writes=False`` (one fenced ``[check, setData]`` multi per partition,
1,000 in flight, as Kafka 1.1 writes; reads stay multi-reads): ``unbatched_failover_s``,
``unbatched_broker_failure_s``, ``unbatched_controlled_shutdown_s``, ``unbatched_preferred_election_s``.

After the runs, with the controllers stopped and the collector paused: ``zk_floor_read_s`` (N state
reads, batched multi-read, decoded), ``zk_floor_read_raw_s`` (the same reads as bytes and versions only)
and ``zk_floor_write_s`` (N/B conditional, fenced writes, batched multis) straight through ``ZkStore``;
``unbatched_zk_floor_write_s`` / ``unbatched_zk_floor_read_s``: the same work one znode per request
(pipelined, window 1000). Peak RSS is VmHWM of every controller process; events/s is the active
controller's events processed divided by its busy time (sum of per-state times).

What bounds each figure is printed with it: ``<scenario>_event_cpu_s`` is the controller's event
thread's own CPU in the scenario's events (``time.thread_time``, ``per_state_ms`` of ``/v1/status``),
``<scenario>_event_wall_s`` their wall time, ``<scenario>_process_cpu_s`` every thread of the
controller process. A figure close to its event CPU is bound by the controller's Python, not by
ZooKeeper.

This module is the command line and the run (rounds, phases, medians, report and table); the cluster
and its timed scenarios are ``scripts.bench_controller_rig``, the candidate processes
``scripts.bench_controller_proc``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from kazoo.client import KazooClient  # noqa: E402

from scripts.bench_controller_proc import REDIS_CLUSTER, http_json, serve_controller  # noqa: E402
from scripts.bench_controller_rig import PER_TOPIC, STANDBY_MODES, Bench, log, poll_until  # noqa: E402
from scripts.devservices import temporary_services  # noqa: E402

SCENARIO_SETS = ("all", "failover")
"""``--scenarios``: every scenario of a round, or only its two failovers (warm, cold)."""


def _scenarios(
    bench: Bench,
    r: int,
    samples: dict[str, list[float]],
    counts: dict[str, int],
    prefix: str,
    scenarios: str = "all",
) -> None:
    """One round: failover, broker failure, controlled shutdown, restart, preferred election
    (``scenarios="failover"``: the two failovers only)."""
    registrations = bench.registrations()
    bench.quiesce()
    samples.setdefault(prefix + "failover_s", []).append(bench.failover())
    bench.quiesce()
    samples.setdefault(prefix + "cold_failover_s", []).append(bench.failover(warm=False))
    if scenarios == "failover":
        return
    victim = 1 + (2 * r) % bench.brokers
    bench.quiesce()
    s, led = bench.broker_failure(victim)
    samples.setdefault(prefix + "broker_failure_s", []).append(s)
    if bench.standby == "warm":
        samples.setdefault(prefix + "standby_lag_p99_s", []).append(bench.standby_lag_p99_s())
    counts["broker_failure_leaders"] = led
    bench.quiesce()
    shut = _shutdown_target(bench, victim)
    s, led = bench.controlled_shutdown(shut)
    samples.setdefault(prefix + "controlled_shutdown_s", []).append(s)
    counts["controlled_shutdown_leaders"] = led
    bench.restart_brokers([victim, shut])
    bench.quiesce()
    s, moved = bench.preferred_election()
    samples.setdefault(prefix + "preferred_election_s", []).append(s)
    counts["preferred_election_moved"] = moved
    bench.idle(bench.active())
    restarted = {victim, shut}  # re-registered by the round itself
    now = bench.registrations()
    bounced = sorted(b for b, czxid in now.items() if b not in restarted and registrations.get(b) not in (None, czxid))
    if bounced:
        # An agent at nice 19 starved past its session timeout: the controller then handled a broker
        # failure nobody asked for, inside one of the timed scenarios or between them.
        log(f"  WARNING: broker(s) {bounced} re-registered during this round (agent session expired)")


def _stream_length(redis_url: str) -> int:
    import redis

    from dashboard.lib.redis_keys import state_change_stream_key

    client = redis.Redis.from_url(redis_url)
    try:
        return int(client.xlen(state_change_stream_key(REDIS_CLUSTER)))
    finally:
        client.close()


def _shutdown_target(bench: Bench, victim: int) -> int:
    """The broker to shut down: of those still registered, the one leading closest to N/B partitions.

    Not the broker that inherited most of the victim's leaders (it leads more than N/B), and never one
    that leads nothing because its own agent bounced (the figure would then measure an empty shutdown).
    """
    per_broker = Counter(bench.leaders(bench.partitions).values())
    target = len(bench.partitions) / bench.brokers
    candidates = [b for b in bench.registrations() if b != victim]
    if not candidates:
        raise RuntimeError("no registered broker left to shut down: the agents' ZooKeeper sessions expired")
    return min(candidates, key=lambda b: (abs(per_broker[b] - target), b))


def run(
    n: int,
    brokers: int,
    runs: int,
    unbatched_runs: int = 0,
    agent_nice: int = 0,
    redis_stream: bool = True,
    standby: str = "warm",
    scenarios: str = "all",
) -> dict[str, Any]:
    wall = time.perf_counter()
    # ZooKeeper keeps every znode on its heap: ~5 KB per partition with its topic and watches (512 MB
    # is plenty at 100,000; a million partitions need several GB).
    zk_heap_mb = max(512, n * 5 // 1000)
    with (
        tempfile.TemporaryDirectory(prefix="bench-ctl-") as tmp,
        temporary_services(Path(tmp), zk_heap_mb=zk_heap_mb) as services,
    ):
        root = services.zookeeper.connect_string
        admin = KazooClient(hosts=root, timeout=30.0)
        admin.start(timeout=30)
        admin.ensure_path("/bench")
        admin.stop()
        admin.close()
        redis_url = services.redis.url if redis_stream else None
        bench = Bench(
            root + "/bench",
            n,
            brokers,
            agent_nice,
            state_change_dir=Path(tmp) / "state-change-log",
            redis_url=redis_url,
            # By its pid file: ``services.zookeeper`` is a new handle at each access (its ``process`` None).
            zookeeper_pid=services.zookeeper.recorded_pid(),
            standby=standby,
        )
        try:
            log(f"creating {n:,} partitions ({n // PER_TOPIC} topics x {PER_TOPIC}, RF 3, {brokers} brokers) ...")
            started = time.perf_counter()
            bench.populate()
            log(f"  created in {time.perf_counter() - started:.1f} s; starting {brokers} lightweight agents ...")
            for b in range(1, brokers + 1):
                bench.start_agent(b)
            poll_until(lambda: all(bench.registered(b) for b in range(1, brokers + 1)), 120, "brokers")
            first = bench.start_controller(1)
            poll_until(lambda: bool(first.failovers), 600, "the first failover")
            log(f"  first failover (cold): {first.failovers[0]['duration_ms'] / 1000:.3f} s")
            if standby != "none":
                bench.start_controller(2, warm=standby == "warm")
            bench.idle(first)
            samples: dict[str, list[float]] = {}
            counts: dict[str, int] = {}
            for r in range(runs):
                log(f"run {r + 1}/{runs}")
                _scenarios(bench, r, samples, counts, "", scenarios)
            status = http_json(bench.active().url or "", "GET", "/v1/status")
            if unbatched_runs:
                # The same scenarios with one fenced write per partition (Kafka 1.1): replace the
                # standby by an unbatched one, fail over to it, and restart the old one unbatched too.
                log("unbatched controllers: one fenced write per partition, pipelined (Kafka 1.1 style)")
                bench.batched = False
                active = bench.active()
                second = next((c for c in bench.controllers.values() if c is not active), None)
                if second is not None:
                    bench.rss.append(second.stop())
                    bench.start_controller(second.id, warm=second.warm_standby)
                for r in range(unbatched_runs):
                    log(f"unbatched run {r + 1}/{unbatched_runs}")
                    _scenarios(bench, runs + r, samples, counts, "unbatched_", scenarios)
            busy_ms = sum(v["total_ms"] for k, v in status["per_state_ms"].items() if k != "IDLE")
            events_per_s = status["events_processed"] / (busy_ms / 1000) if busy_ms else 0.0
            for c in list(bench.controllers.values()):
                bench.rss.append(c.stop())
            if redis_url is not None:
                stream_entries = _stream_length(redis_url)
                log(f"the controllers' Redis state-change stream holds {stream_entries:,} entries")
            writes = counts.get("broker_failure_leaders", n // brokers)
            log(f"ZooKeeper floor: {n:,} reads, {writes:,} fenced writes ({runs} runs) ...")
            for _ in range(runs):
                for k, v in bench.floors(writes).items():
                    samples.setdefault(k, []).append(v)
        finally:
            bench.close()
    report: dict[str, Any] = {"partitions": n, "brokers": brokers, "runs": runs, "replication_factor": 3}
    for key, values in samples.items():
        report[key] = round(statistics.median(values), 3)
        report[key + "_runs"] = [round(x, 3) for x in values]
    report.update(counts)
    for warm, key in ((True, "standby_rss_mb"), (False, "cold_standby_rss_mb")):
        if bench.standby_rss_mb.get(warm):
            report[key] = round(statistics.median(bench.standby_rss_mb[warm]), 1)
    report["failover_phases_ms"] = bench.failover_phases  # per failover, batched runs first
    for scenario, figures in bench.cpu.items():
        for key in ("event_cpu_s", "event_wall_s", "process_cpu_s"):
            values = [f[key] for f in figures]
            report[f"{scenario}_{key}"] = round(statistics.median(values), 3)
            report[f"{scenario}_{key}_runs"] = values
    for scenario, per_run in bench.thread_cpu.items():
        report[f"{scenario}_thread_cpu_s_runs"] = per_run
    for scenario, per_run in bench.machine_cpu.items():
        report[f"{scenario}_machine_cpu_runs"] = per_run
    report["controller_peak_rss_mb"] = round(max(bench.rss, default=0.0), 1)
    report["events_processed"] = status["events_processed"]
    report["events_per_s_busy"] = round(events_per_s, 1)
    report["controller_busy_s"] = round(busy_ms / 1000, 3)
    report["brokers_kind"] = "lightweight broker agents (controller_core.broker.main --lightweight)"
    report["agent_nice"] = agent_nice
    report["redis_stream"] = redis_stream
    report["standby"] = standby
    report["scenarios"] = scenarios
    report["machine"] = f"{os.cpu_count()} CPUs, {os.uname().sysname} {os.uname().release}"
    report["wall_s"] = round(time.perf_counter() - wall, 1)
    return report


KEYS = [
    "failover_s",
    "cold_failover_s",
    "standby_lag_p99_s",
    "broker_failure_s",
    "controlled_shutdown_s",
    "preferred_election_s",
    "zk_floor_read_s",
    "zk_floor_read_raw_s",
    "zk_floor_write_s",
    "unbatched_failover_s",
    "unbatched_cold_failover_s",
    "unbatched_broker_failure_s",
    "unbatched_controlled_shutdown_s",
    "unbatched_preferred_election_s",
    "unbatched_zk_floor_read_s",
    "unbatched_zk_floor_write_s",
]


def render(report: Mapping[str, Any]) -> str:
    lines = [
        f"controller benchmark: {report['partitions']:,} partitions, RF 3, {report['brokers']} brokers, "
        f"median of {report['runs']} run(s)",
        f"{'figure':<34}{'median s':>10}  runs",
    ]
    for k in KEYS:
        if k in report:
            lines.append(f"{k:<34}{report[k]:>10.3f}  {report[k + '_runs']}")
        scenario = k.removesuffix("_s")
        if scenario + "_event_cpu_s" in report:
            lines.append(
                f"{'  event thread CPU / process CPU':<34}{report[scenario + '_event_cpu_s']:>10.3f}"
                f"  / {report[scenario + '_process_cpu_s']:.3f} s"
            )
    lines += [
        f"{'broker_failure_leaders':<34}{report.get('broker_failure_leaders', 0):>10,}",
        f"{'controlled_shutdown_leaders':<34}{report.get('controlled_shutdown_leaders', 0):>10,}",
        f"{'preferred_election_moved':<34}{report.get('preferred_election_moved', 0):>10,}",
        f"{'controller_peak_rss_mb':<34}{report['controller_peak_rss_mb']:>10.1f}",
        f"{'standby_rss_mb (warm / cold)':<34}{report.get('standby_rss_mb', 0):>10.1f}"
        f"  / {report.get('cold_standby_rss_mb', 0):.1f}",
        f"{'events_per_s_busy':<34}{report['events_per_s_busy']:>10.1f}",
        f"wall time {report['wall_s']} s; brokers: {report['brokers_kind']}, nice {report['agent_nice']}; "
        f"controllers feed the Redis state-change stream: {'yes' if report.get('redis_stream') else 'no'}; "
        f"standby during the scenarios: {report.get('standby', 'warm')}",
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 run, 10,000 partitions")
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--brokers", type=int, default=5)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--unbatched-runs",
        type=int,
        default=None,
        help="rounds of the scenarios with batching off (one fenced write per partition); default: --runs",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    parser.add_argument("--profile", metavar="DIR", help="cProfile the controller processes into DIR (slower)")
    parser.add_argument(
        "--agent-nice",
        type=int,
        default=19,
        help="niceness of the broker agents (default 19: they stand in for other machines; 0: compete as equals)",
    )
    parser.add_argument(
        "--no-redis-stream",
        action="store_true",
        help="controllers without the Redis state-change stream and status hash every deployment feeds",
    )
    parser.add_argument(
        "--standby",
        choices=STANDBY_MODES,
        default="warm",
        help=(
            "the second candidate during the broker failure, controlled shutdown and preferred election: "
            "warm follows every write (default, as the product runs), cold only watches /controller, none"
        ),
    )
    parser.add_argument(
        "--scenarios",
        choices=SCENARIO_SETS,
        default="all",
        help="all (default) or failover: only the warm and cold failovers of each round (and the floors)",
    )
    parser.add_argument("--serve-controller", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--zookeeper", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--unbatched", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cold-standby", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--state-change-dir", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_controller is not None:
        return serve_controller(
            args.serve_controller,
            args.zookeeper,
            not args.unbatched,
            args.state_change_dir,
            args.redis_url,
            warm_standby=not args.cold_standby,
        )
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    # SIGTERM (e.g. from `timeout`) unwinds like Ctrl-C, so that agents, controllers and ZooKeeper stop
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    n, runs = (10_000, 1) if args.quick else (args.partitions, args.runs)
    if args.profile:
        Path(args.profile).mkdir(parents=True, exist_ok=True)
        os.environ["BENCH_PROFILE_DIR"] = str(Path(args.profile).resolve())
    if args.brokers < 3 or n < 1 or runs < 1:
        parser.error("need >= 3 brokers, >= 1 partition, >= 1 run")
    unbatched_runs = runs if args.unbatched_runs is None else args.unbatched_runs
    if unbatched_runs < 0:
        parser.error("--unbatched-runs must be >= 0")
    if not 0 <= args.agent_nice <= 19:
        parser.error("--agent-nice must be 0 to 19")
    report = run(
        n, args.brokers, runs, unbatched_runs, args.agent_nice, not args.no_redis_stream, args.standby, args.scenarios
    )
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
