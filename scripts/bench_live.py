"""Benchmark the live path: ZooKeeper write -> mirror -> Redis -> Channels -> browser, at 100,000 partitions.

What it does (everything private, ``scripts.support.live_rig``: its own ZooKeeper and Redis on free
loopback ports, a temporary database, daphne and ``run_mirror`` as subprocesses; Debian's chromium
through Playwright):

1. writes a cluster of ``--partitions`` partitions (``--topics`` topics, RF 3, 6 brokers) in Kafka's
   layout, with broker 1 leading ``--failover`` of them (solely in their ISR);
2. opens the cluster's live diagram page in the browser with a long-task observer, and waits until
   it shows every partition online;
3. **failover**: deregisters broker 1 and writes its partitions leaderless, in batches of
   ``--batch`` per ZooKeeper multi, as a controller does (managed mode also appends the controller's
   state-change records to the Redis stream after each batch, like ``RedisStreamSink``);
4. **recovery**: writes new leaders for the same partitions, batch by batch, with records;
5. reports, over every partition of both phases, the time from the batch's ZooKeeper commit to
   the moment the browser's diagram showed the count including it (median, p99, max), and the
   browser's longest main-thread task (PerformanceObserver ``longtask``) during the phases.

Both modes run by default, one after the other, each with fresh services: ``managed`` (a
controller's state-change stream in Redis, the project's own controller) and ``observed`` (ZooKeeper
watches only, how the dashboard follows a real ZooKeeper-mode Kafka cluster). Prints one JSON
summary, ``{"modes": {mode: figures}, "targets_met": ...}``; exit 1 when a target is missed.

Targets (issue #31): p99 < 1.5 s in each mode, no browser task > 200 ms.

    .venv/bin/python scripts/bench_live.py                       # 100,000 partitions, both modes
    .venv/bin/python scripts/bench_live.py --mode observed --partitions 20000 --failover 5000
    .venv/bin/python scripts/bench_live.py --partitions 3000 --topics 30 --failover 600 --batch 200  # small
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


from controller_core.model import TopicPartition  # noqa: E402
from scripts.devservices import process_cpu_seconds  # noqa: E402
from scripts.support.live_rig import PASSWORD, LiveRig, migrate_into  # noqa: E402
from scripts.support.live_storm import chain, flush_summary  # noqa: E402

SAMPLER = REPO / "scripts" / "support" / "live_sampler.py"

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LONGTASK_OBSERVER = """
window.__longtasks = [];
try {
  new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      window.__longtasks.push({start: performance.timeOrigin + e.startTime, d: e.duration});
    }
  }).observe({type: "longtask", buffered: true});
} catch (e) { window.__longtasks = null; }
"""


def record(kind: str, tp: TopicPartition, epoch: int, seq: int, **fields: Any) -> str:
    body = {
        "ts": time.time() * 1000.0,
        "controller_id": 2,
        "controller_epoch": epoch,
        "seq": seq,
        "kind": kind,
        "event_id": None,
        "cause": "BrokerChange",
        "entity": f"{tp.topic}-{tp.partition}",
        "topic": tp.topic,
        "partition": tp.partition,
        "replica": None,
        **fields,
    }
    return json.dumps(body, separators=(",", ":"))


def layout_member(tp: TopicPartition) -> str:
    from dashboard.clusters.layout import member

    return member(tp.topic, tp.partition)


class Seq:
    """The controller's record sequence: strictly increasing over every record of one epoch.

    Why one counter for the whole run: the mirror's ``RecordGuard`` drops any record whose ``seq``
    does not pass the highest seen for its controller epoch (a resent copy), so a replica record and
    its partition record sharing a ``seq``, or a phase restarting below the previous one, would be
    silently dropped and the page would never show the change.
    """

    def __init__(self) -> None:
        self.last = 0

    def next(self) -> int:
        self.last += 1
        return self.last


def controller_snapshot(
    rds: Any, stream_key: str, states: dict[TopicPartition, tuple[int, int, list[int]]], seq: Seq
) -> None:
    """What a controller writes to its stream at failover: a ``failover`` record, then every state."""
    partitions = [f"{tp.topic}-{tp.partition}" for tp in states]
    replicas = [f"{tp.topic}-{tp.partition}@{b}" for tp, (_l, _e, isr) in states.items() for b in isr]
    header = {"ts": time.time() * 1000.0, "controller_id": 2, "controller_epoch": 7, "kind": "failover"}
    rds.xadd(stream_key, {"r": json.dumps({**header, "seq": seq.next()})})
    snapshot = {
        **header,
        "seq": seq.next(),
        "kind": "state_snapshot",
        "partition_states": {"OnlinePartition": partitions},
        "replica_states": {"OnlineReplica": replicas},
    }
    rds.xadd(stream_key, {"r": json.dumps(snapshot, separators=(",", ":"))})


def run_phase(
    writer: Any,
    rds: Any,
    stream_key: str | None,
    batches: Sequence[Sequence[TopicPartition]],
    states: dict[TopicPartition, tuple[int, int, list[int]]],
    kind_fields: dict[str, Any],
    seq: Seq,
    replica_fields: dict[str, Any] | None = None,
) -> list[float]:
    """Write each batch in one multi (plus its stream records); return each batch's commit time (ms)."""
    commits: list[float] = []
    for batch in batches:
        writer.write_states({tp: states[tp] for tp in batch}, 7)
        commits.append(time.time() * 1000.0)
        if stream_key is not None:
            pipe = rds.pipeline(transaction=False)
            for tp in batch:
                leader, epoch, isr = states[tp]
                if replica_fields is not None:
                    fields = {**replica_fields, "replica": 1, "entity": f"{tp.topic}-{tp.partition}@1"}
                    pipe.xadd(stream_key, {"r": record("replica_transition", tp, 7, seq.next(), **fields)})
                pipe.xadd(
                    stream_key,
                    {
                        "r": record(
                            "election" if leader >= 0 else "partition_transition",
                            tp,
                            7,
                            seq.next(),
                            leader_after=leader,
                            isr_after=isr,
                            leader_epoch_after=epoch,
                            **kind_fields,
                        )
                    },
                )
            pipe.execute()
    return commits


