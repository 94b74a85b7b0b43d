"""``manage.py demo_cluster``: a local cluster of broker agents to drive by hand or from tests.

Usage::

    manage.py demo_cluster --brokers 5 [--racks 2] [--topics demo-a:12:3,demo-b:6:3] [--produce-rate 10]
    manage.py demo_cluster status
    manage.py demo_cluster kill 3      # SIGKILL: the registration stays until the session times out
    manage.py demo_cluster stop 3      # SIGTERM: controlled shutdown, deregistration, exit
    manage.py demo_cluster start 3     # restart broker 3 with its previous settings

Without a subcommand it runs in the foreground: it starts the brokers as child processes on free
ports (each in its own session, so Ctrl-C reaches only this command), waits until each has
registered, creates the demo topics through the ZooKeeper admin path (``controller_core.admin``:
Kafka's rack-aware assignment, ``/config/topics/<t>`` then ``/brokers/topics/<t>``; existing topics
are left alone), prints what runs where, and on Ctrl-C or SIGTERM stops every broker with SIGTERM
(controlled shutdown), killing those still running after ``--stop-timeout`` seconds.

Everything a later ``kill``/``stop``/``start``/``status`` needs is under ``--var-dir`` (default
``var/demo``): ``cluster.json`` (ZooKeeper connect string, brokers), per broker ``broker-N.json``
(its command line), ``broker-N.pid``, ``broker-N.log``, ``broker-N.ready`` and ``data/broker-N``
(its log checkpoint, so a restarted broker resumes where it was).
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from controller_core.admin import RackAwareMode, TopicSpec, create_topic
from controller_core.broker.agent import ensure_chroot
from controller_core.errors import ZkOperationError
from controller_core.zk import paths
from controller_core.zk.client import new_client
from controller_core.zk.store import ZkStore
from dashboard.actions.zk import zk_security
from workers.local_processes import free_port, pid_alive, recorded_pid, signal_recorded, write_pid_file

DEFAULT_TOPICS = "demo-a:12:3,demo-b:6:3"
READY_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class BrokerSpec:
    """How to run one demo broker (``broker-N.json``)."""

    id: int
    host: str
    port: int
    rack: str | None
    args: list[str]

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


class DemoCluster:
    """The demo's state directory and the broker processes it records."""

    def __init__(self, var_dir: Path) -> None:
        self.var_dir = var_dir

    # -- files -------------------------------------------------------------------------------------

    @property
    def cluster_file(self) -> Path:
        return self.var_dir / "cluster.json"

    def spec_file(self, broker_id: int) -> Path:
        return self.var_dir / f"broker-{broker_id}.json"

    def pid_file(self, broker_id: int) -> Path:
        return self.var_dir / f"broker-{broker_id}.pid"

    def log_file(self, broker_id: int) -> Path:
        return self.var_dir / f"broker-{broker_id}.log"

    def ready_file(self, broker_id: int) -> Path:
        return self.var_dir / f"broker-{broker_id}.ready"

    def data_dir(self, broker_id: int) -> Path:
        return self.var_dir / "data" / f"broker-{broker_id}"

    def cluster(self) -> dict[str, Any]:
        try:
            value = json.loads(self.cluster_file.read_text())
        except FileNotFoundError:
            raise CommandError(
                f"no demo cluster recorded in {self.var_dir}; start one with `manage.py demo_cluster`"
            ) from None
        if not isinstance(value, dict):
            raise CommandError(f"{self.cluster_file} is not a demo cluster record")
        return value

    def broker_ids(self) -> list[int]:
        return sorted(int(i) for i in self.cluster().get("brokers", []))

    def spec(self, broker_id: int) -> BrokerSpec:
        try:
            d = json.loads(self.spec_file(broker_id).read_text())
        except FileNotFoundError:
            known = ", ".join(map(str, self.broker_ids())) or "none"
            raise CommandError(f"broker {broker_id} is not part of the demo cluster (brokers: {known})") from None
        return BrokerSpec(int(d["id"]), str(d["host"]), int(d["port"]), d.get("rack"), list(d["args"]))

    def save_spec(self, spec: BrokerSpec) -> None:
        body = {"id": spec.id, "host": spec.host, "port": spec.port, "rack": spec.rack, "args": spec.args}
        self.spec_file(spec.id).write_text(json.dumps(body, indent=2))

    def pid(self, broker_id: int) -> int | None:
        """The broker's pid while that very process runs (pid and start time match: workers/local_processes.py)."""
        return recorded_pid(self.pid_file(broker_id))

    # -- processes ---------------------------------------------------------------------------------

    def spawn(self, spec: BrokerSpec) -> subprocess.Popen[bytes]:
        """Start broker ``spec.id`` in its own session, logging to its log file."""
        self.ready_file(spec.id).unlink(missing_ok=True)
        with open(self.log_file(spec.id), "ab") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "controller_core.broker.main", *spec.args],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=settings.BASE_DIR,
                start_new_session=True,
            )
        write_pid_file(self.pid_file(spec.id), process.pid)
        return process

    def wait_ready(self, broker_id: int, pid: int, timeout: float = READY_TIMEOUT_S) -> dict[str, Any]:
        """Wait until the broker has registered (its ready file appears); raise if it exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(FileNotFoundError, ValueError):
                info: dict[str, Any] = json.loads(self.ready_file(broker_id).read_text())
                return info
            if not pid_alive(pid):
                raise CommandError(f"broker {broker_id} exited during start-up; log tail:\n{self.log_tail(broker_id)}")
            time.sleep(0.1)
        raise CommandError(
            f"broker {broker_id} did not register within {timeout:.0f}s; log tail:\n{self.log_tail(broker_id)}"
        )

    def signal(self, broker_id: int, sig: signal.Signals) -> int:
        pid = signal_recorded(self.pid_file(broker_id), sig)
        if pid is None:
            raise CommandError(f"broker {broker_id} is not running")
        return pid

    def wait_exit(self, pid: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return True
            time.sleep(0.1)
        return False

    def log_tail(self, broker_id: int, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_file(broker_id).read_text(errors="replace").splitlines()[-lines:])
        except FileNotFoundError:
            return "(no log)"


def _broker_state(url: str) -> dict[str, Any] | None:
    try:
        with urllib.request.urlopen(f"{url}/v1/state?partitions=0", timeout=1.0) as response:
            value = json.loads(response.read())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


class Command(BaseCommand):
    help = "Run a local demo cluster of broker agents (and kill/stop/start/status them)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--var-dir", type=Path, default=Path(settings.VAR_DIR) / "demo", help="state directory")
        parser.add_argument("--zookeeper", default=settings.ZOOKEEPER_CONNECT, help="HOST:PORT[/chroot]")
        parser.add_argument("--brokers", type=int, default=5, help="number of brokers (ids 1..N)")
        parser.add_argument("--racks", type=int, default=0, help="spread brokers over this many racks (0: no racks)")
        parser.add_argument("--topics", default=DEFAULT_TOPICS, help="NAME:PARTITIONS:RF[,...] ('' for none)")
        parser.add_argument("--produce-rate", type=float, default=10.0, help="messages/s per led partition")
        parser.add_argument("--acks", default="all", help="0, 1 or all")
        parser.add_argument("--min-insync-replicas", type=int, default=2)
        parser.add_argument("--replica-lag-time-max-ms", type=int, default=10_000)
        parser.add_argument("--zookeeper-session-timeout-ms", type=int, default=6_000)
        parser.add_argument("--controlled-shutdown-retry-backoff-ms", type=int, default=2_000)
        parser.add_argument("--lightweight", action="store_true", help="brokers without replication or load")
        parser.add_argument(
            "--stop-timeout", type=float, default=60.0, help="seconds to wait after SIGTERM before SIGKILL"
        )
        sub = parser.add_subparsers(dest="action", metavar="{status,kill,stop,start}")
        sub.add_parser("status", help="what runs where")
        for name, text in (
            ("kill", "SIGKILL a broker"),
            ("stop", "SIGTERM a broker (controlled shutdown) and wait for it"),
            ("start", "restart a broker with its previous settings"),
        ):
            sub.add_parser(name, help=text).add_argument("broker_id", type=int)

    def handle(self, *args: Any, **options: Any) -> None:
        demo = DemoCluster(options["var_dir"])
        action = options.get("action")
        if action == "status":
            self._status(demo)
        elif action == "kill":
            pid = demo.signal(options["broker_id"], signal.SIGKILL)
            demo.wait_exit(pid, 5.0)
            self.stdout.write(
                f"broker {options['broker_id']} (pid {pid}) killed; its registration expires with its session"
            )
        elif action == "stop":
            self._stop_one(demo, options["broker_id"], options["stop_timeout"])
        elif action == "start":
            self._start_one(demo, options["broker_id"])
        else:
            self._up(demo, options)

    # -- subcommands ---------------------------------------------------------------------------------

    def _stop_one(self, demo: DemoCluster, broker_id: int, timeout: float) -> None:
        pid = demo.signal(broker_id, signal.SIGTERM)
        self.stdout.write(f"broker {broker_id} (pid {pid}): SIGTERM sent, waiting for its controlled shutdown")
        if not demo.wait_exit(pid, timeout):
            raise CommandError(
                f"broker {broker_id} still runs after {timeout:.0f}s; `demo_cluster kill {broker_id}` ends it"
            )
        demo.pid_file(broker_id).unlink(missing_ok=True)
        self.stdout.write(f"broker {broker_id} stopped")

    def _start_one(self, demo: DemoCluster, broker_id: int) -> None:
        spec = demo.spec(broker_id)
        running = demo.pid(broker_id)
        if running is not None:
            raise CommandError(f"broker {broker_id} already runs (pid {running})")
        process = demo.spawn(spec)
        self.stdout.write(
            f"broker {broker_id} starting (pid {process.pid}); "
            "if it was killed it first waits for its previous session to expire"
        )
        info = demo.wait_ready(broker_id, process.pid)
        self.stdout.write(f"broker {broker_id} registered at {spec.url}, broker epoch {info.get('epoch')}")

    def _status(self, demo: DemoCluster) -> None:
        cluster = demo.cluster()
        registered = self._registered(cluster["zookeeper"])
        self.stdout.write(f"demo cluster on ZooKeeper {cluster['zookeeper']} (state in {demo.var_dir})")
        self.stdout.write(
            f"{'broker':<7}{'rack':<8}{'pid':<9}{'registered':<12}{'epoch':<12}{'leaders':<9}{'partitions':<12}endpoint"
        )
        for broker_id in demo.broker_ids():
            spec = demo.spec(broker_id)
            pid = demo.pid(broker_id)
            state = _broker_state(spec.url) if pid is not None else None
            counts = state.get("counts", {}) if state else {}
            self.stdout.write(
                f"{broker_id:<7}{spec.rack or '-':<8}{pid or 'stopped':<9}"
                f"{'yes' if broker_id in registered else 'no':<12}{(state or {}).get('epoch', '-'):<12}"
                f"{counts.get('leaders', '-'):<9}{counts.get('partitions', '-'):<12}{spec.url}"
            )

    def _registered(self, zookeeper: str) -> set[int]:
        client = new_client(zookeeper, timeout=5.0, security=zk_security())
        try:
            client.start(timeout=5.0)
        except Exception as exc:
            raise CommandError(f"cannot reach ZooKeeper at {zookeeper}: {exc}") from None
        try:
            return set(ZkStore(client).get_broker_ids())
        finally:
            client.stop()
            client.close()

    # -- the foreground cluster ------------------------------------------------------------------

    def _up(self, demo: DemoCluster, options: dict[str, Any]) -> None:
        brokers, racks = options["brokers"], options["racks"]
        if brokers < 1:
            raise CommandError("--brokers must be at least 1")
        if racks < 0 or racks > brokers:
            raise CommandError(f"--racks must be within 0..{brokers}")
        try:
            topics = [TopicSpec.parse(t) for t in options["topics"].split(",") if t.strip()]
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        for topic in topics:
            if topic.replication_factor > brokers:
                raise CommandError(
                    f"topic {topic.name}: replication factor {topic.replication_factor} > {brokers} brokers"
                )
        demo.var_dir.mkdir(parents=True, exist_ok=True)
        if demo.cluster_file.exists():
            running = {b: demo.pid(b) for b in demo.broker_ids()}
            alive = {b: p for b, p in running.items() if p is not None}
            if alive:
                raise CommandError(
                    "a demo cluster already runs here (brokers "
                    + ", ".join(f"{b} pid {p}" for b, p in sorted(alive.items()))
                    + "); `demo_cluster status`, or stop them first"
                )
        zookeeper = options["zookeeper"]
        ensure_chroot(zookeeper)
        specs = [self._spec(demo, i, racks, options) for i in range(1, brokers + 1)]
        for spec in specs:
            demo.save_spec(spec)
        demo.cluster_file.write_text(
            json.dumps({"zookeeper": zookeeper, "brokers": [s.id for s in specs], "started_at": time.time()}, indent=2)
        )
        stopping = threading.Event()

        def on_signal(signum: int, _frame: object) -> None:
            stopping.set()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
        children: dict[int, subprocess.Popen[bytes]] = {}
        try:
            for spec in specs:
                children[spec.id] = demo.spawn(spec)
            for spec in specs:
                demo.wait_ready(spec.id, children[spec.id].pid)
            created = self._create_topics(zookeeper, topics, racks)
            self._print_layout(demo, zookeeper, specs, children, created)
            self._watch(demo, specs, stopping)
        finally:
            self._stop_all(demo, specs, options["stop_timeout"])
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def _spec(self, demo: DemoCluster, broker_id: int, racks: int, options: dict[str, Any]) -> BrokerSpec:
        host = "127.0.0.1"
        port = free_port(host)
        rack = f"rack-{chr(ord('a') + (broker_id - 1) % racks)}" if racks else None
        session_ms = options["zookeeper_session_timeout_ms"]
        args = [
            "--id", str(broker_id),
            "--zookeeper", options["zookeeper"],
            "--host", host,
            "--port", str(port),
            "--zookeeper-session-timeout-ms", str(session_ms),
            "--produce-rate", str(options["produce_rate"]),
            "--acks", options["acks"],
            "--min-insync-replicas", str(options["min_insync_replicas"]),
            "--replica-lag-time-max-ms", str(options["replica_lag_time_max_ms"]),
            "--controlled-shutdown-retry-backoff-ms", str(options["controlled_shutdown_retry_backoff_ms"]),
            "--data-dir", str(demo.data_dir(broker_id)),
            "--ready-file", str(demo.ready_file(broker_id)),
            # A restarted broker outwaits the session its killed predecessor left behind.
            "--registration-wait-s", str(session_ms / 1000.0 * 2 + 5),
        ]  # fmt: skip
        if rack is not None:
            args += ["--rack", rack]
        if options["lightweight"]:
            args.append("--lightweight")
        return BrokerSpec(broker_id, host, port, rack, args)

    def _create_topics(self, zookeeper: str, topics: list[TopicSpec], racks: int) -> dict[str, str]:
        outcome: dict[str, str] = {}
        if not topics:
            return outcome
        client = new_client(zookeeper, timeout=10.0, security=zk_security())
        client.start(timeout=15.0)
        try:
            store = ZkStore(client)
            existing = store.get_all_topics()
            for topic in topics:
                if topic.name in existing:
                    outcome[topic.name] = "exists"
                    continue
                try:
                    create_topic(store, topic, rack_aware_mode=RackAwareMode.ENFORCED if racks else RackAwareMode.SAFE)
                except ZkOperationError as exc:
                    outcome[topic.name] = f"not created: {exc}"
                else:
                    outcome[topic.name] = f"created at {paths.topic_path(topic.name)}"
        finally:
            client.stop()
            client.close()
        return outcome

    def _print_layout(
        self,
        demo: DemoCluster,
        zookeeper: str,
        specs: list[BrokerSpec],
        children: dict[int, subprocess.Popen[bytes]],
        created: dict[str, str],
    ) -> None:
        out = self.stdout
        out.write(f"demo cluster: {len(specs)} brokers on ZooKeeper {zookeeper} (state in {demo.var_dir})")
        out.write(f"  {'broker':<7}{'rack':<8}{'pid':<9}{'endpoint':<27}log")
        for spec in specs:
            pid = children[spec.id].pid
            out.write(f"  {spec.id:<7}{spec.rack or '-':<8}{pid:<9}{spec.url:<27}{demo.log_file(spec.id)}")
        for name, result in created.items():
            out.write(f"  topic {name}: {result}")
        out.write(f"state:  curl {specs[0].url}/v1/state")
        out.write("faults: manage.py demo_cluster kill N | stop N | start N | status")
        out.write("Ctrl-C stops every broker (controlled shutdown).")

    def _watch(self, demo: DemoCluster, specs: list[BrokerSpec], stopping: threading.Event) -> None:
        """Report brokers that stop or come back until asked to stop."""
        alive = {spec.id: True for spec in specs}
        while not stopping.wait(1.0):
            for spec in specs:
                now = demo.pid(spec.id) is not None
                if now != alive[spec.id]:
                    alive[spec.id] = now
                    self.stdout.write(f"broker {spec.id} {'is running again' if now else 'is not running'}")

    def _stop_all(self, demo: DemoCluster, specs: list[BrokerSpec], timeout: float) -> None:
        pids = {spec.id: demo.pid(spec.id) for spec in specs}
        running = {b: p for b, p in pids.items() if p is not None}
        if running:
            self.stdout.write(f"stopping brokers {sorted(running)} (controlled shutdown)")
        for broker_id in running:
            signal_recorded(demo.pid_file(broker_id), signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for broker_id, pid in running.items():
            if not demo.wait_exit(pid, max(0.0, deadline - time.monotonic())):
                self.stdout.write(f"broker {broker_id} did not stop in time: killing it")
                signal_recorded(demo.pid_file(broker_id), signal.SIGKILL)
                demo.wait_exit(pid, 5.0)
        for spec in specs:
            demo.pid_file(spec.id).unlink(missing_ok=True)
