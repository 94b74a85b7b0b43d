"""The controller candidates of ``scripts/bench`` as processes of their own, and how the benchmark
talks to them.

Why a separate process per candidate: the peak RSS and CPU figures must be the controller's alone, and
a failover must start from a real session close. This module holds both ends of that: the child's
entry (``serve_controller``, run as ``scripts/bench_controller.py --serve-controller ID``, which
forwards the records the clocks need on stdout), the parent's handle (``ControllerProc``), the JSON
calls to the controller's HTTP API (``http_json``) and the CPU probe that says whether a figure is
bound by the controller's Python or by ZooKeeper (``CpuProbe``, with each thread's share).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from scripts.devservices import process_cpu_seconds

REPO_ROOT = Path(__file__).resolve().parent.parent
BENCH_SCRIPT = REPO_ROOT / "scripts" / "bench_controller.py"
"""The benchmark's entry point, which the candidates run with ``--serve-controller``."""
REDIS_CLUSTER = "bench"
"""The cluster name of the benchmark's Redis keys (``kcp:bench:state-changes``, ...)."""
REQUEST_TIMEOUT_S = 300.0  # the controllers' request timeout (see serve_controller)
# Kafka's default zookeeper.session.timeout.ms. No figure waits for a session to expire (the failover
# starts with an explicit close, the broker failure with the registration's deletion); a shorter one
# lost the standby's session at a million partitions, with ZooKeeper's 3 GB heap and every process
# busy on two cores, and the run never went idle again (2026-11-26).
CONTROLLER_SESSION_TIMEOUT_S = 18.0
PY = sys.executable


