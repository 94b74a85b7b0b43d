"""Benchmark many live viewers of one big cluster during a broker failure and its recovery.

What it does, per viewer count (``--viewers 1,25,100``), each with a fresh private stack
(``scripts.support.live_rig``: ZooKeeper, Redis, a Kafka-layout cluster, ``--web-processes``
daphnes on one address, ``run_mirror``):

1. logs ``min(N, 10)`` users in through the login form and opens N WebSocket viewers speaking the
   page's protocol (``static/js/live.js``: snapshot, sequence-checked deltas, resync on a gap, on
   another ``gen`` or on a heartbeat's ``scope_seqs``), spread round-robin over the overview and
   diagram pages (scope ``cluster``), broker 2's page (``broker:2``) and a topic's partitions
   (``topic:bench-0000``); plus ``--browsers`` real chromium pages (the diagram, Playwright);
2. **failover**: deregisters broker 1 and writes its ``--failover`` partitions leaderless in
   batches of ``--batch`` per ZooKeeper multi (managed mode: with the controller's records);
   **recovery**: writes their new leaders the same way;
3. meanwhile three loaders fetch the overview, the topics list and a topic page (1,000 partitions
   with the default ``--topics 100``) over and over with a viewer's session, and a sampler reads
   the web processes' CPU and RSS.

Then every page resyncs at once (the mirror's snapshot is taken from under it, as a Redis flush
would: it rebuilds under a new ``gen`` and every viewer asks for a snapshot). Reported per viewer
count: push latency (batch commit in ZooKeeper to the viewer's own state
showing it, every partition of both phases, every viewer) p50/p99/max, per scope too; viewers that
fell behind (asked for a resync), how long their resyncs took, and viewers stuck (never reached the
final state); page loads p50/p95 per page; web CPU seconds and peak RSS; the browsers' p99;
snapshot sizes; the resync storm (mirror rebuilt, every viewer holding the new snapshot).

    .venv/bin/python scripts/bench_viewers.py                    # 100,000 partitions; 1, 25, 100 viewers
    .venv/bin/python scripts/bench_viewers.py --quick            # 10,000 partitions; 10, 50 viewers
    .venv/bin/python scripts/bench_viewers.py --web-processes 2 --viewers 100 --json out.json

Prints one JSON summary (``push_p99_s`` is the worst viewer count's push p99); ``--json`` also
writes it to a file. Exit 1 when a target is missed. Targets (issue #31, 100 viewers): push p99
< 2 s, page loads p95 < 1 s, resyncs within 5 s, none stuck, web RSS < 1 GB.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from controller_core.model import TopicPartition  # noqa: E402
from scripts.bench_live import CHROMIUM, CHROMIUM_ARGS, Seq, controller_snapshot, fail_over, layout_member, recover  # noqa: E402
from scripts.devservices import process_cpu_seconds  # noqa: E402
from scripts.support.live_rig import PASSWORD, LiveRig, as_json_ready, migrate_into, process_rss_bytes  # noqa: E402

TOPIC = "bench-0000"
BROKER = 2
PAGES = {"overview": "cluster", "diagram": "cluster", "broker": f"broker:{BROKER}", "topic": f"topic:{TOPIC}"}
TARGETS = {"push_p99_s": 2.0, "page_p95_s": 1.0, "resync_max_s": 5.0, "web_rss_mb": 1024.0}


from scripts.support.live_viewers import KEY, Viewer, ViewerPool, login  # noqa: E402


class PageLoader:
    """Fetches the overview, the topics list and a topic page, each over and over on a thread of its own."""

    URLS = {
        "overview": "/clusters/bench/",
        "topics_list": "/clusters/bench/topics/",
        "topic_page": f"/clusters/bench/topics/{TOPIC}/",
    }

    def __init__(self, base: str, opener: urllib.request.OpenerDirector) -> None:
        self.base = base
        self.opener = opener
        self.done = threading.Event()
        self.times: dict[str, list[float]] = {name: [] for name in self.URLS}
        self.failures = 0
        self._threads = [threading.Thread(target=self._load, args=(n,), daemon=True) for n in self.URLS]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self, timeout: float) -> None:
        for thread in self._threads:
            thread.join(timeout)

    def _load(self, name: str) -> None:
        while not self.done.is_set():
            started = time.monotonic()
            try:
                with self.opener.open(self.base + self.URLS[name], timeout=30) as answer:
                    answer.read()
                self.times[name].append(time.monotonic() - started)
            except OSError:
                self.failures += 1


class WebSampler(threading.Thread):
    """Peak RSS (every 0.5 s) and CPU seconds of the web processes between start and ``stop``."""

    def __init__(self, pids: list[int]) -> None:
        super().__init__(daemon=True)
        self.pids = pids
        self.done = threading.Event()
        self.cpu_start = sum(process_cpu_seconds(p) for p in pids)
        self.cpu_s = 0.0
        self.peak_rss = 0

    def run(self) -> None:
        while not self.done.wait(0.5):
            self.peak_rss = max(self.peak_rss, sum(process_rss_bytes(p) for p in self.pids))

    def stop(self) -> None:
        self.done.set()
        self.join(5)
        self.peak_rss = max(self.peak_rss, sum(process_rss_bytes(p) for p in self.pids))
        self.cpu_s = sum(process_cpu_seconds(p) for p in self.pids) - self.cpu_start


# -- figures ----------------------------------------------------------------------------------------
def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def expected_after(batches: Sequence[Sequence[TopicPartition]], counts: Callable[[TopicPartition], bool]) -> list[int]:
    """How many partitions the viewer's scope counts, cumulatively, after each batch."""
    out, total = [], 0
    for batch in batches:
        total += sum(1 for tp in batch if counts(tp))
        out.append(total)
    return out


