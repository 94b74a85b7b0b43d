"""The Redis mirror under test (F18, S6, L4): a private Redis, the real ``Mirror``, and a reader.

The mirror is the one Celery's mirror host and ``manage.py run_mirror`` run (``workers.mirror``),
in observed mode (it reads ZooKeeper; the harness's controllers write no Redis stream by default),
connected to a Redis server of the run's own on a free loopback port, so killing, flushing or
pausing it touches nothing else. ``follow_stream`` switches it to managed mode once the candidates
write the state-change stream (F20: ``--redis-url``), so the mirror follows the controller's
records as it does in production. A reader thread polls the partition rows every 100 ms and
records what a page would have shown as ``op="observe"`` history records (S6: never a state
ZooKeeper did not have, never going back per reader).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import redis
from kazoo.client import KazooClient

from dashboard.clusters import layout
from dashboard.lib.redis_keys import state_change_stream_key
from scripts.devservices import RedisServer, free_port
from scripts.reliability.checker import PartitionSnapshot
from workers.mirror.mirror import Mirror, MirrorConfig
from workers.mirror.publish import RecordingPublisher
from workers.mirror.state import MANAGED, OBSERVED

CLUSTER = "rel"


class MirrorRig:
    def __init__(self, work_dir: Path, zk_connect: str) -> None:
        self.server = RedisServer(name="redis-rel", host="127.0.0.1", port=free_port(), base_dir=work_dir)
        self.zk_connect = zk_connect
        self.observations: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._reader: threading.Thread | None = None
        self.mirror: Mirror | None = None
        self._zk: KazooClient | None = None
        self._redis: redis.Redis | None = None

    def start(self) -> MirrorRig:
        self.server.start()
        self._zk = KazooClient(hosts=self.zk_connect, timeout=4.0)
        self._zk.start(timeout=15)
        self._redis = redis.Redis.from_url(self.server.url, socket_timeout=1.0, socket_connect_timeout=1.0)
        self._start_mirror(OBSERVED)
        self._reader = threading.Thread(target=self._read_loop, name="mirror-reader", daemon=True)
        self._reader.start()
        return self

    def _start_mirror(self, mode: str) -> None:
        assert self._zk is not None and self._redis is not None
        config = MirrorConfig(CLUSTER, mode=mode, window_s=0.1, heartbeat_s=0.3, sweep_s=2.0)
        self.mirror = Mirror(config, self._zk, self._redis, RecordingPublisher())
        self.mirror.start()
        if not self.mirror.ready.wait(20):
            raise RuntimeError("the mirror never finished its first sync")

    def follow_stream(self) -> None:
        """Replace the observed mirror by a managed one that follows the controllers' stream."""
        if self.mirror is not None:
            self.mirror.stop()
        self._start_mirror(MANAGED)

    @property
    def redis_url(self) -> str:
        return self.server.url

    def pause_redis(self) -> None:
        """SIGSTOP the server: connections stay open, nothing is answered (F20)."""
        self._signal(signal.SIGSTOP)

    def resume_redis(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: int) -> None:
        pid = self.server.recorded_pid()
        if pid is None:
            raise RuntimeError("the rig's Redis is not running")
        os.kill(pid, sig)

    def stream_payloads(self) -> list[bytes]:
        """Every record in the state-change stream, as the raw JSON the sink wrote."""
        conn = redis.Redis.from_url(self.server.url, socket_timeout=5.0, socket_connect_timeout=2.0)
        try:
            entries: Any = conn.xrange(state_change_stream_key(CLUSTER), min="-", max="+")
        finally:
            conn.close()
        return [bytes(fields[b"r"]) for _id, fields in entries if b"r" in fields]

    def stream_records(self) -> list[dict[str, Any]]:
        return [json.loads(raw) for raw in self.stream_payloads()]

    def view(self) -> dict[str, PartitionSnapshot] | None:
        """The mirror's partitions as Redis holds them (None when Redis does not answer)."""
        conn = redis.Redis.from_url(self.server.url, socket_timeout=1.0, socket_connect_timeout=1.0)
        try:
            rows = conn.hgetall(layout.partitions_key(CLUSTER))
        except redis.RedisError:
            return None
        finally:
            conn.close()
        out: dict[str, PartitionSnapshot] = {}
        for name, text in rows.items():
            row = layout.decode_row(name.decode() if isinstance(name, bytes) else str(name), text)
            if row.zk_version >= 0:
                out[f"{row.topic}-{row.partition}"] = PartitionSnapshot(
                    row.leader, row.leader_epoch, tuple(row.isr), row.zk_version
                )
        return out

    def _read_loop(self) -> None:
        last: dict[str, tuple[int, int]] = {}
        conn = redis.Redis.from_url(self.server.url, socket_timeout=1.0, socket_connect_timeout=1.0)
        while not self._stop.wait(0.1):
            try:
                rows = conn.hgetall(layout.partitions_key(CLUSTER))
            except redis.RedisError:
                continue
            now = time.monotonic()
            for name, text in rows.items():
                row = layout.decode_row(name.decode() if isinstance(name, bytes) else str(name), text)
                key = f"{row.topic}-{row.partition}"
                if row.zk_version < 0 or last.get(key) == (row.controller_epoch, row.zk_version):
                    continue
                last[key] = (row.controller_epoch, row.zk_version)
                with self._lock:
                    self.observations.append(
                        {
                            "op": "observe",
                            "reader": "page-1",
                            "t_mono": now,
                            "partition": key,
                            "controller_epoch": row.controller_epoch,
                            "zk_version": row.zk_version,
                            "leader": row.leader,
                            "isr": list(row.isr),
                        }
                    )
        conn.close()

    def history(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.observations)

    def kill_redis(self) -> None:
        self.server.kill()

    def restart_redis(self) -> None:
        self.server.start()

    def flushall(self) -> None:
        conn = redis.Redis.from_url(self.server.url, socket_timeout=2.0)
        try:
            conn.flushall()
        finally:
            conn.close()

    def kill_clients(self) -> int:
        """``CLIENT KILL TYPE normal`` on every connection but this one (the mirror's publisher, stream
        follower and writers; the page reader): F19's lost push connections, on the mirror's side."""
        conn = redis.Redis.from_url(self.server.url, socket_timeout=2.0)
        try:
            return int(conn.client_kill_filter(_type="normal", skipme=True))
        finally:
            conn.close()

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.resume_redis()  # a stopped server would ignore the SIGTERM below
        self._stop.set()
        if self._reader is not None:
            self._reader.join(5)
        if self.mirror is not None:
            with contextlib.suppress(Exception):
                self.mirror.stop()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
        if self._redis is not None:
            with contextlib.suppress(Exception):
                self._redis.close()
        self.server.stop(timeout=5)
