"""A cluster of real processes for one scenario run: controller candidates behind fault proxies, brokers.

Everything a scenario needs to inject faults and observe the result:

* controller candidates (``scripts.reliability.controller_proc``), each reaching ZooKeeper only
  through its own ``ProxyGroup``, with the history recorder and the pause points enabled;
* broker agents (``controller_core.broker.main``, lightweight) that connect to ZooKeeper directly and
  log every control request with its decision;
* process faults (any signal), real server-side session expiry of a candidate's session (a second
  client attaches to the session id and password the candidate publishes, then closes it), named
  pause points (latch files), and the final snapshot the checker's liveness part reads.

Each run gets a fresh ZooKeeper chroot and working directory; ``close`` kills every process it
started (by pid) and removes the chroot.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import ZnodeStat

from controller_core.model import LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.history import HISTORY_DIR_ENV
from controller_core.zk.store import ZkStore
from scripts.devservices import REPO_ROOT
from scripts.reliability.checker import ADMIN_PATHS, FinalState, PartitionSnapshot, Record, load_histories
from scripts.reliability.faultproxy import ProxyGroup

PYTHON = sys.executable


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> float | None:
    """Seconds until ``predicate()`` held, or None when it did not within ``timeout``."""
    started = time.monotonic()
    while True:
        with contextlib.suppress(Exception):
            if predicate():
                return time.monotonic() - started
        if time.monotonic() - started > timeout:
            return None
        time.sleep(interval)


class Proc:
    """A child process of the harness with its log file."""

    def __init__(self, name: str, argv: Sequence[str], env: Mapping[str, str], log: Path) -> None:
        self.name = name
        self.log_path = log
        with open(log, "ab") as out:
            self.popen = subprocess.Popen(
                list(argv), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=REPO_ROOT, env=dict(env)
            )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen.poll() is None

    def signal(self, sig: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.popen.pid, sig)

    def kill(self) -> None:
        if self.alive():
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.popen.wait(timeout=10)

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""


class Candidate:
    """A controller candidate: its proxies, process, pause directory and API."""

    def __init__(self, cluster: Cluster, controller_id: int) -> None:
        self.cluster = cluster
        self.id = controller_id
        self.proxies = ProxyGroup(cluster.zk_addresses)
        self.pause_dir = cluster.work_dir / f"pause-c{controller_id}"
        self.pause_dir.mkdir(parents=True, exist_ok=True)
        self.proc: Proc | None = None
        self.api: str | None = None
        self.incarnation = 0

    def start(self, timeout: float = 30.0, wait: bool = True) -> Candidate:
        """Launch the candidate process; with ``wait``, return once it is up (``wait_ready``)."""
        self.incarnation += 1
        ready = self._ready_file
        env = self.cluster.child_env(role="controller", node=self.id)
        env["CONTROLLER_PAUSE_DIR"] = str(self.pause_dir)
        env["RELIABILITY_SESSION_FILE"] = str(self.session_file)
        argv = [
            PYTHON,
            "-m",
            "scripts.reliability.controller_proc",
            "--id",
            str(self.id),
            "--zookeeper",
            self.proxies.hosts + self.cluster.chroot,
            "--session-timeout-s",
            str(self.cluster.session_timeout_s),
            "--ready-file",
            str(ready),
        ]
        if self.cluster.auto_rebalance:
            argv += ["--auto-rebalance", "--rebalance-interval-s", "2"]
        if self.cluster.redis_url is not None:  # the Celery host's stream sink and status publisher (F20)
            argv += ["--redis-url", self.cluster.redis_url, "--cluster", self.cluster.redis_cluster]
            argv += ["--state-change-dir", str(self.state_change_dir)]
        self.proc = Proc(f"controller-{self.id}", argv, env, self.cluster.work_dir / f"controller-{self.id}.log")
        if wait:
            self.wait_ready(timeout)
        return self

    @property
    def _ready_file(self) -> Path:
        return self.cluster.work_dir / f"controller-{self.id}.{self.incarnation}.ready"

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Wait for the ready file of the current incarnation (its API address), or raise with the log."""
        assert self.proc is not None
        ready = self._ready_file
        if wait_until(lambda: ready.exists() or not self._alive(), timeout) is None or not ready.exists():
            raise RuntimeError(f"controller {self.id} did not start:\n{self.proc.log_tail()}")
        self.api = json.loads(ready.read_text())["api"]

    @property
    def session_file(self) -> Path:
        return self.cluster.work_dir / f"controller-{self.id}.session"

    def session_id(self) -> int | None:
        """The ZooKeeper session the process last published (it rewrites the file on a new session)."""
        try:
            return int(json.loads(self.session_file.read_text())[0])
        except (OSError, ValueError, IndexError):
            return None

    def stopped(self) -> bool:
        """Whether the process is stopped by a signal (state ``T`` in ``/proc``): a SIGSTOP took."""
        if self.proc is None:
            return False
        try:
            stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] in ("T", "t")

    @property
    def state_change_dir(self) -> Path:
        """Where the candidate keeps its JSON-lines state-change log when it writes the stream."""
        return self.cluster.work_dir / f"state-change-c{self.id}"

    def _alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    @property
    def alive(self) -> bool:
        return self._alive()

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            self.proc.signal(sig)

    def status(self, timeout: float = 1.0) -> dict[str, Any] | None:
        """The candidate's own ``/v1/status`` (None when it does not answer)."""
        if self.api is None or not self._alive():
            return None
        try:
            with urllib.request.urlopen(self.api.rstrip("/") + "/v1/status", timeout=timeout) as response:
                value = json.loads(response.read())
                return value if isinstance(value, dict) else None
        except (OSError, ValueError):
            return None

    def is_active(self) -> bool:
        status = self.status()
        return status is not None and str(status.get("active")) == "1"

    def pause(self, step: str, timeout: float = 20.0) -> bool:
        """Create the latch for ``step``; True once the process is blocked there."""
        (self.pause_dir / step).write_text("")
        base = step.split(".", 1)[0]
        return wait_until(lambda: any(self.pause_dir.glob(f"{base}.paused-*")), timeout) is not None

    def release(self, step: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.pause_dir / step).unlink()

    def release_all(self) -> None:
        for latch in self.pause_dir.iterdir():
            if ".paused-" not in latch.name:
                latch.unlink(missing_ok=True)

    def expire_session(self) -> None:
        """Real server-side expiry: attach to the candidate's session and close it."""
        session_id, password = json.loads(self.session_file.read_text())
        intruder = KazooClient(
            hosts=self.cluster.zk_hosts, client_id=(int(session_id), bytes.fromhex(password)), timeout=5.0
        )
        intruder.start(timeout=10)
        intruder.stop()
        intruder.close()

    def close(self) -> None:
        self.release_all()
        if self.proc is not None:
            self.proc.kill()
        self.proxies.set_mode("pass")
        self.proxies.stop()