class _StdoutSink:
    """Forward the records the benchmark needs to stdout, one JSON object a line."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def emit(self, record: Mapping[str, Any]) -> None:
        # "failover": the failover's clock; "request_batch": when requests went to the senders (the
        # broker failure's clock stops when its elections' LeaderAndIsr have been sent).
        kind = record.get("kind")
        if kind in ("failover", "request_batch"):
            self.write(dict(record))
        elif kind == "state_snapshot":  # its header only (the record itself is ~50 MB at a million)
            self.write(dict(record))  # an EncodedRecord's mapping holds the header alone

    def write(self, obj: Mapping[str, Any]) -> None:
        with self.lock:
            sys.stdout.write(json.dumps(obj, default=str) + "\n")
            sys.stdout.flush()

    def flush(self) -> None:
        return None


def serve_controller(
    controller_id: int,
    connect: str,
    batched: bool,
    state_change_dir: Path | None = None,
    redis_url: str | None = None,
    warm_standby: bool = True,
) -> int:
    """The child's side (``--serve-controller``): one candidate with auto rebalance off, its state-change
    log and, with ``redis_url``, the Redis stream and status hash, until SIGTERM."""
    from controller_core.config import ControllerConfig
    from controller_core.runner import ControllerRunner
    from controller_core.signal_wait import wait_for

    logging.basicConfig(level=logging.WARNING)
    profile_dir = os.environ.get("BENCH_PROFILE_DIR")
    profiles = _ThreadProfiles() if profile_dir else None
    # Every thread started from here on names itself in /proc (CpuProbe's per-thread CPU) and, with
    # --profile, gets a profiler of its own.
    threading.setprofile(profiles.start if profiles is not None else _name_thread)
    if profiles is not None:
        profiles.start()
    sink = _StdoutSink()
    config = ControllerConfig(
        controller_id=controller_id,
        zookeeper_connect=connect,
        zookeeper_session_timeout_s=CONTROLLER_SESSION_TIMEOUT_S,
        auto_leader_rebalance_enable=False,
        first_rebalance_delay_seconds=3600,
        batched_writes=batched,
        warm_standby=warm_standby,
        # A lightweight agent takes ~1 s per 100,000 partitions of a LeaderAndIsr (docs/broker-agent.md);
        # Kafka's 30 s default would drop and resend the first full requests at a million partitions.
        request_timeout_s=REQUEST_TIMEOUT_S,
    )
    # The JSON-lines state-change log and, with ``redis_url``, the Redis state-change stream and status
    # hash, as every deployment has them (workers.controller_host): the records are built on the event
    # thread and the stream's writer and the status publisher are threads of this process, so the
    # figures include them.
    plugs = None
    extra: list[Any] = [sink]
    if redis_url is not None:
        from workers.controller_redis import ControllerRedisPlugs

        plugs = ControllerRedisPlugs.connect(redis_url, REDIS_CLUSTER)
        extra.extend(plugs.sinks)
    runner = ControllerRunner(config, log_dir=state_change_dir, extra_sinks=extra)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    controller = runner.start()
    assert runner.api is not None
    if plugs is not None:
        plugs.publish_status(controller_id, controller.status)
    sink.write({"kind": "api", "url": runner.api.url, "pid": os.getpid()})
    wait_for(stop)
    if plugs is not None:
        plugs.stop_status()
    runner.stop()
    if plugs is not None:
        plugs.close()  # after the runner: the resignation's records reach the stream
    if profiles is not None and profile_dir:
        profiles.dump(Path(profile_dir) / f"controller-{controller_id}-{os.getpid()}")
    # The stopped controller stands for a broker on another machine: freeing its 100,000-partition
    # context at interpreter exit (0.6 to 0.9 s of CPU) must not take a core from the new controller,
    # whose failover the benchmark is timing. Its session is closed and its output written.
    sys.stdout.flush()
    os._exit(0)


def _thread_label(name: str) -> str:
    """A thread's name as /proc holds it (15 bytes): ``Thread-7 (zk_loop)`` becomes ``zk_loop``, so that
    kazoo's unnamed threads are told apart by what they run; the per-broker senders
    (``controller-channel-N``) share one label and are summed."""
    if name.endswith(")") and " (" in name:
        name = name[name.index(" (") + 2 : -1]
    return name.encode("ascii", "replace")[:15].decode("ascii")


def _name_thread(*_: object) -> None:
    """A one-shot profile function (``threading.setprofile``): name the new thread in /proc, then get
    out of the way (the thread runs without a profile function from its next call on)."""
    import ctypes

    pr_set_name = 15
    label = _thread_label(threading.current_thread().name).encode()
    with contextlib.suppress(OSError, AttributeError):  # not Linux: no per-thread figures, nothing else
        ctypes.CDLL(None).prctl(pr_set_name, ctypes.c_char_p(label), 0, 0, 0)
    sys.setprofile(None)


class _ThreadProfiles:
    """``--profile``: one cProfile per thread (the event thread, kazoo's connection and callback
    threads, each broker's sender, the Redis writers), so that each thread's profile is its own and
    not interleaved with the others' calls; dumped as ``PREFIX-LABEL.prof`` (one file per label, the
    senders' merged)."""

    def __init__(self) -> None:
        import cProfile

        self._new = cProfile.Profile
        self._lock = threading.Lock()
        self.by_thread: list[tuple[str, cProfile.Profile]] = []

    def start(self, *_: object) -> None:
        _name_thread()
        profiler = self._new()
        with self._lock:
            self.by_thread.append((_thread_label(threading.current_thread().name), profiler))
        profiler.enable()

    def dump(self, prefix: Path) -> None:
        import pstats

        merged: dict[str, pstats.Stats] = {}
        with self._lock:
            profiles = list(self.by_thread)
        for label, profiler in profiles:
            profiler.create_stats()
            if not getattr(profiler, "stats", None):
                continue
            if label in merged:
                merged[label].add(profiler)
            else:
                merged[label] = pstats.Stats(profiler)
        for label, stats in merged.items():
            stats.dump_stats(f"{prefix}-{label.replace('/', '_')}.prof")


class ControllerProc:
    """One candidate as the benchmark sees it: its process, its API's URL once it serves, and the
    "failover" and "request_batch" records it forwarded (read on a thread, so no pipe fills up)."""

    def __init__(
        self,
        controller_id: int,
        connect: str,
        batched: bool = True,
        state_change_dir: Path | None = None,
        redis_url: str | None = None,
        warm_standby: bool = True,
    ) -> None:
        self.id = controller_id
        self.warm_standby = warm_standby
        self.failovers: list[dict[str, Any]] = []
        self.request_batches: list[dict[str, Any]] = []
        self.snapshots: list[dict[str, Any]] = []  # the state-snapshot records' headers
        self.url: str | None = None
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [
                *(PY, str(BENCH_SCRIPT), "--serve-controller", str(controller_id), "--zookeeper", connect),
                *(() if batched else ("--unbatched",)),
                *(() if state_change_dir is None else ("--state-change-dir", str(state_change_dir))),
                *(() if redis_url is None else ("--redis-url", redis_url)),
                *(() if warm_standby else ("--cold-standby",)),
            ],
            stdout=subprocess.PIPE,
            text=True,
            cwd=REPO_ROOT,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("kind") == "api":
                self.url = obj["url"]
                self.ready.set()
            elif obj.get("kind") == "failover":
                self.failovers.append(obj)
            elif obj.get("kind") == "request_batch":
                self.request_batches.append(obj)
            elif obj.get("kind") == "state_snapshot":
                self.snapshots.append(obj)

    def leader_and_isr_sent_at(self, cause: str, since_ms: float) -> float | None:
        """Wall-clock ms of the first batch with LeaderAndIsr requests that ``cause`` (an event name)
        sent at or after ``since_ms``; None if none has been seen yet."""
        for record in list(self.request_batches):
            lair = record.get("leader_and_isr") or {}
            if record.get("cause") == cause and record.get("ts", 0.0) >= since_ms and sum(lair.values()) > 0:
                return float(record["ts"])
        return None

    def peak_rss_mb(self) -> float:
        return self._proc_status_mb("VmHWM:")

    def rss_mb(self) -> float:
        """Resident memory now (a standby's, before it takes over: what keeping the view costs)."""
        return self._proc_status_mb("VmRSS:")

    def _proc_status_mb(self, field: str) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith(field):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def cpu_s(self) -> float:
        """CPU seconds the controller process has used so far (every thread: user + system)."""
        return process_cpu_s(self.proc.pid)

    def stop(self) -> float:
        rss = self.peak_rss_mb()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return rss


def http_json(url: str, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """One JSON call to a controller's API; a new connection each time (the calls are few and slow)."""
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname or "127.0.0.1", u.port, timeout=120)
    try:
        payload = json.dumps(body).encode() if body is not None else None
        conn.request(method, path, body=payload, headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        data: dict[str, Any] = json.loads(resp.read())
        return data
    finally:
        conn.close()


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds each thread of a process has used so far (user + system), summed per /proc name
    (``_thread_label``); empty once the process is gone. Threads that ended are not counted."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue  # the thread ended meanwhile
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def process_cpu_s(pid: int) -> float:
    """CPU seconds a process has used so far (every thread: user + system); 0 once it is gone."""
    try:
        return process_cpu_seconds(pid)
    except OSError:
        return 0.0


class CpuProbe:
    """The controller's CPU while it handles one scenario: what shows whether a figure is bound by
    ZooKeeper (waiting) or by the controller's own Python (CPU), without a profiler in the way.

    ``event_cpu_s``/``event_wall_s``: the event thread's CPU and wall time in the scenario's
    controller state (``per_state_ms`` of ``/v1/status``: whole events, so a controlled shutdown
    includes what its event does after the answer, such as writing the state-change log);
    ``process_cpu_s``: every thread of the process (ZooKeeper client, request senders, the API), which
    share one interpreter lock with the event thread; ``thread_cpu_s``: that, per thread (/proc's
    names, set by ``_name_thread``: ``controller-N-ev`` the event thread, ``zk_loop`` kazoo's
    connection, ``_thread_worker`` its callbacks, ``controller-chan`` the senders summed, ``stream-*``
    and ``status-*`` the Redis writers), over the scenario's wall time up to ``finish`` (not only the
    events'). ``finish`` waits for the state's event(s) to end.
    """

    def __init__(self, controller: ControllerProc, state: str) -> None:
        self.controller = controller
        self.state = state
        self.before = self._timer()
        self.process_before = controller.cpu_s()
        self.threads_before = thread_cpu_s(controller.proc.pid)

    def _timer(self) -> dict[str, float]:
        assert self.controller.url is not None
        status = http_json(self.controller.url, "GET", "/v1/status")
        timer = status.get("per_state_ms", {}).get(self.state, {})
        busy = status.get("state") == self.state or status.get("event_queue_size", 0) > 0
        return {
            "count": float(timer.get("count", 0)),
            "total_ms": float(timer.get("total_ms", 0.0)),
            "cpu_ms": float(timer.get("cpu_ms", 0.0)),
            "busy": 1.0 if busy else 0.0,
        }

    def finish(self, timeout: float = 300) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        after = self._timer()
        while after["busy"] or after["count"] <= self.before["count"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for the controller's {self.state} event(s) to end")
            time.sleep(0.05)
            after = self._timer()
        used = {
            name: round(cpu - self.threads_before.get(name, 0.0), 3)
            for name, cpu in thread_cpu_s(self.controller.proc.pid).items()
        }
        per_thread = {name: cpu for name, cpu in sorted(used.items(), key=lambda item: -item[1]) if cpu > 0}
        return {
            "events": after["count"] - self.before["count"],
            "event_wall_s": round((after["total_ms"] - self.before["total_ms"]) / 1000, 3),
            "event_cpu_s": round((after["cpu_ms"] - self.before["cpu_ms"]) / 1000, 3),
            "process_cpu_s": round(self.controller.cpu_s() - self.process_before, 3),
            "thread_cpu_s": per_thread,
        }