DOWN_FIELDS: dict[str, Any] = {"from_state": "OnlinePartition", "to_state": "OfflinePartition"}
DOWN_REPLICA_FIELDS: dict[str, Any] = {"from_state": "OnlineReplica", "to_state": "OfflineReplica"}
UP_FIELDS: dict[str, Any] = {"from_state": "OfflinePartition", "to_state": "OnlinePartition", "strategy": "offline"}


def fail_over(
    writer: Any, rds: Any, stream_key: str | None, batches: Sequence[Sequence[TopicPartition]], seq: Seq
) -> list[float]:
    """Broker 1 dies: deregister it, then write its partitions leaderless batch by batch (commit times)."""
    writer.deregister_broker(1)
    down = {tp: (-1, 1, [1]) for batch in batches for tp in batch}
    return run_phase(writer, rds, stream_key, batches, down, DOWN_FIELDS, seq, replica_fields=DOWN_REPLICA_FIELDS)


def recover(
    writer: Any,
    rds: Any,
    stream_key: str | None,
    batches: Sequence[Sequence[TopicPartition]],
    initial: dict[TopicPartition, tuple[int, int, list[int]]],
    seq: Seq,
) -> list[float]:
    """Each failed partition gets its second replica as leader, batch by batch (commit times)."""
    up = {tp: (initial[tp][2][1], 2, [b for b in initial[tp][2] if b != 1]) for batch in batches for tp in batch}
    return run_phase(writer, rds, stream_key, batches, up, UP_FIELDS, seq)


def latencies(
    commits: list[float], batch_size: int, trace: list[dict[str, Any]], key: str, start: int, step: int
) -> list[float]:
    """Per partition: the first trace sample at/after the commit whose count reached the batch's target."""
    out: list[float] = []
    for i, commit in enumerate(commits):
        target = start + step * (i + 1)
        seen = first_seen(trace, commit, key, target, rising=step > 0)
        out.extend([float("inf") if seen is None else seen - commit] * batch_size)
    return out


def first_seen(trace: list[dict[str, Any]], commit: float, key: str, target: int, *, rising: bool) -> float | None:
    """When the page first showed ``key`` at ``target`` (at least if ``rising``, else at most), at or
    after the commit (None: never).

    A page already showing it when the commit returned counts as the commit's own time: in observed
    mode the mirror can read a changed znode from its watch before the writer, descheduled on a
    loaded machine, records its commit time, and then no later render may happen to sample it. The
    5 ms allows for the two clocks' rounding, as before.
    """

    def shown(sample: dict[str, Any]) -> bool:
        count = sample.get(key, 0)
        return bool(count >= target if rising else count <= target)

    before = [s for s in trace if s["t"] < commit - 5]
    if before and shown(before[-1]):
        return commit
    return next((s["t"] for s in trace if s["t"] >= commit - 5 and shown(s)), None)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