def push_latencies(viewer: Viewer, commits: list[float], targets: list[int], start: int) -> list[float]:
    """Per partition the scope counts: ms from its batch's commit to the viewer's state showing it.

    ``targets``: the scope's count after each batch (rising in the failover, falling in the
    recovery), ``start`` the count before the first batch."""
    out: list[float] = []
    previous = start
    rising = not targets or targets[-1] >= start
    for commit, target in zip(commits, targets, strict=True):
        weight = abs(target - previous)
        previous = target
        if weight == 0:
            continue
        seen = next(
            (t for t, v in viewer.timeline if t >= commit - 5 and ((v >= target) if rising else (v <= target))), None
        )
        out.extend([float("inf") if seen is None else max(0.0, seen - commit)] * weight)
    return out


def scope_filter(rig: LiveRig, scope: str) -> Callable[[TopicPartition], bool]:
    if scope.startswith("topic:"):
        name = scope[6:]
        return lambda tp: tp.topic == name
    if scope.startswith("broker:"):
        broker = int(scope[7:])
        return lambda tp: broker in rig.initial[tp][2]
    return lambda tp: True


# -- one viewer count -------------------------------------------------------------------------------
class Browsers:
    """``count`` chromium pages on the cluster diagram (``?trace=1``), logged in as ``user``; none for 0."""

    def __init__(self, rig: LiveRig, user: str, count: int) -> None:
        self.pages: list[Any] = []
        self._pw: Any = None
        self._browser: Any = None
        if count == 0:
            return
        from playwright.sync_api import sync_playwright

        self._pw = sync_playwright().start()
        self._browser = self._pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = self._browser.new_context(viewport={"width": 1400, "height": 900})
        first = context.new_page()
        first.goto(rig.base_url + "/accounts/login/")
        first.fill("#id_username", user)
        first.fill("#id_password", PASSWORD)
        first.click("button[type=submit]")
        first.wait_for_url(rig.base_url + "/")
        self.pages = [first] + [context.new_page() for _ in range(count - 1)]
        for page in self.pages:
            page.goto(rig.base_url + "/clusters/bench/diagram/?trace=1")
        for page in self.pages:
            page.wait_for_function(
                f"() => window.KcpLive && (window.KcpLive.counts['p:OnlinePartition'] || 0) >= {rig.total}",
                timeout=300_000,
            )
        time.sleep(1.0)
        for page in self.pages:
            page.evaluate("window.__kcpTrace.length = 0")

    def traces(self) -> list[list[dict[str, Any]]]:
        return [page.evaluate("window.__kcpTrace") for page in self.pages]

    def close(self) -> None:
        if self._browser is not None:
            self._browser.close()
        if self._pw is not None:
            self._pw.stop()


