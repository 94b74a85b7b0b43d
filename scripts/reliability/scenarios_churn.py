"""The soak's load and chaos (reference §6c): brokers flapping under auto-rebalance (F15), an event
flood of 1,000 ISR-change notifications around a controlled shutdown (F21), and the seeded randomized
nemesis (F22) with its fault injector.

Why apart: these judge the controller over a long stretch of many faults or events, not one fault's
recovery; ``scenarios_soak`` registers them, and ``run_scenario`` (``scenarios``) wraps each with the
heal phase and the checker.
"""

from __future__ import annotations

import json
import random
import signal
import time

from controller_core.model import TopicPartition
from controller_core.zk import paths
from controller_core.zk.store import ZkStore
from scripts.reliability.cluster import Cluster, wait_until
from scripts.reliability.scenarios import Outcome, Settings


def f15_broker_flapping(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """Bounce two brokers (controlled shutdown, then back) in turn every 2 s for 60 s, auto-rebalance on."""
    flappers = sorted(cluster.brokers)[:2]
    started_t = time.monotonic()
    bounces = 0
    notes: list[str] = []
    while time.monotonic() - started_t < 60:
        broker = cluster.brokers[flappers[bounces % 2]]
        broker.signal(signal.SIGTERM)
        if wait_until(lambda b=broker: not b.alive, 30) is None:  # type: ignore[misc]
            notes.append(f"broker {broker.id} did not stop")
            break
        broker.start(timeout=s.session_timeout_s * 4)
        bounces += 1
        time.sleep(2)
    # Leader changes per partition, from the committed states (ZooKeeper order) of the window.
    changes: dict[str, int] = {}
    last: dict[str, int] = {}
    for r in sorted(
        (r for r in cluster.history() if r.get("op") == "set" and r.get("result") == "OK" and r.get("data")),
        key=lambda r: int(r.get("mzxid") or 0),
    ):
        if float(r.get("t_mono", 0)) < started_t:
            continue
        key = str(r["path"]).split("/")[3] + "-" + str(r["path"]).split("/")[5]
        leader = int(json.loads(r["data"])["leader"])
        if key in last and last[key] != leader:
            changes[key] = changes.get(key, 0) + 1
        last[key] = leader
    worst = max((c / max(1, bounces) for c in changes.values()), default=0.0)
    notes.append(f"{bounces} bounces; worst partition {worst:.2f} leader changes per bounce")
    settled = wait_until(lambda: cluster.all_partitions_led(1) is not None, 20)
    return Outcome(settled, bounces >= 5 and worst <= 3, notes)


def f21_event_flood(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """1,000 ISR-change notifications plus a controlled shutdown in the middle of them."""
    active = cluster.active()
    assert active is not None
    parts = [TopicPartition("rel", p) for p in cluster.topics["rel"]]
    store = ZkStore(cluster.zk)
    started = time.monotonic()
    for i in range(1000):
        store.create_isr_change_notification([parts[i % len(parts)]])
        if i == 500:
            broker = cluster.brokers[min(cluster.brokers)]
            shutdown_started = time.monotonic()
            broker.signal(signal.SIGTERM)
    drained = wait_until(lambda: not cluster.zk.get_children(paths.ISR_CHANGE_NOTIFICATION_PATH), 30, 0.1)
    drain_s = None if drained is None else time.monotonic() - started
    exited = wait_until(lambda: not broker.alive, 30)
    shutdown_s = None if exited is None else time.monotonic() - shutdown_started
    broker.start()
    notes = [f"1,000 notifications drained after {drain_s and round(drain_s, 2)} s; shutdown took {shutdown_s}"]
    return Outcome(
        drain_s,
        drain_s is not None and drain_s <= s.slack * 10 and shutdown_s is not None and shutdown_s <= s.slack * 5,
        notes,
    )


def f22_nemesis(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """Jepsen-style: a random fault every 5-10 s for 60 s with admin actions between, then heal 30 s."""
    # The plan's mix (F1, F3, F4, F6, F7, F8, F10, F18, F19) but F16, a Celery worker killed mid-task,
    # which needs a worker and the dashboard's database: it has its own test in the per-PR tier.
    faults = ["kill", "sigstop", "expire", "blip", "partition", "zk_leader", "bounce", "redis", "push_loss"]
    notes: list[str] = []
    store = ZkStore(cluster.zk)
    end = time.monotonic() + 60
    step = 0
    while time.monotonic() < end:
        fault = rng.choice(faults)
        step += 1
        try:
            _inject(cluster, rng, fault, s)
            notes.append(f"t+{60 - (end - time.monotonic()):.0f}s {fault}")
        except Exception as exc:  # a fault that cannot apply now (no active controller, say) is skipped
            notes.append(f"{fault} skipped: {exc!r}"[:200])
        action = rng.choice(["topic", "preferred", "none"])
        try:
            if action == "topic":
                cluster.create_topic(f"nem-{run}-{step}", partitions=2, replication=2)
            elif action == "preferred" and cluster.zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None:
                store.create_preferred_replica_election_request([TopicPartition("rel", rng.randrange(s.partitions))])
        except Exception as exc:
            notes.append(f"admin {action} refused: {exc!r}"[:200])
        time.sleep(rng.uniform(5, 10))
    _restore(cluster)
    healed = time.monotonic()
    converged = wait_until(
        lambda: (
            cluster.active() is not None
            and len(cluster.active_controllers()) == 1
            and cluster._complete()
            and cluster.zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None
        ),
        30,
        0.2,
    )
    took = None if converged is None else time.monotonic() - healed
    notes.append(f"converged {took and round(took, 2)} s after heal")
    return Outcome(took, took is not None, notes)


def _inject(cluster: Cluster, rng: random.Random, fault: str, s: Settings) -> None:
    active = cluster.active()
    if fault == "kill" and active is not None:
        cluster.candidates[active].signal(signal.SIGKILL)
        cluster.pending_restarts.append(active)
    elif fault == "sigstop" and active is not None:
        c = cluster.candidates[active]
        c.signal(signal.SIGSTOP)
        time.sleep(2 * s.session_timeout_s)
        c.signal(signal.SIGCONT)
    elif fault == "expire" and active is not None:
        cluster.candidates[active].expire_session()
    elif fault == "blip" and active is not None:
        c = cluster.candidates[active]
        c.proxies.set_mode("blackhole")
        time.sleep(0.5 * s.session_timeout_s)
        c.proxies.set_mode("pass")
    elif fault == "partition" and active is not None:
        c = cluster.candidates[active]
        c.proxies.set_mode("blackhole")
        time.sleep(2 * s.session_timeout_s)
        c.proxies.set_mode("pass")
    elif fault == "zk_leader" and cluster.ensemble is not None and len(cluster.ensemble.servers) > 1:
        leader = cluster.ensemble.leader()
        if leader is not None:
            leader.kill()
            time.sleep(1)
            cluster.ensemble.restart(leader)
    elif fault == "bounce":
        broker = cluster.brokers[rng.choice(sorted(cluster.brokers))]
        broker.kill()
        broker.start(timeout=s.session_timeout_s * 4)
    elif fault == "redis" and cluster.mirror is not None:
        cluster.mirror.flushall()
    elif fault == "push_loss" and cluster.mirror is not None:
        cluster.mirror.kill_clients()
    else:
        raise RuntimeError(f"{fault} not applicable now")
    _restore(cluster, only_dead=True)


def _restore(cluster: Cluster, only_dead: bool = False) -> None:
    """Restart candidates the nemesis killed (a real deployment's supervisor would)."""
    for cid in list(cluster.pending_restarts):
        candidate = cluster.candidates[cid]
        if not candidate.alive:
            candidate.start()
        cluster.pending_restarts.remove(cid)
    if not only_dead:
        for broker in cluster.brokers.values():
            if not broker.alive:
                broker.start(timeout=cluster.session_timeout_s * 4)