class Broker:
    """A lightweight broker agent process."""

    def __init__(self, cluster: Cluster, broker_id: int) -> None:
        self.cluster = cluster
        self.id = broker_id
        self.proc: Proc | None = None
        self.port: int | None = None
        self.incarnation = 0

    def start(self, timeout: float = 30.0, wait: bool = True) -> Broker:
        self.incarnation += 1
        ready = self.cluster.work_dir / f"broker-{self.id}.{self.incarnation}.ready"
        argv = [
            PYTHON,
            "-m",
            "controller_core.broker.main",
            "--id",
            str(self.id),
            "--zookeeper",
            self.cluster.zk_hosts + self.cluster.chroot,
            "--zookeeper-session-timeout-ms",
            str(int(self.cluster.session_timeout_s * 1000)),
            "--registration-wait-s",
            str(self.cluster.session_timeout_s * 3),
            "--controlled-shutdown-retry-backoff-ms",
            "200",
            "--request-timeout-ms",
            "5000",
            "--ready-file",
            str(ready),
            "--log-level",
            "WARNING",
        ]
        if self.cluster.lightweight_brokers:
            argv.append("--lightweight")
        else:  # replicating (no produce load): followers fetch, catch up and rejoin the ISR
            argv += ["--replica-fetch-wait-ms", "50", "--replica-lag-time-max-ms", "3000"]
        env = self.cluster.child_env(role="broker", node=self.id)
        self.proc = Proc(f"broker-{self.id}", argv, env, self.cluster.work_dir / f"broker-{self.id}.log")
        if wait:
            if wait_until(lambda: ready.exists() or not self.alive, timeout) is None or not ready.exists():
                raise RuntimeError(f"broker {self.id} did not start:\n{self.proc.log_tail()}")
            self.port = int(json.loads(ready.read_text())["port"])
        return self

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.alive()

    def signal(self, sig: int) -> None:
        if self.proc is not None:
            self.proc.signal(sig)

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.kill()

    def metadata_cache(self) -> dict[str, tuple[int, int]] | None:
        if self.port is None or not self.alive:
            return None
        try:
            url = f"http://127.0.0.1:{self.port}/v1/state"
            with urllib.request.urlopen(url, timeout=2.0) as response:
                state = json.loads(response.read())
        except (OSError, ValueError):
            return None
        return {
            f"{p['topic']}-{p['partition']}": (int(p["leader"]), int(p["leader_epoch"]))
            for p in state["metadata"].get("partitions", [])
        }