TARGET_P99_MS = 1500.0
TARGET_LONGEST_TASK_MS = 200.0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=1_000)
    parser.add_argument("--failover", type=int, default=20_000, help="partitions led by the broker that dies")
    parser.add_argument("--batch", type=int, default=2_000, help="partition states per ZooKeeper multi")
    parser.add_argument(
        "--mode", choices=["managed", "observed", "both"], default="both", help="which live path (default: both)"
    )
    parser.add_argument("--json", type=Path, help="also write the results (with the raw timelines) here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, database)")
    parser.add_argument(
        "--mirror-wrapper", type=Path, help="run the mirror as `python WRAPPER manage.py run_mirror ...` (a profiler)"
    )
    parser.add_argument(
        "--profile-storm",
        type=Path,
        help="profile the mirror during the storm only (scripts/support/live_sampler.py): per-thread CPU,"
        " hottest functions, and commit -> watch -> row -> flush -> publish -> page per partition, into"
        " this JSON file (one mode; the mirror's CPU then includes the sampler's)",
    )
    parser.add_argument(
        "--db-template", type=Path, help="a migrated SQLite database to copy (default: migrate once for every mode)"
    )
    parser.add_argument(
        "--pause-s", type=float, default=2.0, help="quiet time before the failover (the mirror's start-up reads settle)"
    )
    args = parser.parse_args(argv)
    if args.failover > args.partitions:
        parser.error("--failover cannot exceed --partitions")
    if min(args.partitions, args.topics, args.failover, args.batch) < 1:
        parser.error("--partitions, --topics, --failover and --batch must be positive")
    if args.pause_s < 0:
        parser.error("--pause-s cannot be negative")
    if args.profile_storm is not None and (args.mode == "both" or args.mirror_wrapper is not None):
        parser.error("--profile-storm needs one --mode and no --mirror-wrapper")
    if args.db_template is not None and not args.db_template.is_file():
        parser.error(f"--db-template {args.db_template} is not a file")
    if args.partitions < args.topics:
        parser.error("--partitions must be at least --topics")
    if not Path(CHROMIUM).exists():
        print("bench_live: Debian's chromium (/usr/bin/chromium) is required", file=sys.stderr)
        return 2
    modes = ["managed", "observed"] if args.mode == "both" else [args.mode]
    results: dict[str, dict[str, Any]] = {}
    timelines: dict[str, dict[str, Any]] = {}
    from playwright.sync_api import sync_playwright

    # One migration and one chromium for every mode (each mode still gets fresh services, a fresh
    # database copy, web, mirror and browser context).
    with tempfile.TemporaryDirectory(prefix="bench-live-db-") as scratch, sync_playwright() as pw:
        template = args.db_template or migrate_into(Path(scratch))
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for mode in modes:
                results[mode], timelines[mode] = run_mode(args, mode, browser, template)
        finally:
            browser.close()
    summary = {
        "modes": results,
        "targets": {"p99_ms": TARGET_P99_MS, "longest_task_ms": TARGET_LONGEST_TASK_MS},
        "targets_met": all(r["targets_met"] for r in results.values()),
    }
    print(json.dumps(summary, indent=2), flush=True)
    if args.json:
        # The raw timeline too (commit times and the browser's render samples, epoch ms), to see
        # where a slow batch spent its time next to the mirror's log.
        full = {**summary, "timelines": timelines}
        args.json.write_text(json.dumps(full, indent=2))
    return 0 if summary["targets_met"] else 1


