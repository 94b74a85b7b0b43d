"""The soak's ZooKeeper faults (reference §6c): a long partition of the active controller from its
ensemble (F7), the ensemble's leader restarted (F8), its quorum lost (F9) and a controlled shutdown
with ZooKeeper slow or down (F12).

Why apart: each needs the 3-node ensemble of ``scripts/soak`` or the candidates' fault proxies, and
its bound is in session timeouts; ``scenarios_soak`` registers them, and ``run_scenario``
(``scenarios``) wraps each with the heal phase and the checker.
"""

from __future__ import annotations

import random
import signal
import time

from scripts.reliability.cluster import Cluster, wait_until
from scripts.reliability.scenarios import Outcome, Settings, _becomes_inactive, _new_active, _writes_after


def f7_long_partition(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """Blackhole the active candidate's ZooKeeper links for 3 Ts (odd runs: drop replies only)."""
    mode = "blackhole" if run % 2 == 0 else "drop_s2c"
    old = cluster.active()
    _, old_epoch = cluster.controller_znode()
    assert old is not None
    victim = cluster.candidates[old]
    assert victim.proc is not None
    started = time.monotonic()
    victim.proxies.set_mode(mode)
    new = wait_until(lambda: _new_active(cluster, old_epoch) and cluster.active() != old, s.session_timeout_s * 3)
    won_at = time.monotonic()
    time.sleep(max(0.0, 3 * s.session_timeout_s - (won_at - started)))
    victim.proxies.set_mode("pass")
    passive = _becomes_inactive(cluster, old, 10)
    time.sleep(1.0)
    still_passive = not victim.is_active()
    late = _writes_after(cluster, victim.proc.pid, won_at)
    notes = [f"{mode} on controller {old} for {3 * s.session_timeout_s:.0f} s; new controller after {new} s"]
    if late:
        notes.append(f"{late} writes by the partitioned controller after the new election")
    met = (
        new is not None
        and new <= s.slack * (s.session_timeout_s + 3)
        and passive is not None
        and still_passive
        and not late
    )
    return Outcome(new, met, notes)


def f8_zk_leader_restart(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """SIGKILL the ZooKeeper leader and restart it, 5 times; L1 must hold after each cycle."""
    ensemble = cluster.ensemble
    if ensemble is None or len(ensemble.servers) < 3:
        return Outcome(None, False, ["F8 needs the 3-node ensemble (scripts/soak)"])
    worst = 0.0
    notes: list[str] = []
    _, epoch_before = cluster.controller_znode()
    for cycle in range(5):
        leader = ensemble.leader()
        if leader is None:
            ensemble.wait_quorum(30)
            leader = ensemble.leader()
        assert leader is not None
        killed = time.monotonic()
        leader.kill()
        # A headless window: no candidate both named in /controller and acting.
        settled = wait_until(lambda: cluster.active() is not None and len(cluster.active_controllers()) == 1, 30, 0.1)
        window = time.monotonic() - killed if settled is not None else float("inf")
        worst = max(worst, window)
        ensemble.restart(leader)
        ensemble.wait_quorum(30)
        notes.append(f"cycle {cycle}: killed {leader.name}; one active controller after {window:.2f} s")
    _, epoch_after = cluster.controller_znode()
    notes.append(f"epoch {epoch_before} -> {epoch_after}")
    return Outcome(worst, worst <= s.slack * 2 * s.session_timeout_s and epoch_after >= epoch_before, notes)


def f9_quorum_loss(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """SIGSTOP 2 of 3 ZooKeeper servers for 30 s, then continue them."""
    ensemble = cluster.ensemble
    if ensemble is None or len(ensemble.servers) < 3:
        return Outcome(None, False, ["F9 needs the 3-node ensemble (scripts/soak)"])
    stopped = rng.sample(ensemble.servers, 2)
    for server in stopped:
        server.signal(signal.SIGSTOP)
    time.sleep(30)
    for server in stopped:
        server.signal(signal.SIGCONT)
    restored = time.monotonic()
    ensemble.wait_quorum(60)
    converged = wait_until(
        lambda: cluster.active() is not None and len(cluster.active_controllers()) == 1 and cluster._complete(),
        2 * s.session_timeout_s + 30,
        0.1,
    )
    took = None if converged is None else time.monotonic() - restored
    dead = [cid for cid, c in cluster.candidates.items() if not c.alive]
    notes = [f"SIGSTOP {[x.name for x in stopped]} for 30 s; converged {took and round(took, 2)} s after restore"]
    if dead:
        notes.append(f"controller processes exited: {dead}")
    return Outcome(took, took is not None and took <= s.slack * (2 * s.session_timeout_s + 5) and not dead, notes)


#: The harness's brokers: 3 controlled-shutdown attempts, 200 ms backoff, 5 s request timeout
#: (``Broker.start``); with ZooKeeper down every attempt may run into the timeout.
_SHUTDOWN_BOUND_S = 3 * (5.0 + 0.2)


def f12_controlled_shutdown_slow_zk(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """A broker's controlled shutdown with 200 ms delay on the active controller's ZooKeeper links
    (even runs), or with every ZooKeeper server stopped (odd runs, KAFKA-9189)."""
    if run % 2 == 1:
        return _controlled_shutdown_zk_down(cluster, s)
    active = cluster.active()
    assert active is not None
    cluster.candidates[active].proxies.set_mode("delay", delay_ms=200)
    bid = min(cluster.brokers)
    broker = cluster.brokers[bid]
    started = time.monotonic()
    broker.signal(signal.SIGTERM)
    exited = wait_until(lambda: not broker.alive, 60)
    took = None if exited is None else time.monotonic() - started
    led_by_it = [k for k, p in cluster.partition_states().items() if p.leader == bid]
    cluster.candidates[active].proxies.set_mode("pass")
    notes = [f"controlled shutdown of broker {bid} under 200 ms ZooKeeper delay took {took and round(took, 2)} s"]
    if led_by_it:
        notes.append(f"still led by the stopped broker: {led_by_it}")
    broker.start()
    return Outcome(took, took is not None and took <= s.slack * 10.0 and not led_by_it, notes)


def _controlled_shutdown_zk_down(cluster: Cluster, s: Settings) -> Outcome:
    """Every ZooKeeper server SIGSTOPped, then a broker's SIGTERM: its controlled shutdown cannot
    succeed, so it must give up after its bounded retries and exit (not hang on ZooKeeper). Once
    ZooKeeper returns, the broker's registration expires and its leaders move (the heal checks it)."""
    ensemble = cluster.ensemble
    if ensemble is None:
        return Outcome(None, False, ["the ZooKeeper-down variant needs the ensemble (scripts/soak)"])
    bid = min(cluster.brokers)
    broker = cluster.brokers[bid]
    for server in ensemble.servers:
        server.signal(signal.SIGSTOP)
    try:
        time.sleep(0.5)
        started = time.monotonic()
        broker.signal(signal.SIGTERM)
        exited = wait_until(lambda: not broker.alive, 3 * _SHUTDOWN_BOUND_S)
        took = None if exited is None else time.monotonic() - started
    finally:
        for server in ensemble.servers:
            server.signal(signal.SIGCONT)
    notes = [
        f"broker {bid} SIGTERMed with ZooKeeper down: exited after {took and round(took, 2)} s "
        f"(bound: 3 attempts x (5 s timeout + 0.2 s backoff) = {_SHUTDOWN_BOUND_S:.1f} s)"
    ]
    if took is None:
        notes.append("the broker hung: killed")
        broker.kill()
    ensemble.wait_quorum(60)
    moved = wait_until(
        lambda: not any(p.leader == bid for k, p in cluster.partition_states().items() if not k.startswith("solo-")),
        3 * s.session_timeout_s + 10,
        0.1,
    )
    notes.append(f"leaders moved off broker {bid} {moved and round(moved, 2)} s after ZooKeeper returned")
    broker.start(timeout=s.session_timeout_s * 4)
    ok = took is not None and took <= s.slack * (_SHUTDOWN_BOUND_S + 2.0) and moved is not None
    return Outcome(took, ok, notes)
