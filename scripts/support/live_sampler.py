"""Profile the mirror process during a storm only: per-thread CPU, where it goes, and each row's path.

Why a wrapper (``bench_live.py --profile-storm`` runs the mirror as ``python live_sampler.py
manage.py run_mirror ...``): nothing of it is loaded in a normal run, so it costs nothing when off;
and it starts and stops on signals, so the profile covers the broker failure and its recovery, not
the 100,000-partition resync before it.

* ``SIGUSR1`` starts it, ``SIGUSR2`` stops it and writes ``LIVE_SAMPLER_OUT`` (JSON).
* A sampler thread wakes every ``LIVE_SAMPLER_INTERVAL_MS`` (5 ms), reads every thread's CPU clock
  (``pthread_getcpuclockid``) and its Python stack (``sys._current_frames``), and charges the CPU the
  thread used since the previous sample to the stack it is in now: a CPU profile per thread, not a
  wall-clock one (a thread blocked on a socket or a queue uses no CPU and gets no weight).
* Spans: the mirror's methods that mark a row's way to the page are wrapped to note, per row, when
  its state znode's watch fired (kazoo's thread), when a read of it was applied or it was re-derived
  (the mirror thread), and when the flush carrying it was taken and published (the writer thread).
  ``bench_live.py`` joins these with its ZooKeeper commit times and the page's render samples.
"""

from __future__ import annotations

import functools
import json
import os
import runpy
import signal
import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent

Spans = dict[str, dict[str, list[float]]]


class Sampler:
    """CPU-weighted stack samples per thread, between ``start()`` and ``stop()``."""

    def __init__(self, interval_s: float, depth: int = 40) -> None:
        self.interval_s = interval_s
        self.depth = depth
        self.active = threading.Event()
        self.stacks: dict[str, Counter[tuple[str, ...]]] = defaultdict(Counter)
        self.cpu_s: defaultdict[str, float] = defaultdict(float)
        self.samples = 0
        self.started_at = 0.0
        self.stopped_at = 0.0
        self._clocks: dict[int, float] = {}
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="live-sampler", daemon=True)
        self._thread.start()

    def start(self) -> None:
        with self._lock:
            self.stacks.clear()
            self.cpu_s.clear()
            self.samples = 0
            self._clocks = {t.ident: _cpu(t.ident) for t in threading.enumerate() if t.ident is not None}
            self.started_at = time.time()
        self.active.set()

    def stop(self) -> None:
        self.active.clear()
        with self._lock:
            self.stopped_at = time.time()

    def _run(self) -> None:
        me = threading.get_ident()
        while True:
            self.active.wait()
            time.sleep(self.interval_s)
            with self._lock:
                if self.active.is_set():
                    self._sample(me)

    def _sample(self, me: int) -> None:
        names = {t.ident: t.name for t in threading.enumerate()}
        frames = sys._current_frames()
        self.samples += 1
        for ident, frame in frames.items():
            if ident == me:
                continue
            now = _cpu(ident)
            used = now - self._clocks.get(ident, now)
            self._clocks[ident] = now
            name = _thread_kind(names.get(ident, str(ident)))
            self.cpu_s[name] += used
            if used > 0:
                self.stacks[name][_stack(frame, self.depth)] += int(used * 1e6)  # microseconds

    def report(self, top: int = 25) -> dict[str, Any]:
        threads: dict[str, Any] = {}
        for name, stacks in self.stacks.items():
            own: Counter[str] = Counter()
            inclusive: Counter[str] = Counter()
            for stack, us in stacks.items():
                if stack:
                    own[stack[-1]] += us
                for fn in set(stack):
                    inclusive[fn] += us
            threads[name] = {
                "cpu_s": round(self.cpu_s[name], 3),
                "self_ms": [[fn, round(us / 1000, 1)] for fn, us in own.most_common(top)],
                "inclusive_ms": [[fn, round(us / 1000, 1)] for fn, us in inclusive.most_common(top)],
                # Whole stacks, innermost last: who called the hot functions.
                "stacks_ms": [
                    [" < ".join(reversed(stack[-12:])), round(us / 1000, 1)] for stack, us in stacks.most_common(8)
                ],
            }
        return {
            "seconds": round(self.stopped_at - self.started_at, 3),
            "samples": self.samples,
            "process_cpu_s": round(sum(self.cpu_s.values()), 3),
            "threads": dict(sorted(threads.items(), key=lambda kv: -kv[1]["cpu_s"])),
        }