class StateStat(NamedTuple):
    """A state znode as a zombie check sees it (``Cluster.state_znode_stats``)."""

    version: int
    mzxid: int
    controller_epoch: int


class Cluster:
    """Controller candidates and brokers against one ZooKeeper (single node or ensemble) in a fresh chroot.

    Example::

        cluster = Cluster(work_dir, [("127.0.0.1", 2181)], controllers=3, brokers=3)
        cluster.start()
        cluster.create_topic("rel", partitions=6, replication=3)
        ...
        final = cluster.final_state(); records = cluster.history()
        cluster.close()
    """

    def __init__(
        self,
        work_dir: Path,
        zk_addresses: Sequence[tuple[str, int]],
        *,
        controllers: int = 3,
        brokers: int = 3,
        session_timeout_s: float = 4.0,
        mirror: bool = False,
        auto_rebalance: bool = False,
        lightweight_brokers: bool = True,
    ) -> None:
        self.work_dir = work_dir
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.history_dir = work_dir / "history"
        self.history_dir.mkdir(exist_ok=True)
        self.zk_addresses = list(zk_addresses)
        self.zk_hosts = ",".join(f"{h}:{p}" for h, p in self.zk_addresses)
        self.chroot = f"/rel-{uuid.uuid4().hex[:10]}"
        self.session_timeout_s = session_timeout_s
        self.candidates = {cid: Candidate(self, cid) for cid in range(101, 101 + controllers)}
        self.brokers = {bid: Broker(self, bid) for bid in range(1, 1 + brokers)}
        self.zk = KazooClient(hosts=self.zk_hosts, timeout=10.0)
        self.topics: dict[str, dict[int, list[int]]] = {}
        # Every broker each partition was ever assigned to (S3's "ISR within the replicas" must hold
        # against the replica set of the moment; during a reassignment that is the union).
        self.ever_assigned: dict[str, set[int]] = {}
        self.observations: list[dict[str, Any]] = []
        self.with_mirror = mirror
        self.auto_rebalance = auto_rebalance
        self.lightweight_brokers = lightweight_brokers
        self.ensemble: Any = None  # the ZkEnsemble when the run has one (F8, F9, F22 use it)
        self.pending_restarts: list[int] = []  # candidates a nemesis killed, restarted by the heal
        self.mirror: Any = None  # a MirrorRig when ``mirror`` (imported lazily: it needs redis)
        # Candidates (re)started while this is set write the state-change stream to this Redis.
        self.redis_url: str | None = None
        self.redis_cluster = "rel"

    def child_env(self, *, role: str, node: int) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            {
                HISTORY_DIR_ENV: str(self.history_dir),
                "RELIABILITY_ROLE": role,
                "RELIABILITY_NODE": str(node),
                "PYTHONUNBUFFERED": "1",
            }
        )
        return env

    # -- lifecycle ------------------------------------------------------------------------------
    def start(self) -> Cluster:
        self.zk.start(timeout=15)
        self.zk.ensure_path(self.chroot)
        self.zk.chroot = self.chroot
        ZkStore(self.zk).ensure_persistent_paths()
        # Every process starts at once and the start-up waits overlap (their imports dominate a
        # scenario's set-up); the candidates race for /controller as after a whole-cluster restart,
        # and the first active one may see the brokers register after its election.
        for broker in self.brokers.values():
            broker.start(wait=False)
        for candidate in self.candidates.values():
            candidate.start(wait=False)
        for broker in self.brokers.values():
            assert broker.proc is not None
            ready = self.work_dir / f"broker-{broker.id}.{broker.incarnation}.ready"
            if wait_until(lambda r=ready, b=broker: r.exists() or not b.alive, 30) is None or not ready.exists():  # type: ignore[misc]
                raise RuntimeError(f"broker {broker.id} did not start:\n{broker.proc.log_tail()}")
            broker.port = int(json.loads(ready.read_text())["port"])
        for candidate in self.candidates.values():
            candidate.wait_ready()
        if wait_until(lambda: self.active() is not None, 30) is None:
            raise RuntimeError("no controller became active")
        if self.with_mirror:
            from scripts.reliability.mirror_rig import MirrorRig

            self.mirror = MirrorRig(self.work_dir, self.zk_hosts + self.chroot).start()
        return self

    def close(self) -> None:
        if self.mirror is not None:
            with contextlib.suppress(Exception):
                self.mirror.stop()
        for candidate in self.candidates.values():
            candidate.close()
        for broker in self.brokers.values():
            broker.kill()
        with contextlib.suppress(Exception):
            self.zk.chroot = ""
            self.zk.delete(self.chroot, recursive=True)
        with contextlib.suppress(Exception):
            self.zk.stop()
            self.zk.close()

    # -- workload -------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, replication: int, brokers: Sequence[int] | None = None) -> None:
        ids = sorted(brokers or self.brokers)
        assignment = {p: [ids[(p + r) % len(ids)] for r in range(replication)] for p in range(partitions)}
        ZkStore(self.zk).create_topic(name, assignment)
        self.topics[name] = assignment
        self.note_assignment(name, assignment)

    def note_assignment(self, topic: str, assignment: Mapping[int, Sequence[int]]) -> None:
        for p, replicas in assignment.items():
            self.ever_assigned.setdefault(f"{topic}-{p}", set()).update(replicas)

    def all_partitions_led(self, timeout: float = 20.0) -> float | None:
        """Wait until every partition has a state znode with a live leader."""
        return wait_until(
            lambda: all(p.leader != -1 for p in self.partition_states().values()) and self._complete(), timeout
        )

    def _complete(self) -> bool:
        return len(self.partition_states()) == sum(len(a) for a in self.topics.values())

    # -- observation ----------------------------------------------------------------------------
    def controller_znode(self) -> tuple[int | None, int]:
        """``(/controller's broker id or None, /controller_epoch)``."""
        try:
            holder: int | None = codecs.decode_controller(self.zk.get(paths.CONTROLLER_PATH)[0]).broker_id
        except NoNodeError:
            holder = None
        try:
            epoch = int(self.zk.get(paths.CONTROLLER_EPOCH_PATH)[0])
        except NoNodeError:
            epoch = 0
        return holder, epoch

    def active(self) -> int | None:
        """The candidate ``/controller`` names, if that candidate itself says it is active."""
        holder, _ = self.controller_znode()
        if holder is None or holder not in self.candidates:
            return None
        return holder if self.candidates[holder].is_active() else None

    def active_controllers(self) -> list[int]:
        return [cid for cid, c in self.candidates.items() if c.alive and c.is_active()]

    def _state_znodes(self) -> Iterator[tuple[str, LeaderIsrAndControllerEpoch, ZnodeStat]]:
        """Every existing partition state znode of the scenario's topics: ``(name, state, stat)``."""
        for topic, assignment in self.topics.items():
            for p in assignment:
                try:
                    data, stat = self.zk.get(paths.partition_state_path(TopicPartition(topic, p)))
                except NoNodeError:
                    continue
                yield f"{topic}-{p}", codecs.decode_partition_state(data, stat.version), stat

    def partition_states(self) -> dict[str, PartitionSnapshot]:
        out: dict[str, PartitionSnapshot] = {}
        for name, state, stat in self._state_znodes():
            lai = state.leader_and_isr
            out[name] = PartitionSnapshot(lai.leader, lai.leader_epoch, tuple(lai.isr), stat.version)
        return out

    def state_znode_stats(self) -> dict[str, StateStat]:
        """Every partition state znode: its data version, ``mzxid`` and the writer's controller epoch.

        What a zombie check compares before and after the zombie resumes: a write by anyone moves the
        version and the ``mzxid``, and the JSON carries the epoch of the controller that wrote it.
        """
        return {
            name: StateStat(stat.version, stat.mzxid, state.controller_epoch)
            for name, state, stat in self._state_znodes()
        }

    def live_brokers(self) -> frozenset[int]:
        return frozenset(int(b) for b in self.zk.get_children(paths.BROKER_IDS_PATH))

    def admin_paths_present(self) -> list[str]:
        present = [p for p in ADMIN_PATHS if self.zk.exists(p)]
        with contextlib.suppress(NoNodeError):
            present += [paths.delete_topic_path(t) for t in self.zk.get_children(paths.DELETE_TOPICS_PATH)]
        return present

    def final_state(self) -> FinalState:
        holder, _ = self.controller_znode()
        live = self.live_brokers()
        caches: dict[int, Mapping[str, tuple[int, int]]] = {}
        for bid, broker in self.brokers.items():
            if bid in live and broker.alive:
                cache = broker.metadata_cache()
                if cache is not None:
                    caches[bid] = cache
        return FinalState(
            controller_id=holder,
            active_controllers=self.active_controllers(),
            live_brokers=live,
            assignments={k: sorted(v) for k, v in self.ever_assigned.items()},
            partitions=self.partition_states(),
            admin_paths_present=self.admin_paths_present(),
            broker_caches=caches,
            mirror=None if self.mirror is None else (self.mirror.view() or {}),
        )

    def history(self) -> list[Record]:
        mirrored = [] if self.mirror is None else self.mirror.history()
        return [*load_histories(self.history_dir), *self.observations, *mirrored]

    def logs(self) -> str:
        parts = []
        for c in self.candidates.values():
            if c.proc is not None:
                parts.append(f"--- controller {c.id} ---\n{c.proc.log_tail(2000)}")
        return "\n".join(parts)