def run_count(args: argparse.Namespace, count: int, db_template: Path) -> dict[str, Any]:
    with LiveRig(
        partitions=args.partitions,
        topics=args.topics,
        failover=args.failover,
        batch=args.batch,
        mode=args.mode,
        keep=args.keep,
        db_template=db_template,
    ) as rig:
        started = time.monotonic()
        rig.start_web(args.web_processes)  # they boot while the users are created
        users = rig.create_users(args.users or max(1, min(count, 10)))
        rig.start_mirror()
        rig.web_ready()
        rig.wait_synced()
        print(f"bench_viewers: web up and mirror synced in {time.monotonic() - started:.1f} s", flush=True)
        stream_key = "kcp:bench:state-changes" if args.mode == "managed" else None
        seq = Seq()
        if stream_key is not None:
            controller_snapshot(rig.redis, stream_key, rig.initial, seq)
            probe = layout_member(rig.failing[-1])
            deadline = time.monotonic() + 120
            while b'"d":1' in (rig.redis.hget("kcp:bench:m:partitions", probe) or b'"d":1'):
                if time.monotonic() > deadline:
                    raise RuntimeError("the mirror never applied the controller's state snapshot")
                time.sleep(0.2)
        sessions = [login(rig.base_url, u) for u in users]
        print(f"bench_viewers: {len(users)} users logged in ({time.monotonic() - started:.1f} s)", flush=True)
        names = list(PAGES)
        viewers = [Viewer(names[i % len(names)], PAGES[names[i % len(names)]]) for i in range(count)]
        pool = ViewerPool(rig, viewers, [cookie for _, cookie in sessions])
        pool.start()
        deadline = time.monotonic() + 120
        while not all(v.gen is not None for v in viewers):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{sum(v.gen is None for v in viewers)} viewers got no snapshot")
            time.sleep(0.2)
        per_process = rig.connections()
        print(f"bench_viewers: {count} viewers subscribed (connections per web process: {per_process})", flush=True)
        batches = [rig.failing[i : i + args.batch] for i in range(0, len(rig.failing), args.batch)]
        browsers = Browsers(rig, users[0], args.browsers)
        try:
            loader = PageLoader(rig.base_url, sessions[0][0])
            sampler = WebSampler([p.pid for p in rig.web])
            mirror_cpu = process_cpu_seconds(rig.mirror.pid) if rig.mirror is not None else 0.0
            loader.start()
            sampler.start()
            commits_down = fail_over(rig.writer, rig.redis, stream_key, batches, seq)
            finals = {v.scope: expected_after(batches, scope_filter(rig, v.scope))[-1] for v in viewers}
            wait_for_viewers(viewers, lambda v: v.value() >= finals[v.scope], timeout=args.settle_s)
            commits_up = recover(rig.writer, rig.redis, stream_key, batches, rig.initial, seq)
            settled = wait_for_viewers(viewers, lambda v: v.value() == 0, timeout=args.settle_s)
            loader.done.set()
            sampler.stop()
            loader.join(60)
            mirror_cpu = (process_cpu_seconds(rig.mirror.pid) if rig.mirror is not None else 0.0) - mirror_cpu
            traces = browsers.traces()
            storm = resync_storm(rig, viewers, args.settle_s)
        finally:
            browsers.close()
        pool.close()
    return figures(args, rig, count, viewers, batches, commits_down, commits_up, traces, loader, sampler) | {
        "connections_per_web_process": per_process,
        "resync_storm": storm,
        "settled": settled,
        "mirror_cpu_s": round(mirror_cpu, 2),
    }


