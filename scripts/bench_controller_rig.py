"""The controller benchmark's cluster (``Bench``): its set-up, the four timed scenarios and ZooKeeper's
floor for the same reads and writes.

Why apart from ``scripts/bench_controller.py``: that module decides what a run is (rounds, phases,
medians, the report and its table); this one knows how each scenario is staged and timed against
the private ZooKeeper, the lightweight broker agents and the candidates of
``scripts.bench_controller_proc``, and what has to be quiet before a clock starts.
"""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import msgspec
from kazoo.client import KazooClient

from controller_core.gc_policy import gc_paused
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.protocol.messages import AlterIsrPartition, AlterIsrRequest
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from scripts.bench_controller_proc import PY, REPO_ROOT, ControllerProc, CpuProbe, http_json, process_cpu_s
from scripts.bench_store import _check_fenced_result, _fenced_set, _pipelined
from scripts.support.machine_cpu import MachineCpu, MachineCpuWindow

PER_TOPIC = 50
QUIET_S = 0.5
"""The window over which each controller process, ZooKeeper and every broker agent must stay (almost)
idle before a scenario starts (``Bench.quiesce``)."""
# The agents' ZooKeeper sessions. Every broker failure and shutdown in the benchmark deletes the
# agent's registration itself, so this never delays a measurement; at 6 s, agents at nice 19 starved
# past it under load (seen in both batched and unbatched rounds) and re-registered mid-round, which
# the controller then handled as an extra broker failure inside the timed scenarios.
AGENT_SESSION_TIMEOUT_MS = 30_000
# At a million partitions each agent decodes every UpdateMetadata in full (~150 MB of JSON) at nice 19
# on the same two cores, and 30 s sessions expired mid-round (2026-11-26): the private ZooKeeper's
# maximum (maxSessionTimeout, scripts/devservices/zookeeper.py) from half a million partitions up.
AGENT_SESSION_TIMEOUT_MS_LARGE = 60_000
LARGE_CLUSTER_PARTITIONS = 500_000
STANDBY_MODES = ("warm", "cold", "none")
"""The standby during the scenarios other than the failovers: ``warm`` follows every write of the active
controller (as the product runs, issue 28), ``cold`` is a candidate that only watches ``/controller``,
``none`` no second candidate at all. On two cores a warm standby takes CPU from the active controller
and ZooKeeper while the clock runs; the three modes show how much."""


def log(message: str) -> None:
    """Progress on stderr with the time of day, so that stdout stays the report (``--json`` parses)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _discard(value: object) -> None:
    """Drop a pipelined result once it has been checked (the floors time the work, not the values)."""
    return None


def poll_until(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    """Wait for ``cond``; a TimeoutError naming ``what`` rather than a benchmark that hangs."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(interval)


