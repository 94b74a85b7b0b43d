"""Redis fault scenarios against the product's Redis path (reference §6, F20).

F18 (``scenarios``) loses Redis under a mirror that reads ZooKeeper. F20 needs more: the
controller candidates must write Redis the way the Celery controller host does, or pausing Redis
would test nothing. So the scenario first restarts every candidate with ``--redis-url`` (the host's
own buffered stream sink and status publisher, ``workers.controller_redis``) and switches the
mirror rig to managed mode (it follows that stream), then pauses Redis with SIGSTOP while the
controller has work to do.

``REDIS_SCENARIOS`` is registered with the soak table by ``scripts.reliability.scenarios_soak``'s
owner; ``tests/reliability/test_redis_faults.py`` runs F20 once per PR with a shorter pause.
"""

from __future__ import annotations

import contextlib
import json
import random
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from scripts.reliability.cluster import Candidate, Cluster, wait_until
from scripts.reliability.scenarios import Outcome, Scenario, Settings, by_name

#: The status field F20 reads: p99 of the event-queue time over the last 10 s (``event_manager``).
P99_FIELD = "event_queue_time_ms_p99_10s"


@dataclass(frozen=True)
class RedisSettings(Settings):
    """``Settings`` plus the length of the Redis pause (the plan's 30 s; a test may shorten it)."""

    redis_pause_s: float = 30.0


def _pause_s(s: Settings) -> float:
    return float(getattr(s, "redis_pause_s", 30.0))


def _restart(candidate: Candidate) -> None:
    """SIGTERM (a clean resignation, as F2), wait for the exit, start again with the cluster's flags."""
    candidate.signal(signal.SIGTERM)
    if candidate.proc is not None:
        candidate.proc.popen.wait(timeout=20)
    candidate.start()


def switch_to_stream(cluster: Cluster, timeout: float = 30.0) -> None:
    """Restart every candidate writing the rig's Redis stream, standbys first; then a managed mirror.

    The active one goes last, so the failover it causes lands on a candidate that already writes
    the stream: its ``failover`` and ``state_snapshot`` records are where the managed mirror starts.
    """
    rig = cluster.mirror
    assert rig is not None
    cluster.redis_url = rig.redis_url
    active = cluster.active()
    for cid, candidate in cluster.candidates.items():
        if cid != active:
            _restart(candidate)
    if active is not None:
        _, epoch = cluster.controller_znode()
        _restart(cluster.candidates[active])
        if wait_until(lambda: cluster.active() is not None and cluster.controller_znode()[1] > epoch, timeout) is None:
            raise RuntimeError("no controller became active after the restart with the Redis stream")
    rig.follow_stream()
    if wait_until(lambda: rig.view() == cluster.partition_states(), timeout, 0.1) is None:
        raise RuntimeError("the managed mirror never matched ZooKeeper before the fault")


def _log_payloads(cluster: Cluster, since_ms: float) -> list[bytes]:
    """The candidates' JSON-lines state-change records since ``since_ms`` (the stream's durable copy)."""
    out: list[bytes] = []
    for candidate in cluster.candidates.values():
        for path in sorted(Path(candidate.state_change_dir).glob("*.jsonl")):
            for line in path.read_bytes().splitlines():
                with contextlib.suppress(ValueError):
                    if float(json.loads(line).get("ts", 0)) >= since_ms:
                        out.append(line)
    return out


def _missing_from_stream(cluster: Cluster, since_ms: float) -> list[bytes]:
    rig = cluster.mirror
    assert rig is not None
    in_stream = set(rig.stream_payloads())
    return [line for line in _log_payloads(cluster, since_ms) if line not in in_stream]


def f20_paused_redis(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """SIGSTOP Redis; meanwhile a broker dies and a topic is created; SIGCONT; compare everything."""
    rig = cluster.mirror
    assert rig is not None
    switch_to_stream(cluster)
    pause_s = _pause_s(s)
    active = cluster.active()
    assert active is not None
    controller = cluster.candidates[active]
    before = controller.status() or {}
    victim = max(cluster.brokers)
    topic = f"paused-{run}"
    notes = [f"stream on; controller {active}; Redis paused {pause_s:.0f} s; broker {victim} killed, topic {topic}"]
    since_ms = time.time() * 1000.0
    paused_at = time.monotonic()
    rig.pause_redis()
    worst_p99 = 0.0
    try:
        killed_at = time.monotonic()
        cluster.brokers[victim].kill()
        cluster.create_topic(topic, partitions=2, replication=2, brokers=[b for b in cluster.brokers if b != victim])

        def moved() -> bool:
            states = cluster.partition_states()
            led = all(p.leader not in (-1, victim) for k, p in states.items() if not k.startswith("solo-"))
            return led and all(f"{topic}-{p}" in states for p in range(2))

        took = wait_until(moved, min(pause_s - 0.5, s.session_timeout_s + 10), 0.1)
        moved_s = None if took is None else time.monotonic() - killed_at
        while time.monotonic() - paused_at < pause_s:
            status = controller.status(timeout=1.0)
            if status is None:
                notes.append("the controller's API did not answer during the pause")
                worst_p99 = float("inf")
            else:
                worst_p99 = max(worst_p99, float(status.get(P99_FIELD, 0.0)))
            time.sleep(0.5)
        during = controller.status() or {}
    finally:
        rig.resume_redis()
    resumed = time.monotonic()
    events = int(during.get("events_processed", 0)) - int(before.get("events_processed", 0))
    converged = wait_until(lambda: rig.view() == cluster.partition_states(), 20, 0.1)
    equal_s = None if converged is None else time.monotonic() - resumed
    # The sink retries after a back-off; give it a few seconds to drain what it buffered.
    wait_until(lambda: not _missing_from_stream(cluster, since_ms), 10, 0.5)
    missing = _missing_from_stream(cluster, since_ms)
    payloads = rig.stream_payloads()
    duplicates = len(payloads) - len(set(payloads))  # resent batches (the mirror's RecordGuard drops them)
    follower = rig.mirror.follower if rig.mirror is not None else None
    dropped = 0 if follower is None else follower.guard.dropped
    notes.append(
        f"leaders moved {moved_s and round(moved_s, 2)} s after the kill; {events} events during the pause, "
        f"worst rolling p99 queue time {worst_p99:.1f} ms; mirror equal {equal_s and round(equal_s, 2)} s "
        f"after SIGCONT; stream: {len(missing)} records missing, {duplicates} duplicated "
        f"({dropped} copies dropped by the live follower)"
    )
    met = (
        moved_s is not None
        and moved_s <= s.slack * (s.session_timeout_s + 3)
        and events > 0  # the loop had work during the pause, or the p99 proves nothing
        and worst_p99 < 1000.0
        and equal_s is not None
        and equal_s <= s.slack * 5.0
        and not missing
    )
    return Outcome(moved_s, met, notes)


REDIS_SCENARIOS: dict[str, Scenario] = by_name(
    Scenario(
        "F20",
        "paused Redis (SIGSTOP)",
        "leaders moved <= Ts + 3 s and p99 event-queue time < 1 s during the pause; mirror = ZK <= 5 s after",
        f20_paused_redis,
        mirror=True,
        plan_runs=10,
    ),
)