def resync_storm(rig: LiveRig, viewers: list[Viewer], timeout: float) -> dict[str, Any]:
    """Every page resyncs at once: the snapshot is taken from under the mirror (as a Redis flush
    would), it rebuilds under a new ``gen`` and tells every page; each viewer asks for a snapshot.

    Returns seconds from the loss to the mirror's new ``gen`` and to each viewer holding it."""
    old = {v.gen for v in viewers}
    for v in viewers:
        v.before_storm = (v.gaps, len(v.resyncs))
    lost = time.monotonic()
    rig.redis.delete("kcp:bench:m:meta")
    rebuilt: float | None = None
    held: dict[int, float] = {}
    deadline = lost + timeout
    while time.monotonic() < deadline and len(held) < len(viewers):
        gen: bytes | str | None = rig.redis.hget("kcp:bench:m:meta", "gen")
        if rebuilt is None and gen is not None and (gen.decode() if isinstance(gen, bytes) else str(gen)) not in old:
            rebuilt = time.monotonic() - lost
        for i, v in enumerate(viewers):
            if i not in held and v.gen is not None and v.gen not in old and v.resync_asked is None:
                held[i] = time.monotonic() - lost
        time.sleep(0.05)
    after = sorted(held.values())
    unfinished: dict[str, Any] = {}
    if rebuilt is None or len(after) < len(viewers):  # what to look at when the storm did not end
        unfinished["mirror_exit"] = rig.mirror.poll() if rig.mirror is not None else None
        log = rig.logs / "mirror.log"
        unfinished["mirror_log_tail"] = log.read_text(errors="replace")[-2000:] if log.exists() else None
    return unfinished | {
        "mirror_rebuilt_s": rebuilt,
        "viewers_resynced": len(after),
        "viewers_p50_s": pct(after, 0.5) if after else None,
        "viewers_max_s": after[-1] if after else None,
        "after_rebuild_max_s": (after[-1] - rebuilt) if after and rebuilt is not None else None,
    }