class Bench:
    """The private cluster one benchmark run works on: N partitions in ZooKeeper, B broker agents and
    the controller candidates, with one method per timed scenario and the figures they collect."""

    def __init__(
        self,
        connect: str,
        n: int,
        brokers: int,
        agent_nice: int = 0,
        state_change_dir: Path | None = None,
        redis_url: str | None = None,
        zookeeper_pid: int | None = None,
        standby: str = "warm",
    ) -> None:
        if standby not in STANDBY_MODES:
            raise ValueError(f"standby must be one of {', '.join(STANDBY_MODES)}, not {standby!r}")
        self.connect = connect
        self.standby = standby
        """What stands by during the broker failure, controlled shutdown and preferred election
        (``STANDBY_MODES``); the failovers themselves always get the standby they time."""
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
        # The private ZooKeeper's jute.maxbuffer is 4 MiB (scripts/devservices/zookeeper.py).
        self.store = ZkStore(self.client, max_znode_bytes=4_000_000)
        self.agents: dict[int, subprocess.Popen[bytes]] = {}
        self.controllers: dict[int, ControllerProc] = {}
        self.rss: list[float] = []
        self.batched = True  # how (re)started controllers write: see the "unbatched" phase of run()
        self.failover_phases: list[dict[str, float]] = []
        self.standby_rss_mb: dict[bool, list[float]] = {}  # warm / cold standby's RSS before it took over
        # Per scenario: the controller's CPU while it handled it (see ``CpuProbe``).
        self.cpu: dict[str, list[dict[str, float]]] = {}
        # Per scenario: each thread's CPU in the controller process (``CpuProbe``'s ``thread_cpu_s``).
        self.thread_cpu: dict[str, list[dict[str, float]]] = {}
        # Per scenario: the whole machine's CPU over the figure's window, by process role (``machine_window``).
        self.machine_cpu: dict[str, list[dict[str, Any]]] = {}
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

    def start_controller(self, controller_id: int, warm: bool = True) -> ControllerProc:
        logs = None if self.state_change_dir is None else self.state_change_dir / f"controller-{controller_id}"
        c = ControllerProc(controller_id, self.connect, self.batched, logs, self.redis_url, warm_standby=warm)
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
            before = [process_cpu_s(pid) for pid in pids]
            time.sleep(QUIET_S)
            if all(process_cpu_s(pid) - b <= QUIET_S / 10 for pid, b in zip(pids, before, strict=True)):
                waited = time.monotonic() - started
                if waited > 2 * QUIET_S:
                    log(f"  (waited {waited:.1f} s for the controllers, ZooKeeper and the agents to quiet down)")
                return
        log("  WARNING: the controllers, ZooKeeper or the agents did not quiet down before the next scenario")

    def idle(self, c: ControllerProc, timeout: float = 300) -> None:
        assert c.url is not None
        url = c.url
        poll_until(
            lambda: http_json(url, "GET", "/v1/status")["event_queue_size"] == 0, timeout, "an idle controller", 0.2
        )

    def machine_window(self) -> MachineCpuWindow:
        """Opened when a figure's clock starts: the machine's busy CPU and, by role, the processes that
        make the figure (the active controller, the other candidate, ZooKeeper, the broker agents, this
        benchmark's own process, which times and checks)."""
        active = self.active()
        roles = {
            "controller": [active.proc.pid],
            "standby": [c.proc.pid for c in self.controllers.values() if c is not active and c.proc.poll() is None],
            "zookeeper": [] if self.zookeeper_pid is None else [self.zookeeper_pid],
            "agents": [a.pid for a in self.agents.values() if a.poll() is None],
            "benchmark": [os.getpid()],
        }
        return MachineCpuWindow(roles)

    def record_machine(self, scenario: str, used: MachineCpu) -> None:
        """Keep and print the machine's CPU over ``scenario``'s window (stopped when its clock stopped)."""
        scenario = scenario if self.batched else "unbatched_" + scenario
        self.machine_cpu.setdefault(scenario, []).append(used.as_dict())
        log(f"      {used.summary()}")

    def record_cpu(self, scenario: str, probe: CpuProbe, wall_s: float) -> None:
        """Keep ``probe``'s figures under ``scenario`` (``unbatched_`` prefixed in the unbatched phase)."""
        scenario = scenario if self.batched else "unbatched_" + scenario
        figures = probe.finish()
        per_thread = figures.pop("thread_cpu_s")
        self.cpu.setdefault(scenario, []).append(figures)
        self.thread_cpu.setdefault(scenario, []).append(per_thread)
        log(
            f"    {scenario}: the event thread spent {figures['event_cpu_s']:.3f} s of CPU in "
            f"{figures['events']:.0f} {probe.state} event(s) lasting {figures['event_wall_s']:.3f} s "
            f"(the figure: {wall_s:.3f} s); the whole controller process {figures['process_cpu_s']:.3f} s of CPU"
        )
        log("      per thread: " + ", ".join(f"{name} {cpu:.2f}" for name, cpu in per_thread.items()))

    # scenarios
    def failover(self, warm: bool = True) -> float:
        """``warm``: the standby has followed ZooKeeper and is current (waited for); else it is replaced
        first by a candidate started from nothing that does not follow (``cold_failover_s``)."""
        old = self.active()
        other = next((c for c in self.controllers.values() if c is not old and c.proc.poll() is None), None)
        if other is None or other.warm_standby != warm:
            # The standby this failover times, started from nothing: a cold one always is (the full
            # reload), a warm one only when ``--standby cold|none`` left none that followed.
            if other is not None:
                self.rss.append(other.stop())
            other = self.start_controller(2 if old.id == 1 else 1, warm=warm)
        if warm:
            url = other.url or ""
            poll_until(lambda: http_json(url, "GET", "/v1/status").get("standby_warm") == "1", 600, "a warm standby")
        self.standby_rss_mb.setdefault(warm, []).append(other.rss_mb())
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
        poll_until(lambda: len(other.failovers) > before, 600, "the standby's failover")
        record = other.failovers[-1]
        start = deleted[0] if deleted else record["elected_at_ms"] / 1000
        seconds = float(record["completed_at_ms"]) / 1000 - start
        log(
            f"  failover ({record.get('path', '?')}): {seconds:.3f} s "
            f"(election {record['elected_at_ms'] / 1000 - start:.3f} s, "
            f"failover record {record['duration_ms'] / 1000:.3f} s, {record['partitions']} partitions; "
            f"the old controller's process exited {exit_s:.2f} s after SIGTERM)"
        )
        phases = record.get("phases_ms") or {}
        if phases:
            log("    phases: " + ", ".join(f"{name} {ms / 1000:.2f} s" for name, ms in phases.items()))
        self.failover_phases.append(phases)
        log(f"    new controller's peak RSS so far: {other.peak_rss_mb():.0f} MB")
        self.record_cpu("failover", probe, seconds)
        del self.controllers[old.id]
        if self.standby != "none":
            self.start_controller(old.id, warm=self.standby == "warm")
        self.idle(other)
        # The failover's state-snapshot record comes once its requests are answered: waited for, so
        # that the next scenario does not stop a controller before it (its memory is in the figures).
        epoch, seq = record["controller_epoch"], record["seq"]
        written = lambda: any(s["controller_epoch"] == epoch and s["seq"] > seq for s in other.snapshots)  # noqa: E731
        poll_until(written, 600, "the state snapshot", 0.2)
        log(f"    state snapshot written; new controller's peak RSS so far: {other.peak_rss_mb():.0f} MB")
        self.idle(other)
        return seconds

    def standby_lag_p99_s(self) -> float:
        """The standby's lag behind ZooKeeper (p99 of now - mtime of each change it applied, its last
        50,000 changes: after a broker failure, mostly that storm's), once it has caught up."""
        active = self.active()
        standby = next(c for c in self.controllers.values() if c is not active)
        if not standby.warm_standby:
            raise RuntimeError("the standby's lag is only there with --standby warm")
        url = standby.url or ""
        poll_until(lambda: http_json(url, "GET", "/v1/status").get("standby_backlog", 1) == 0, 300, "standby caught up")
        status = http_json(url, "GET", "/v1/status")
        log(
            f"  standby lag: p50 {status['standby_lag_p50_ms']:.0f} ms, p99 {status['standby_lag_p99_ms']:.0f} ms, "
            f"max {status['standby_lag_max_ms']:.0f} ms (event received to applied: p99 "
            f"{status['standby_apply_lag_p99_ms']:.0f} ms); largest backlog {status['standby_backlog_max']:,} paths, "
            f"{status['standby_changes_applied']:,} changes applied, {status['standby_state']}"
        )
        return float(status["standby_lag_p99_ms"]) / 1000

    def broker_failure(self, broker_id: int) -> tuple[float, int]:
        lead = self.leaders(self.partitions)
        led = [tp for tp, leader in lead.items() if leader == broker_id]
        active = self.active()
        probe = CpuProbe(active, "BROKER_CHANGE")
        self.kill_agent(broker_id)
        window = self.machine_window()
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
        poll_until(lambda: active.leader_and_isr_sent_at("BrokerChange", started_ms) is not None, 180, "the requests")
        sent_ms = active.leader_and_isr_sent_at("BrokerChange", started_ms)
        assert sent_ms is not None
        sent_s = (sent_ms - started_ms) / 1000
        poll_until(moved, 180, "new leaders", interval=0.05)  # at once, unless an election had to be retried
        polled_s = time.perf_counter() - started
        # When ZooKeeper applied the last of those writes: the state znodes' own modification times
        # (the server's wall clock, this machine's).
        written_s = (self.last_modified_ms(led) - started_ms) / 1000
        seconds = max(written_s, sent_s)
        window.stop()
        machine = window.until(started + seconds)
        log(
            f"  broker_failure: {seconds:.3f} s for {len(led)} leaders of broker {broker_id} (all in ZooKeeper "
            f"after {written_s:.3f} s, their LeaderAndIsr sent after {sent_s:.3f} s, checked by the benchmark "
            f"after {polled_s:.3f} s; controller peak RSS so far {active.peak_rss_mb():.0f} MB)"
        )
        self.record_cpu("broker_failure", probe, seconds)
        self.record_machine("broker_failure", machine)
        return seconds, len(led)

    def controlled_shutdown(self, broker_id: int) -> tuple[float, int]:
        led = sum(1 for v in self.leaders(self.partitions).values() if v == broker_id)
        stat = self.client.exists(paths.broker_id_path(broker_id))
        assert stat is not None
        url = self.active().url
        assert url is not None
        probe = CpuProbe(self.active(), "CONTROLLED_SHUTDOWN")
        window = self.machine_window()
        started = time.perf_counter()
        answer = http_json(url, "POST", "/v1/controlled_shutdown", {"broker_id": broker_id, "broker_epoch": stat.czxid})
        machine = window.stop()
        seconds = time.perf_counter() - started
        remaining = answer.get("partitions_remaining", answer.get("remaining_partitions", []))
        log(
            f"  controlled_shutdown: {seconds:.3f} s for {led} leaders of broker {broker_id} "
            f"(error {answer.get('error_code')}, {len(remaining)} remaining)"
        )
        self.record_cpu("controlled_shutdown", probe, seconds)
        self.record_machine("controlled_shutdown", machine)
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
        window = self.machine_window()
        started = time.perf_counter()
        for i in range(0, len(self.partitions), step):
            deleted = threading.Event()
            self.store.create_preferred_replica_election_request(self.partitions[i : i + step])
            if self.client.exists(paths.PREFERRED_REPLICA_ELECTION_PATH, watch=watch) is None:
                deleted.set()
            if not deleted.wait(600):
                raise TimeoutError("preferred election")
        machine = window.stop()
        seconds = time.perf_counter() - started
        log(
            f"  preferred_election: {seconds:.3f} s ({moved} partitions off their preferred leader; "
            f"{pieces} request znode(s))"
        )
        self.record_cpu("preferred_election", probe, seconds)
        self.record_machine("preferred_election", machine)
        return seconds, moved

    def restart_brokers(self, ids: Sequence[int]) -> None:
        for b in ids:
            self.start_agent(b)
        poll_until(lambda: all(self.registered(b) for b in ids), 120, "brokers to register")
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
                http_json(url, "POST", "/v1/alter_isr", msgspec.to_builtins(request))
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
        window = MachineCpuWindow({"zookeeper": [] if self.zookeeper_pid is None else [self.zookeeper_pid]})
        started = time.perf_counter()
        result = store.update_leader_and_isr(
            {tp: current[tp].new_epoch() for tp in subset}, epoch.epoch, epoch.epoch_zk_version
        )
        write_s = time.perf_counter() - started
        # What ZooKeeper itself spends on the writes, with nothing else running: the part of every
        # scenario's machine CPU that no controller change can remove.
        used = window.stop()
        self.machine_cpu.setdefault("zk_floor_write", []).append(used.as_dict())
        log(f"  zk_floor_write: {write_s:.3f} s; {used.summary()}")
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
