#!/usr/bin/env python3
"""Benchmark the controller against a private ZooKeeper: failover, broker failure, controlled
shutdown, preferred election, and ZooKeeper's own floor for the same reads and writes.

``scripts/bench [--quick] [--partitions N] [--brokers B] [--runs R] [--unbatched-runs U] [--json]``

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
  the standby.
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
"""

from __future__ import annotations

import argparse
import gc
import http.client
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import msgspec  # noqa: E402
from kazoo.client import KazooClient  # noqa: E402

from controller_core.gc_policy import gc_paused  # noqa: E402
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition  # noqa: E402
from controller_core.protocol.messages import AlterIsrPartition, AlterIsrRequest  # noqa: E402
from controller_core.zk import codecs, paths  # noqa: E402
from controller_core.zk.store import ZkStore  # noqa: E402
from scripts.bench_store import _check_fenced_result, _fenced_set, _pipelined  # noqa: E402
from scripts.devservices import process_cpu_seconds, temporary_services  # noqa: E402

PER_TOPIC = 50
QUIET_S = 0.5
"""The window over which each controller process, ZooKeeper and every broker agent must stay (almost)
idle before a scenario starts (``Bench.quiesce``)."""
REDIS_CLUSTER = "bench"
"""The cluster name of the benchmark's Redis keys (``kcp:bench:state-changes``, ...)."""
REQUEST_TIMEOUT_S = 300.0  # the controllers' request timeout (see serve_controller)
# The agents' ZooKeeper sessions. Every broker failure and shutdown in the benchmark deletes the
# agent's registration itself, so this never delays a measurement; at 6 s, agents at nice 19 starved
# past it under load (seen in both batched and unbatched rounds) and re-registered mid-round, which
# the controller then handled as an extra broker failure inside the timed scenarios.
AGENT_SESSION_TIMEOUT_MS = 30_000
# At a million partitions each agent decodes every UpdateMetadata in full (~150 MB of JSON) at nice 19
# on the same two cores, and 30 s sessions expired mid-round (2026-11-26): the private ZooKeeper's
# maximum (maxSessionTimeout, scripts/devservices.py) from half a million partitions up.
AGENT_SESSION_TIMEOUT_MS_LARGE = 60_000
LARGE_CLUSTER_PARTITIONS = 500_000
# Kafka's default zookeeper.session.timeout.ms. No figure waits for a session to expire (the failover
# starts with an explicit close, the broker failure with the registration's deletion); a shorter one
# lost the standby's session at a million partitions, with ZooKeeper's 3 GB heap and every process
# busy on two cores, and the run never went idle again (2026-11-26).
CONTROLLER_SESSION_TIMEOUT_S = 18.0
PY = sys.executable


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# -- the controller child process -----------------------------------------------------------------
class _StdoutSink:
    """Forward the records the benchmark needs to stdout, one JSON object a line."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def emit(self, record: Mapping[str, Any]) -> None:
        # "failover": the failover's clock; "request_batch": when requests went to the senders (the
        # broker failure's clock stops when its elections' LeaderAndIsr have been sent).
        if record.get("kind") in ("failover", "request_batch"):
            self.write(dict(record))

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
) -> int:
    from controller_core.config import ControllerConfig
    from controller_core.runner import ControllerRunner
    from controller_core.signal_wait import wait_for

    logging.basicConfig(level=logging.WARNING)
    sink = _StdoutSink()
    config = ControllerConfig(
        controller_id=controller_id,
        zookeeper_connect=connect,
        zookeeper_session_timeout_s=CONTROLLER_SESSION_TIMEOUT_S,
        auto_leader_rebalance_enable=False,
        first_rebalance_delay_seconds=3600,
        batched_writes=batched,
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
    profile_dir = os.environ.get("BENCH_PROFILE_DIR")
    profiler = None
    if profile_dir:  # every thread, one profile (setprofile hands each new thread to the profiler)
        import cProfile

        profiler = cProfile.Profile()
        threading.setprofile(lambda *_: profiler.enable() if profiler else None)
        profiler.enable()
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
    if profiler is not None and profile_dir:
        profiler.disable()
        profiler.dump_stats(str(Path(profile_dir) / f"controller-{controller_id}-{os.getpid()}.prof"))
    # The stopped controller stands for a broker on another machine: freeing its 100,000-partition
    # context at interpreter exit (0.6 to 0.9 s of CPU) must not take a core from the new controller,
    # whose failover the benchmark is timing. Its session is closed and its output written.
    sys.stdout.flush()
    os._exit(0)


# -- the orchestrator -----------------------------------------------------------------------------
class ControllerProc:
    def __init__(
        self,
        controller_id: int,
        connect: str,
        batched: bool = True,
        state_change_dir: Path | None = None,
        redis_url: str | None = None,
    ) -> None:
        self.id = controller_id
        self.failovers: list[dict[str, Any]] = []
        self.request_batches: list[dict[str, Any]] = []
        self.url: str | None = None
        self.ready = threading.Event()
        self.proc = subprocess.Popen(
            [
                *(PY, str(Path(__file__).resolve()), "--serve-controller", str(controller_id), "--zookeeper", connect),
                *(() if batched else ("--unbatched",)),
                *(() if state_change_dir is None else ("--state-change-dir", str(state_change_dir))),
                *(() if redis_url is None else ("--redis-url", redis_url)),
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

    def leader_and_isr_sent_at(self, cause: str, since_ms: float) -> float | None:
        """Wall-clock ms of the first batch with LeaderAndIsr requests that ``cause`` (an event name)
        sent at or after ``since_ms``; None if none has been seen yet."""
        for record in list(self.request_batches):
            lair = record.get("leader_and_isr") or {}
            if record.get("cause") == cause and record.get("ts", 0.0) >= since_ms and sum(lair.values()) > 0:
                return float(record["ts"])
        return None

    def peak_rss_mb(self) -> float:
        try:
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
        except OSError:
            pass
        return 0.0

    def cpu_s(self) -> float:
        """CPU seconds the controller process has used so far (every thread: user + system)."""
        return _process_cpu_s(self.proc.pid)

    def stop(self) -> float:
        rss = self.peak_rss_mb()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        return rss


def _http(url: str, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
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


def _discard(value: object) -> None:
    return None


def _wait(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval)


def _process_cpu_s(pid: int) -> float:
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
    share one interpreter lock with the event thread. ``finish`` waits for the state's event(s) to end.
    """

    def __init__(self, controller: ControllerProc, state: str) -> None:
        self.controller = controller
        self.state = state
        self.before = self._timer()
        self.process_before = controller.cpu_s()

    def _timer(self) -> dict[str, float]:
        assert self.controller.url is not None
        status = _http(self.controller.url, "GET", "/v1/status")
        timer = status.get("per_state_ms", {}).get(self.state, {})
        busy = status.get("state") == self.state or status.get("event_queue_size", 0) > 0
        return {
            "count": float(timer.get("count", 0)),
            "total_ms": float(timer.get("total_ms", 0.0)),
            "cpu_ms": float(timer.get("cpu_ms", 0.0)),
            "busy": 1.0 if busy else 0.0,
        }

    def finish(self, timeout: float = 300) -> dict[str, float]:
        deadline = time.monotonic() + timeout
        after = self._timer()
        while after["busy"] or after["count"] <= self.before["count"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out waiting for the controller's {self.state} event(s) to end")
            time.sleep(0.05)
            after = self._timer()
        return {
            "events": after["count"] - self.before["count"],
            "event_wall_s": round((after["total_ms"] - self.before["total_ms"]) / 1000, 3),
            "event_cpu_s": round((after["cpu_ms"] - self.before["cpu_ms"]) / 1000, 3),
            "process_cpu_s": round(self.controller.cpu_s() - self.process_before, 3),
        }


class Bench:
    def __init__(
        self,
        connect: str,
        n: int,
        brokers: int,
        agent_nice: int = 0,
        state_change_dir: Path | None = None,
        redis_url: str | None = None,
        zookeeper_pid: int | None = None,
    ) -> None:
        self.connect = connect
        self.zookeeper_pid = zookeeper_pid
        """The private ZooKeeper server's process, which ``quiesce`` also waits for (None: not known)."""
        self.state_change_dir = state_change_dir
        """Where the controllers write their JSON-lines state-change logs (one directory each)."""
        self.redis_url = redis_url
        """The Redis the controllers feed their state-change stream and status hash to (None: none)."""
        self.n = n
        self.brokers = brokers
        self.agent_nice = agent_nice
        self.client = KazooClient(hosts=connect, timeout=30.0)
        self.client.start(timeout=30)
        # The private ZooKeeper's jute.maxbuffer is 4 MiB (scripts/devservices.py).
        self.store = ZkStore(self.client, max_znode_bytes=4_000_000)
        self.agents: dict[int, subprocess.Popen[bytes]] = {}
        self.controllers: dict[int, ControllerProc] = {}
        self.rss: list[float] = []
        self.batched = True  # how (re)started controllers write: see the "unbatched" phase of run()
        self.failover_phases: list[dict[str, float]] = []
        # Per scenario: the controller's CPU while it handled it (see ``CpuProbe``).
        self.cpu: dict[str, list[dict[str, float]]] = {}
        self.partitions: list[TopicPartition] = []
        self.replicas: dict[TopicPartition, tuple[int, ...]] = {}

    # set-up
    def populate(self) -> None:
        store, b = self.store, self.brokers
        store.ensure_persistent_paths()
        epoch = store.register_controller_and_increment_epoch(999)
        topics = (self.n + PER_TOPIC - 1) // PER_TOPIC
        for t in range(topics):
            name = f"t{t:05d}"
            count = min(PER_TOPIC, self.n - t * PER_TOPIC)
            assignment = {p: [1 + (t + p + k) % b for k in range(3)] for p in range(count)}
            store.create_topic(name, assignment)
            for p, reps in assignment.items():
                tp = TopicPartition(name, p)
                self.partitions.append(tp)
                self.replicas[tp] = tuple(reps)
        initial = {
            tp: LeaderIsrAndControllerEpoch(LeaderAndIsr(reps[0], 0, reps), epoch.epoch)
            for tp, reps in self.replicas.items()
        }
        store.create_partition_states(initial, epoch.epoch_zk_version)
        store.delete_controller(epoch.epoch_zk_version)

    def start_agent(self, broker_id: int) -> None:
        nice = self.agent_nice
        session_ms = AGENT_SESSION_TIMEOUT_MS_LARGE if self.n >= LARGE_CLUSTER_PARTITIONS else AGENT_SESSION_TIMEOUT_MS
        self.agents[broker_id] = subprocess.Popen(
            [
                *(PY, "-m", "controller_core.broker.main", "--id", str(broker_id), "--zookeeper", self.connect),
                *("--port", "0", "--lightweight", "--zookeeper-session-timeout-ms", str(session_ms)),
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # In a real cluster the brokers are other machines. Here they share the two cores, and
            # decoding the UpdateMetadata every broker gets for every change (10 brokers x 30,000
            # partitions in a controlled shutdown) would otherwise take cores from the controller
            # and ZooKeeper while the clock runs; niced, they use what those two leave idle.
            preexec_fn=(lambda: os.nice(nice)) if nice else None,  # noqa: PLW1509 - os.nice only
        )

    def registered(self, broker_id: int) -> bool:
        return self.client.exists(paths.broker_id_path(broker_id)) is not None

    def registrations(self) -> dict[int, int]:
        """Each registered broker's registration czxid (it changes when an agent re-registers)."""
        out = {}
        for b in range(1, self.brokers + 1):
            stat = self.client.exists(paths.broker_id_path(b))
            if stat is not None:
                out[b] = stat.czxid
        return out

    def kill_agent(self, broker_id: int) -> None:
        proc = self.agents.pop(broker_id)
        proc.kill()
        proc.wait()

    def start_controller(self, controller_id: int) -> ControllerProc:
        logs = None if self.state_change_dir is None else self.state_change_dir / f"controller-{controller_id}"
        c = ControllerProc(controller_id, self.connect, self.batched, logs, self.redis_url)
        self.controllers[controller_id] = c
        if not c.ready.wait(60):
            raise TimeoutError(f"controller {controller_id} did not start")
        return c

    def active(self) -> ControllerProc:
        cid = self.store.get_controller_id()
        if cid is None or cid not in self.controllers:
            raise RuntimeError(f"no known active controller ({cid})")
        return self.controllers[cid]

    def leaders(self, parts: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        out = {}
        for tp, read in self.store.get_partition_states(parts).items():
            out[tp] = read.state.leader_and_isr.leader if read.state is not None else -1
        return out

    def last_modified_ms(self, parts: Sequence[TopicPartition]) -> float:
        """The latest modification time (ZooKeeper's mtime: the server's wall clock, in ms) among the
        state znodes of ``parts``."""
        pending = [self.client.exists_async(paths.partition_state_path(tp)) for tp in parts]
        stats = [p.get(timeout=60) for p in pending]
        return float(max(stat.mtime for stat in stats if stat is not None))

    def quiesce(self, timeout: float = 120) -> None:
        """Wait until the controllers, ZooKeeper and the broker agents are done with what came before:
        the active controller's event queue empty, and no controller process, ZooKeeper server or agent
        using more than a tenth of a core over ``QUIET_S``. An event goes on after what a figure times
        (a failover's state snapshot, the records built at its end), the Redis stream's writer sends
        them afterwards, ZooKeeper works on the same two cores (it also snapshots its data tree every
        100,000 to 200,000 writes), and the agents, which stand in for other machines, are still
        decoding the last scenario's LeaderAndIsr and UpdateMetadata for seconds (at nice 19 they
        still took 0.4 CPU-s of a 0.42 s broker failure): the next scenario's clock must not include
        that, nor be set against a floor measured on a quiet ZooKeeper. At 100,000 partitions the wait
        is 1.5 to 6 s before most scenarios (printed when over a second)."""
        self.idle(self.active(), timeout)
        started = time.monotonic()
        deadline = started + timeout
        while time.monotonic() < deadline:
            pids = [c.proc.pid for c in self.controllers.values() if c.proc.poll() is None]
            if self.zookeeper_pid is not None:
                pids.append(self.zookeeper_pid)
            pids.extend(agent.pid for agent in self.agents.values() if agent.poll() is None)
            before = [_process_cpu_s(pid) for pid in pids]
            time.sleep(QUIET_S)
            if all(_process_cpu_s(pid) - b <= QUIET_S / 10 for pid, b in zip(pids, before, strict=True)):
                waited = time.monotonic() - started
                if waited > 2 * QUIET_S:
                    log(f"  (waited {waited:.1f} s for the controllers, ZooKeeper and the agents to quiet down)")
                return
        log("  WARNING: the controllers, ZooKeeper or the agents did not quiet down before the next scenario")

    def idle(self, c: ControllerProc, timeout: float = 300) -> None:
        assert c.url is not None
        url = c.url
        _wait(lambda: _http(url, "GET", "/v1/status")["event_queue_size"] == 0, timeout, "an idle controller", 0.2)

    def record_cpu(self, scenario: str, probe: CpuProbe, wall_s: float) -> None:
        """Keep ``probe``'s figures under ``scenario`` (``unbatched_`` prefixed in the unbatched phase)."""
        scenario = scenario if self.batched else "unbatched_" + scenario
        figures = probe.finish()
        self.cpu.setdefault(scenario, []).append(figures)
        log(
            f"    {scenario}: the event thread spent {figures['event_cpu_s']:.3f} s of CPU in "
            f"{figures['events']:.0f} {probe.state} event(s) lasting {figures['event_wall_s']:.3f} s "
            f"(the figure: {wall_s:.3f} s); the whole controller process {figures['process_cpu_s']:.3f} s of CPU"
        )

    # scenarios
    def failover(self) -> float:
        old = self.active()
        other = next(c for c in self.controllers.values() if c is not old)
        before = len(other.failovers)
        deleted: list[float] = []

        def watch(event: Any) -> None:
            deleted.append(time.time())

        if self.client.exists(paths.CONTROLLER_PATH, watch=watch) is None:
            raise RuntimeError("no /controller")
        probe = CpuProbe(other, "CONTROLLER_CHANGE")
        stopping = time.perf_counter()
        self.rss.append(old.stop())
        exit_s = time.perf_counter() - stopping
        _wait(lambda: len(other.failovers) > before, 600, "the standby's failover")
        record = other.failovers[-1]
        start = deleted[0] if deleted else record["elected_at_ms"] / 1000
        seconds = float(record["completed_at_ms"]) / 1000 - start
        log(
            f"  failover: {seconds:.3f} s (election {record['elected_at_ms'] / 1000 - start:.3f} s, "
            f"failover record {record['duration_ms'] / 1000:.3f} s, {record['partitions']} partitions; "
            f"the old controller's process exited {exit_s:.2f} s after SIGTERM)"
        )
        phases = record.get("phases_ms") or {}
        if phases:
            log("    phases: " + ", ".join(f"{name} {ms / 1000:.2f} s" for name, ms in phases.items()))
        self.failover_phases.append(phases)
        log(f"    new controller's peak RSS so far: {other.peak_rss_mb():.0f} MB")
        self.record_cpu("failover", probe, seconds)
        self.start_controller(old.id)
        self.idle(other)
        return seconds

    def broker_failure(self, broker_id: int) -> tuple[float, int]:
        lead = self.leaders(self.partitions)
        led = [tp for tp, leader in lead.items() if leader == broker_id]
        active = self.active()
        probe = CpuProbe(active, "BROKER_CHANGE")
        self.kill_agent(broker_id)
        started = time.perf_counter()
        started_ms = time.time() * 1000
        self.client.delete(paths.broker_id_path(broker_id))

        def moved() -> bool:
            now = self.leaders(led)
            return all(v not in (-1, broker_id) for v in now.values())

        # The controller hands the elections' LeaderAndIsr to its senders right after the elections,
        # whose writes are then all made (before the ISR shrinks); its request_batch record says when.
        # Waiting for that record, not polling ZooKeeper meanwhile: a 10,000-state multi-read every
        # 50 ms competes with the controller and ZooKeeper for the same two cores.
        _wait(lambda: active.leader_and_isr_sent_at("BrokerChange", started_ms) is not None, 180, "the requests")
        sent_ms = active.leader_and_isr_sent_at("BrokerChange", started_ms)
        assert sent_ms is not None
        sent_s = (sent_ms - started_ms) / 1000
        _wait(moved, 180, "new leaders", interval=0.05)  # at once, unless an election had to be retried
        polled_s = time.perf_counter() - started
        # When ZooKeeper applied the last of those writes: the state znodes' own modification times
        # (the server's wall clock, this machine's).
        written_s = (self.last_modified_ms(led) - started_ms) / 1000
        seconds = max(written_s, sent_s)
        log(
            f"  broker_failure: {seconds:.3f} s for {len(led)} leaders of broker {broker_id} (all in ZooKeeper "
            f"after {written_s:.3f} s, their LeaderAndIsr sent after {sent_s:.3f} s, checked by the benchmark "
            f"after {polled_s:.3f} s; controller peak RSS so far {active.peak_rss_mb():.0f} MB)"
        )
        self.record_cpu("broker_failure", probe, seconds)
        return seconds, len(led)

    def controlled_shutdown(self, broker_id: int) -> tuple[float, int]:
        led = sum(1 for v in self.leaders(self.partitions).values() if v == broker_id)
        stat = self.client.exists(paths.broker_id_path(broker_id))
        assert stat is not None
        url = self.active().url
        assert url is not None
        probe = CpuProbe(self.active(), "CONTROLLED_SHUTDOWN")
        started = time.perf_counter()
        answer = _http(url, "POST", "/v1/controlled_shutdown", {"broker_id": broker_id, "broker_epoch": stat.czxid})
        seconds = time.perf_counter() - started
        remaining = answer.get("partitions_remaining", answer.get("remaining_partitions", []))
        log(
            f"  controlled_shutdown: {seconds:.3f} s for {led} leaders of broker {broker_id} "
            f"(error {answer.get('error_code')}, {len(remaining)} remaining)"
        )
        self.record_cpu("controlled_shutdown", probe, seconds)
        self.kill_agent(broker_id)
        self.client.delete(paths.broker_id_path(broker_id))
        return seconds, led

    def preferred_election(self) -> tuple[float, int]:
        moved = sum(1 for tp, v in self.leaders(self.partitions).items() if v != self.replicas[tp][0])
        deleted = threading.Event()

        def watch(event: Any) -> None:
            deleted.set()  # the Event of the request being waited for (a closure over the variable)

        # One znode holds ~100,000 partitions within the private ZooKeeper's jute.maxbuffer; more are
        # written as Kafka's tool would have to: the next request once the controller consumed one.
        size = len(codecs.encode_preferred_replica_election(self.partitions))
        pieces = -(-size // self.store.max_znode_bytes)
        step = -(-len(self.partitions) // pieces)
        probe = CpuProbe(self.active(), "MANUAL_LEADER_BALANCE")
        started = time.perf_counter()
        for i in range(0, len(self.partitions), step):
            deleted = threading.Event()
            self.store.create_preferred_replica_election_request(self.partitions[i : i + step])
            if self.client.exists(paths.PREFERRED_REPLICA_ELECTION_PATH, watch=watch) is None:
                deleted.set()
            if not deleted.wait(600):
                raise TimeoutError("preferred election")
        seconds = time.perf_counter() - started
        log(
            f"  preferred_election: {seconds:.3f} s ({moved} partitions off their preferred leader; "
            f"{pieces} request znode(s))"
        )
        self.record_cpu("preferred_election", probe, seconds)
        return seconds, moved

    def restart_brokers(self, ids: Sequence[int]) -> None:
        for b in ids:
            self.start_agent(b)
        _wait(lambda: all(self.registered(b) for b in ids), 120, "brokers to register")
        self.idle(self.active())
        self.restore_isr()

    def restore_isr(self) -> None:
        """Lightweight agents do not replicate, so a restarted broker never rejoins an ISR by itself:
        send the AlterIsr its leaders would send once it caught up (full ISR again), as each leader."""
        url = self.active().url
        assert url is not None
        by_leader: dict[int, list[AlterIsrPartition]] = {}
        for tp, read in self.store.get_partition_states(self.partitions).items():
            if read.state is None:
                continue
            lai = read.state.leader_and_isr
            if lai.leader >= 0 and set(lai.isr) != set(self.replicas[tp]):
                by_leader.setdefault(lai.leader, []).append(
                    AlterIsrPartition(tp.topic, tp.partition, lai.leader_epoch, self.replicas[tp], lai.zk_version)
                )
        for leader, parts in by_leader.items():
            stat = self.client.exists(paths.broker_id_path(leader))
            assert stat is not None
            for i in range(0, len(parts), 5000):
                request = AlterIsrRequest(leader, stat.czxid, tuple(parts[i : i + 5000]))
                _http(url, "POST", "/v1/alter_isr", msgspec.to_builtins(request))
        self.idle(self.active())
        restored = sum(len(p) for p in by_leader.values())
        log(f"  ISR restored (AlterIsr from the leaders) for {restored} partitions")

    # floors (controllers stopped)
    def floors(self, writes: int) -> dict[str, float]:
        """The same reads and writes straight through ``ZkStore``, each timed with the collector paused
        (the controller pauses it during its events too: a collection would be "something in the way")."""
        gc.collect()
        with gc_paused():
            return self._floors(writes)

    def _floors(self, writes: int) -> dict[str, float]:
        store, parts = self.store, self.partitions
        epoch = store.register_controller_and_increment_epoch(998)
        state_paths = [paths.partition_state_path(tp) for tp in parts]
        started = time.perf_counter()
        store.reader.get_data_versions(state_paths, size_hint=96)
        raw_read_s = time.perf_counter() - started
        started = time.perf_counter()
        reads = store.get_partition_states(parts)
        read_s = time.perf_counter() - started
        current = {tp: r.state.leader_and_isr for tp, r in reads.items() if r.state is not None}
        subset = parts[:writes]
        started = time.perf_counter()
        result = store.update_leader_and_isr(
            {tp: current[tp].new_epoch() for tp in subset}, epoch.epoch, epoch.epoch_zk_version
        )
        write_s = time.perf_counter() - started
        for tp, lai in result.finished.items():
            if isinstance(lai, LeaderAndIsr):
                current[tp] = lai
        # one znode per request, pipelined (window 1000)
        started = time.perf_counter()
        _pipelined(parts, lambda tp: self.client.get_async(paths.partition_state_path(tp)), lambda tp, v: None, 1000)
        unbatched_read_s = time.perf_counter() - started
        started = time.perf_counter()
        _pipelined(
            subset,
            lambda tp: _fenced_set(self.client, epoch, tp, current[tp].new_epoch()),
            lambda tp, results: _discard(_check_fenced_result(tp, results)),
            1000,
        )
        unbatched_write_s = time.perf_counter() - started
        store.delete_controller(epoch.epoch_zk_version)
        return {
            "zk_floor_read_s": read_s,
            "zk_floor_read_raw_s": raw_read_s,
            "zk_floor_write_s": write_s,
            "unbatched_zk_floor_read_s": unbatched_read_s,
            "unbatched_zk_floor_write_s": unbatched_write_s,
        }

    def close(self) -> None:
        for c in self.controllers.values():
            if c.proc.poll() is None:
                self.rss.append(c.stop())
        for b in list(self.agents):
            self.kill_agent(b)
        self.client.stop()
        self.client.close()
        if self.state_change_dir is not None and self.state_change_dir.is_dir():
            files = [f for f in self.state_change_dir.rglob("*") if f.is_file()]
            size = sum(f.stat().st_size for f in files)
            log(f"the controllers wrote {size / 1e6:,.1f} MB of state-change log in {len(files)} files")


def _scenarios(bench: Bench, r: int, samples: dict[str, list[float]], counts: dict[str, int], prefix: str) -> None:
    """One round: failover, broker failure, controlled shutdown, restart, preferred election."""
    registrations = bench.registrations()
    bench.quiesce()
    samples.setdefault(prefix + "failover_s", []).append(bench.failover())
    victim = 1 + (2 * r) % bench.brokers
    bench.quiesce()
    s, led = bench.broker_failure(victim)
    samples.setdefault(prefix + "broker_failure_s", []).append(s)
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

    from workers.sinks import state_change_stream_key

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
    n: int, brokers: int, runs: int, unbatched_runs: int = 0, agent_nice: int = 0, redis_stream: bool = True
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
            zookeeper_pid=None if services.zookeeper.process is None else services.zookeeper.process.pid,
        )
        try:
            log(f"creating {n:,} partitions ({n // PER_TOPIC} topics x {PER_TOPIC}, RF 3, {brokers} brokers) ...")
            started = time.perf_counter()
            bench.populate()
            log(f"  created in {time.perf_counter() - started:.1f} s; starting {brokers} lightweight agents ...")
            for b in range(1, brokers + 1):
                bench.start_agent(b)
            _wait(lambda: all(bench.registered(b) for b in range(1, brokers + 1)), 120, "brokers")
            first = bench.start_controller(1)
            _wait(lambda: bool(first.failovers), 600, "the first failover")
            log(f"  first failover (cold): {first.failovers[0]['duration_ms'] / 1000:.3f} s")
            bench.start_controller(2)
            bench.idle(first)
            samples: dict[str, list[float]] = {}
            counts: dict[str, int] = {}
            for r in range(runs):
                log(f"run {r + 1}/{runs}")
                _scenarios(bench, r, samples, counts, "")
            status = _http(bench.active().url or "", "GET", "/v1/status")
            if unbatched_runs:
                # The same scenarios with one fenced write per partition (Kafka 1.1): replace the
                # standby by an unbatched one, fail over to it, and restart the old one unbatched too.
                log("unbatched controllers: one fenced write per partition, pipelined (Kafka 1.1 style)")
                bench.batched = False
                standby = next(c for c in bench.controllers.values() if c is not bench.active())
                bench.rss.append(standby.stop())
                bench.start_controller(standby.id)
                for r in range(unbatched_runs):
                    log(f"unbatched run {r + 1}/{unbatched_runs}")
                    _scenarios(bench, runs + r, samples, counts, "unbatched_")
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
    report["failover_phases_ms"] = bench.failover_phases  # per failover, batched runs first
    for scenario, figures in bench.cpu.items():
        for key in ("event_cpu_s", "event_wall_s", "process_cpu_s"):
            values = [f[key] for f in figures]
            report[f"{scenario}_{key}"] = round(statistics.median(values), 3)
            report[f"{scenario}_{key}_runs"] = values
    report["controller_peak_rss_mb"] = round(max(bench.rss, default=0.0), 1)
    report["events_processed"] = status["events_processed"]
    report["events_per_s_busy"] = round(events_per_s, 1)
    report["controller_busy_s"] = round(busy_ms / 1000, 3)
    report["brokers_kind"] = "lightweight broker agents (controller_core.broker.main --lightweight)"
    report["agent_nice"] = agent_nice
    report["redis_stream"] = redis_stream
    report["machine"] = f"{os.cpu_count()} CPUs, {os.uname().sysname} {os.uname().release}"
    report["wall_s"] = round(time.perf_counter() - wall, 1)
    return report


KEYS = [
    "failover_s",
    "broker_failure_s",
    "controlled_shutdown_s",
    "preferred_election_s",
    "zk_floor_read_s",
    "zk_floor_read_raw_s",
    "zk_floor_write_s",
    "unbatched_failover_s",
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
        f"{'events_per_s_busy':<34}{report['events_per_s_busy']:>10.1f}",
        f"wall time {report['wall_s']} s; brokers: {report['brokers_kind']}, nice {report['agent_nice']}; "
        f"controllers feed the Redis state-change stream: {'yes' if report.get('redis_stream') else 'no'}",
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
    parser.add_argument("--serve-controller", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--redis-url", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--zookeeper", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--unbatched", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--state-change-dir", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_controller is not None:
        return serve_controller(
            args.serve_controller, args.zookeeper, not args.unbatched, args.state_change_dir, args.redis_url
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
    report = run(n, args.brokers, runs, unbatched_runs, args.agent_nice, not args.no_redis_stream)
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