def _cpu(ident: int) -> float:
    try:
        return time.clock_gettime(time.pthread_getcpuclockid(ident))
    except (OSError, OverflowError):
        return 0.0


def _thread_kind(name: str) -> str:
    """Group numbered threads of one kind (kazoo's workers, asyncio's) under one name."""
    for prefix in ("ThreadPoolExecutor", "asyncio_"):
        if name.startswith(prefix):
            return prefix
    return name.split(" (", 1)[0]


def _stack(frame: FrameType | None, depth: int) -> tuple[str, ...]:
    out: list[str] = []
    while frame is not None and len(out) < depth:
        code = frame.f_code
        out.append(f"{Path(code.co_filename).name}:{code.co_name}")
        frame = frame.f_back
    return tuple(reversed(out))


class SpanRecorder:
    """Per row (the snapshot's member name): when each step of its way to the page happened."""

    def __init__(self) -> None:
        self.active = False
        self.spans: Spans = defaultdict(lambda: defaultdict(list))
        self.flushes: list[dict[str, Any]] = []
        # The mirror thread's turns: [start ms, duration ms, its CPU ms, what, queue sizes before it].
        self.turns: list[list[Any]] = []
        # Cyclic GC passes during the profile, per generation: [passes, ms, objects collected].
        self.gc: dict[int, list[float]] = {}
        # The mirror thread waiting for ZooKeeper's answers to its state reads: [waits, ms].
        self.read_wait = [0, 0.0]
        self._gc_started = 0.0
        self._lock = threading.Lock()

    def note(self, step: str, members: Iterable[str]) -> None:
        if not self.active:
            return
        now = time.time() * 1000.0
        with self._lock:
            by_member = self.spans[step]
            for m in members:
                by_member[m].append(now)

    def on_gc(self, phase: str, info: dict[str, int]) -> None:
        """A ``gc.callbacks`` hook: the collector's passes show apart from the code they interrupt."""
        if not self.active:
            return
        if phase == "start":
            self._gc_started = time.perf_counter()
            return
        passes = self.gc.setdefault(info["generation"], [0, 0.0, 0])
        passes[0] += 1
        passes[1] += (time.perf_counter() - self._gc_started) * 1000.0
        passes[2] += info["collected"]

    def install(self) -> None:
        """Wrap the mirror's steps (imported here: Django is set up by ``manage.py`` first)."""
        import gc

        gc.callbacks.append(self.on_gc)
        from dashboard.clusters import layout
        from workers.mirror import flushing, mirror, reads, snapshot, state, zksource

        recorder = self

        def wrap(cls: type, name: str, before: Callable[..., None]) -> None:
            original = getattr(cls, name)

            # wraps(): the wrapper keeps the original's attributes (``@inline_watch``'s mark among
            # them: without it the profiled mirror would route its state watches differently).
            @functools.wraps(original)
            def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
                before(self, *args, **kwargs)
                return original(self, *args, **kwargs)

            setattr(cls, name, wrapper)

        def member(tp: Any) -> str:
            return str(layout.member(tp.topic, tp.partition))

        def on_watch(_self: Any, event: Any) -> None:
            from controller_core.zk import paths

            tp = paths.parse_partition_state_path(event.path or "")
            if tp is not None:
                recorder.note("watch", [member(tp)])

        def on_read(_self: Any, _live: list[Any], members: list[str], _since: int, _reads: Any) -> None:
            recorder.note("read_applied", members)

        def on_refresh(_self: Any, members: Iterable[str]) -> None:
            members = list(members)
            recorder.note("rederived", members)

        wrap(reads.StateReads, "_on_state_watch", on_watch)

        original_submit = zksource.submit_states

        def submit_states(reader: Any, partitions: Any) -> Callable[[], Any]:
            receive = original_submit(reader, partitions)

            def timed_receive() -> Any:
                started = time.perf_counter()
                try:
                    return receive()
                finally:
                    if recorder.active:
                        recorder.read_wait[0] += 1
                        recorder.read_wait[1] += (time.perf_counter() - started) * 1000.0

            return timed_receive

        zksource.submit_states = submit_states  # reads.py looks it up on the module at each call
        wrap(reads.StateReads, "_apply_read", on_read)
        # refresh consumes an iterable: note a copy, then pass the same list on.
        original_refresh = state.MirrorState.refresh

        def refresh(self: Any, members: Iterable[str]) -> None:
            members = list(members)
            on_refresh(self, members)
            original_refresh(self, members)

        _patch(state.MirrorState, "refresh", refresh)

        original_take = state.MirrorState.take_changes

        def take_changes(self: Any) -> Any:
            changes = original_take(self)
            recorder.note("flush_taken", changes.rows)
            return changes

        _patch(state.MirrorState, "take_changes", take_changes)

        original_write = snapshot.SnapshotWriter.write_changes

        def write_changes(
            self: Any,
            changes: Any,
            meta: Any,
            before_rows: Callable[[], None] | None = None,
            after_rows: Callable[[], None] | None = None,
        ) -> Any:
            started = time.time() * 1000.0

            def published() -> None:
                if before_rows is not None:
                    before_rows()
                recorder.note("published", changes.rows)
                if recorder.active:
                    recorder.flushes.append(
                        {"rows": len(changes.rows), "write_started": started, "published": time.time() * 1000.0}
                    )

            return original_write(self, changes, meta, before_rows=published, after_rows=after_rows)

        _patch(snapshot.SnapshotWriter, "write_changes", write_changes)

        def timed(name: str) -> None:
            original = getattr(mirror.Mirror, name)

            @functools.wraps(original)
            def turn(self: Any, *args: Any, **kwargs: Any) -> Any:
                if not recorder.active:
                    return original(self, *args, **kwargs)
                queues = [
                    len(self._watch_queue),
                    len(self._refresh_queue),
                    len(self._changed_reads),
                    len(self._refresh_later),
                    len(self._pending_reads),
                    len(self._sweep),
                    len(self._reads_in_flight),
                    self.events.qsize(),
                    len(self._refired_reads),
                ]
                started = time.time() * 1000.0
                cpu = time.thread_time()
                try:
                    return original(self, *args, **kwargs)
                finally:
                    what = name if not args else f"{name}:{type(args[0]).__name__}"
                    if what != "_handle:StateChanged":  # 40,000 of them, each only queues a read
                        used = (time.thread_time() - cpu) * 1000.0
                        recorder.turns.append([started, time.time() * 1000.0 - started, used, what, queues])

            setattr(mirror.Mirror, name, turn)

        # Queue sizes: watch, refresh, changed reads, refresh later, pending reads, sweep, in flight, events,
        # changed again (read first).
        for name in ("_sweep_some", "flush", "_handle"):
            timed(name)
        del flushing  # imported so that the flush path is loaded before the wrappers are used

    def report(self) -> dict[str, Any]:
        with self._lock:
            return {
                "spans": {step: dict(by_member) for step, by_member in self.spans.items()},
                "flushes": list(self.flushes),
                "turns": list(self.turns),
                "read_wait": [self.read_wait[0], round(self.read_wait[1], 1)],
                "gc": {str(gen): [n, round(ms, 1), collected] for gen, (n, ms, collected) in sorted(self.gc.items())},
            }


def _patch(cls: type, name: str, replacement: Callable[..., Any]) -> None:
    """Replace a method for this process (a profiling wrapper: the product code stays as it is)."""
    setattr(cls, name, replacement)


def main() -> None:
    out = Path(os.environ.get("LIVE_SAMPLER_OUT", "live-sampler.json"))
    sampler = Sampler(float(os.environ.get("LIVE_SAMPLER_INTERVAL_MS", "5")) / 1000.0)
    recorder = SpanRecorder()

    def start(_signum: int, _frame: object) -> None:
        recorder.active = True
        sampler.start()

    def stop(_signum: int, _frame: object) -> None:
        # The report is written off the signal handler's frame: the main thread may be anywhere.
        sampler.stop()
        recorder.active = False

        def write() -> None:
            tmp = out.with_suffix(".tmp")
            tmp.write_text(json.dumps({"profile": sampler.report(), **recorder.report()}))
            tmp.replace(out)

        threading.Thread(target=write, name="live-sampler-writer", daemon=True).start()

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    sys.argv = sys.argv[1:]
    sys.path[0] = str(REPO)
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    django.setup()
    recorder.install()
    runpy.run_path(sys.argv[0], run_name="__main__")


if __name__ == "__main__":
    main()