def run_mode(
    args: argparse.Namespace, mode: str, browser: Any, db_template: Path
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One full run (private services, web, mirror, a browser context) of ``mode``: its figures and timeline."""
    from dashboard.lib.redis_keys import state_change_stream_key

    t0 = time.monotonic()
    with LiveRig(
        partitions=args.partitions,
        topics=args.topics,
        failover=args.failover,
        batch=args.batch,
        mode=mode,
        keep=args.keep,
        db_template=db_template,
    ) as rig:
        print(f"bench_live: wrote {rig.total} partitions in {time.monotonic() - t0:.1f} s ({rig.tmp})", flush=True)
        rig.start_web(1)  # it boots while the users are created
        (user,) = rig.create_users(1)
        wrapper = args.mirror_wrapper
        if args.profile_storm is not None:
            wrapper = SAMPLER
            rig.env["LIVE_SAMPLER_OUT"] = str(rig.tmp / "storm-profile.json")
        rig.start_mirror(wrapper=wrapper)
        rig.web_ready()
        return measure(args, mode, rig, user, state_change_stream_key("bench") if mode == "managed" else None, browser)


def measure(
    args: argparse.Namespace, mode: str, rig: LiveRig, user: str, stream_key: str | None, browser: Any
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The failover and recovery with the diagram open in chromium: figures and timeline."""
    writer, rds, initial, total, logs = rig.writer, rig.redis, rig.initial, rig.total, rig.logs
    port = rig.port
    failing = [tp for tp, (leader, _e, _i) in initial.items() if leader == 1]
    batches = [failing[i : i + args.batch] for i in range(0, len(failing), args.batch)]
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    try:
        page = context.new_page()
        page.add_init_script(LONGTASK_OBSERVER)
        base = f"http://127.0.0.1:{port}"
        page.goto(base + "/accounts/login/")
        page.fill("#id_username", user)
        page.fill("#id_password", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url(base + "/")
        page.goto(base + "/clusters/bench/diagram/?trace=1")
        t0 = time.monotonic()
        page.wait_for_function(
            f"() => window.KcpLive && (window.KcpLive.counts['p:OnlinePartition'] || 0) >= {total}", timeout=600_000
        )
        print(
            f"bench_live: the browser shows {total} online partitions ({time.monotonic() - t0:.1f} s after opening)",
            flush=True,
        )
        seq = Seq()
        if stream_key is not None:
            # A managed cluster's controller has reported every state (at its failover).
            controller_snapshot(rds, stream_key, initial, seq)
            probe = layout_member(failing[-1])
            deadline = time.monotonic() + 120
            while b'"d":1' in (rds.hget("kcp:bench:m:partitions", probe) or b'"d":1'):
                if time.monotonic() > deadline:
                    raise RuntimeError("the mirror never applied the controller's state snapshot")
                time.sleep(0.2)
        time.sleep(args.pause_s)
        page.evaluate("window.__kcpTrace.length = 0; window.__longtasks && (window.__longtasks.length = 0)")

        phase_start = time.time() * 1000.0
        mirror_pid = rig.mirror.pid if rig.mirror is not None else 0
        mirror_cpu = process_cpu_seconds(mirror_pid)
        load_before = os.getloadavg()[0]
        if args.profile_storm is not None:
            os.kill(mirror_pid, signal.SIGUSR1)
            time.sleep(0.1)  # the mirror's main thread runs the handler within its 50 ms poll
            phase_start = time.time() * 1000.0
        commits_down = fail_over(writer, rds, stream_key, batches, seq)
        page.wait_for_function(
            f"() => (window.KcpLive.counts['p:OfflinePartition'] || 0) >= {len(failing)}", timeout=120_000
        )
        commits_up = recover(writer, rds, stream_key, batches, initial, seq)
        page.wait_for_function("() => (window.KcpLive.counts['p:OfflinePartition'] || 0) === 0", timeout=120_000)
        if args.profile_storm is not None:
            os.kill(mirror_pid, signal.SIGUSR2)
        mirror_pid = rig.mirror.pid if rig.mirror is not None else 0
        mirror_cpu = process_cpu_seconds(mirror_pid) - mirror_cpu
        load_after = os.getloadavg()[0]
        time.sleep(1.0)
        trace = page.evaluate("window.__kcpTrace")
        tasks = page.evaluate("window.__longtasks") or []
    finally:
        context.close()

    sizes = [len(b) for b in batches]
    lat_down = [
        v
        for i, c in enumerate(commits_down)
        for v in latencies([c], sizes[i], trace, "p:OfflinePartition", sum(sizes[:i]), sizes[i])
    ]
    lat_up = []
    seen_up: list[float | None] = []
    remaining = len(failing)
    for i, c in enumerate(commits_up):
        remaining -= sizes[i]
        seen = first_seen(trace, c, "p:OfflinePartition", remaining, rising=False)
        seen_up.append(seen)
        lat_up.extend([float("inf") if seen is None else seen - c] * sizes[i])
    if mode == "observed":
        # Observed mode derives Offline from the broker's deregistration, which precedes the batches.
        lat_down = [max(v, 0.0) for v in lat_down]
    every = lat_down + lat_up
    phase_tasks = [t["d"] for t in tasks if t["start"] >= phase_start - 50]
    result = {
        "mode": mode,
        "partitions": total,
        "failover_partitions": len(failing),
        "batch": args.batch,
        "latency_ms": {
            "median": round(statistics.median(every), 1),
            "p99": round(pct(every, 0.99), 1),
            "max": round(max(every), 1),
            "failover_median": round(statistics.median(lat_down), 1),
            "failover_p99": round(pct(lat_down, 0.99), 1),
            "recovery_median": round(statistics.median(lat_up), 1),
            "recovery_p99": round(pct(lat_up, 0.99), 1),
        },
        "browser_longest_task_ms": round(max(phase_tasks), 1) if phase_tasks else 0.0,
        "browser_long_tasks": len(phase_tasks),
        "browser_renders": len(trace),
        # Load-independent: the mirror's CPU time over both phases (without --mirror-wrapper),
        # and the machine's load average around them (latencies grow with it on a shared box).
        "mirror_cpu_s": round(mirror_cpu, 2) if args.mirror_wrapper is None else None,
        "load_avg_1m": [round(load_before, 2), round(load_after, 2)],
        "targets_met": pct(every, 0.99) < TARGET_P99_MS
        and (max(phase_tasks) if phase_tasks else 0) <= TARGET_LONGEST_TASK_MS,
    }
    if args.profile_storm is not None:
        seen_down = [
            first_seen(trace, c, "p:OfflinePartition", sum(sizes[: i + 1]), rising=True)
            for i, c in enumerate(commits_down)
        ]
        names = [[layout_member(tp) for tp in batch] for batch in batches]
        storm_profile(
            args.profile_storm,
            rig,
            names,
            (phase_start, commits_down, seen_down),
            (commits_up[0] - 1.0, commits_up, seen_up),
            result,
        )
    mirror_log = (logs / "mirror.log").read_text().strip().splitlines()
    print(f"bench_live: {mode} mode, mirror log tail:", *mirror_log[-3:], sep="\n  ", flush=True)
    timeline = {"commits_down": commits_down, "commits_up": commits_up, "trace": trace}
    return result, timeline


def storm_profile(
    out: Path,
    rig: LiveRig,
    batches: list[list[str]],
    down: tuple[float, list[float], list[float | None]],
    up: tuple[float, list[float], list[float | None]],
    result: dict[str, Any],
) -> None:
    """Wait for the sampler's report, add the per-step chain of each phase, write it to ``out``."""
    path = rig.tmp / "storm-profile.json"
    deadline = time.monotonic() + 60
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the mirror's sampler wrote no report; see {rig.logs / 'mirror.log'}")
        time.sleep(0.2)
    raw = json.loads(path.read_text())
    spans = raw["spans"]
    report = {
        "result": result,
        "profile": raw["profile"],
        "flushes": flush_summary(raw["flushes"]),
        # How often each step happened over the storm (a row read five times counts five).
        "step_counts": {step: sum(len(times) for times in by_member.values()) for step, by_member in spans.items()},
        "failover": chain(spans, batches, down[1], down[2], down[0]),
        "recovery": chain(spans, batches, up[1], up[2], up[0]),
        # The mirror thread's timeline (ms from the broker kill): batch commits, then its turns as
        # [start, duration, CPU, what, queue sizes: watch, refresh, changed, later, pending, sweep,
        # in flight, events, changed again].
        "commits_ms": [round(c - down[0], 1) for c in down[1] + up[1]],
        "turns": [[round(t[0] - down[0], 1), round(t[1], 2), round(t[2], 2), *t[3:]] for t in raw.get("turns", [])],
        # The cyclic collector's passes during the storm, per generation: [passes, ms, objects freed].
        "gc": raw.get("gc", {}),
        # The mirror thread blocked on ZooKeeper's answers to its state reads: [waits, ms].
        "read_wait": raw.get("read_wait", []),
    }
    out.write_text(json.dumps(report, indent=2))
    profile = raw["profile"]
    print(f"bench_live: storm profile ({profile['seconds']} s, {profile['process_cpu_s']} s CPU) -> {out}")
    for name, thread in profile["threads"].items():
        print(f"  {name}: {thread['cpu_s']} s; self: {thread['self_ms'][:4]}")
    print(f"  gc passes per generation [passes, ms, freed]: {report['gc']}; read waits [n, ms]: {report['read_wait']}")
    for phase in ("failover", "recovery"):
        print(f"  {phase}: {json.dumps(report[phase])}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