def wait_for_viewers(viewers: list[Viewer], done: Callable[[Viewer], bool], timeout: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(done(v) for v in viewers):
            return True
        time.sleep(0.1)
    return False


def figures(
    args: argparse.Namespace,
    rig: LiveRig,
    count: int,
    viewers: list[Viewer],
    batches: list[list[TopicPartition]],
    commits_down: list[float],
    commits_up: list[float],
    traces: list[list[dict[str, Any]]],
    loader: PageLoader,
    sampler: WebSampler,
) -> dict[str, Any]:
    every: list[float] = []
    by_scope: dict[str, list[float]] = {}
    for v in viewers:
        counted = scope_filter(rig, v.scope)
        down = expected_after(batches, counted)
        up = [down[-1] - d for d in down]
        lat = push_latencies(v, commits_down, down, 0) + push_latencies(v, commits_up, up, down[-1])
        every.extend(lat)
        by_scope.setdefault(v.page, []).extend(lat)
    browser_lat: list[float] = []
    for trace in traces:
        timeline = Viewer("browser", "cluster")
        timeline.timeline = [(s["t"], int(s.get(KEY, 0))) for s in trace]
        down = expected_after(batches, lambda tp: True)
        browser_lat += push_latencies(timeline, commits_down, down, 0)
        browser_lat += push_latencies(timeline, commits_up, [down[-1] - d for d in down], down[-1])
    marks = {id(v): v.before_storm or (v.gaps, len(v.resyncs)) for v in viewers}
    resyncs = [r for v in viewers for r in v.resyncs[: marks[id(v)][1]]]
    behind = [v for v in viewers if marks[id(v)][0]]
    stuck = [v for v in viewers if v.value() != 0 or v.resync_asked is not None or v.error]
    pages = {
        name: {"n": len(ts), "p50_s": pct(ts, 0.5), "p95_s": pct(ts, 0.95), "max_s": max(ts, default=0.0)}
        for name, ts in loader.times.items()
    }
    finite = [x for x in every if x != float("inf")]
    push_p99_s = pct(every, 0.99) / 1000.0 if every else 0.0
    result = {
        "viewers": count,
        "web_processes": args.web_processes,
        "partitions": rig.total,
        "failover_partitions": len(rig.failing),
        "push_p50_s": pct(every, 0.5) / 1000.0,
        "push_p99_s": push_p99_s,
        "push_max_s": (max(finite) / 1000.0) if finite else 0.0,
        "push_missing": len(every) - len(finite),
        "push_p99_s_by_page": {p: pct(lat, 0.99) / 1000.0 for p, lat in by_scope.items()},
        "browser_push_p99_s": pct(browser_lat, 0.99) / 1000.0 if browser_lat else None,
        "snapshot_bytes_by_page": {v.page: v.snapshot_bytes for v in viewers},
        "behind_viewers": len(behind),
        "resyncs": len(resyncs),
        "resync_p50_s": pct(resyncs, 0.5),
        "resync_max_s": max(resyncs, default=0.0),
        "stuck_viewers": len(stuck),
        "viewer_errors": sorted({v.error for v in viewers if v.error})[:3],
        "pages": pages,
        "page_failures": loader.failures,
        "web_cpu_s": sampler.cpu_s,
        "web_peak_rss_mb": sampler.peak_rss / 2**20,
    }
    page_p95 = max((p["p95_s"] for p in pages.values() if p["n"]), default=0.0)
    result["targets_met"] = bool(
        push_p99_s < TARGETS["push_p99_s"]
        and page_p95 < TARGETS["page_p95_s"]
        and result["resync_max_s"] < TARGETS["resync_max_s"]
        and not stuck
        and result["web_peak_rss_mb"] < TARGETS["web_rss_mb"]
    )
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=100_000)
    parser.add_argument("--topics", type=int, default=100, help="topics (the topic page shows partitions/topics)")
    parser.add_argument("--failover", type=int, default=20_000, help="partitions led by the broker that dies")
    parser.add_argument("--batch", type=int, default=2_000, help="partition states per ZooKeeper multi")
    parser.add_argument("--viewers", default="1,25,100", help="comma-separated viewer counts, one run each")
    parser.add_argument("--browsers", type=int, default=2, help="real chromium pages besides the viewers")
    parser.add_argument("--web-processes", type=int, default=1, help="daphne processes on one address")
    parser.add_argument("--mode", choices=["managed", "observed"], default="managed")
    parser.add_argument("--settle-s", type=float, default=120.0, help="how long to wait for every viewer to settle")
    parser.add_argument(
        "--quick", action="store_true", help="10,000 partitions (10 topics), 2,000 lost; 10, 50 viewers"
    )
    parser.add_argument(
        "--users", type=int, default=0, help="distinct users the viewers log in as (default: min(viewers, 10))"
    )
    parser.add_argument("--json", type=Path, help="also write the summary here")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directories (logs, database)")
    parser.add_argument(
        "--db-template", type=Path, help="a migrated SQLite database to copy (default: migrate once for every count)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.partitions, args.topics, args.failover, args.batch = 10_000, 10, 2_000, 500
        if args.viewers == parser.get_default("viewers"):
            args.viewers = "10,50"
        args.browsers = min(args.browsers, 1)
    try:
        counts = [int(x) for x in args.viewers.split(",") if x.strip()]
    except ValueError:
        parser.error(f"--viewers must be comma-separated numbers, not {args.viewers!r}")
    if not counts or min(counts) < 1:
        parser.error("--viewers needs at least one count, each at least 1")
    if min(args.partitions, args.topics, args.failover, args.batch, args.web_processes) < 1 or args.browsers < 0:
        parser.error("--partitions, --topics, --failover, --batch and --web-processes must be positive")
    if args.failover > args.partitions or args.partitions < args.topics:
        parser.error("need --failover <= --partitions and --topics <= --partitions")
    if args.db_template is not None and not args.db_template.is_file():
        parser.error(f"--db-template {args.db_template} is not a file")
    if args.users < 0:
        parser.error("--users cannot be negative")
    if args.browsers and not Path(CHROMIUM).exists():
        print("bench_viewers: Debian's chromium (/usr/bin/chromium) is required (or --browsers 0)", file=sys.stderr)
        return 2
    runs = []
    with tempfile.TemporaryDirectory(prefix="bench-viewers-db-") as scratch:
        template = args.db_template or migrate_into(Path(scratch))
        for count in counts:
            print(f"bench_viewers: {count} viewers, {args.partitions} partitions, {args.mode} mode", flush=True)
            runs.append(run_count(args, count, template))
            print(json.dumps(as_json_ready(runs[-1])), flush=True)
    summary = as_json_ready(
        {
            "mode": args.mode,
            "runs": runs,
            "push_p99_s": max(r["push_p99_s"] for r in runs),
            "targets": TARGETS,
            "targets_met": all(r["targets_met"] for r in runs),
        }
    )
    summary["push_p99_s"] = round(max(r["push_p99_s"] for r in runs), 3)
    print(json.dumps(summary, indent=2), flush=True)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2))
    return 0 if summary["targets_met"] else 1


if __name__ == "__main__":
    sys.exit(main())
