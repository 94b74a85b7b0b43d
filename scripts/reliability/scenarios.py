"""Fault-injection scenarios of the reliability plan (reference §6c), each with its pass figure.

A scenario gets a started ``Cluster`` and a seeded ``random.Random``, injects its fault, measures the
recovery it is about, and returns an ``Outcome``. ``run_scenario`` wraps it: fresh cluster, a
topic workload, the scenario, the heal phase (every latch released, proxies back to ``pass``,
stopped processes continued), a bounded wait for convergence, then the checker over the histories
and the final snapshot. A run passes when its figure is met and the checker found nothing.
"""

from __future__ import annotations

import random
import signal
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeVar

from controller_core.zk import paths
from scripts.reliability.checker import Violation, check, check_liveness
from scripts.reliability.cluster import Broker, Cluster, StateStat, wait_until


@dataclass
class Outcome:
    """What a scenario measured: the recovery time it is about, and whether its figure was met."""

    recovery_s: float | None
    figure_met: bool
    notes: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)


@dataclass
class RunResult:
    scenario: str
    run: int
    passed: bool
    recovery_s: float | None
    violations: list[Violation]
    notes: list[str]
    duration_s: float


@dataclass(frozen=True)
class Settings:
    session_timeout_s: float = 4.0
    controllers: int = 3
    brokers: int = 3
    partitions: int = 6
    heal_timeout_s: float = 25.0
    # Multiplies every time bound of the pass figures: 1 in the soak (the figures as written); the
    # per-PR tier runs on a loaded CI box and allows twice the figure (the project's rule: no tight
    # wall-clock assertions in tests). Safety and liveness are never relaxed.
    slack: float = 1.0


@dataclass(frozen=True)
class Scenario:
    name: str
    title: str
    figure: str
    run: Callable[[Cluster, random.Random, int, Settings], Outcome]
    fast: bool = False
    mirror: bool = False  # the run needs the Redis mirror rig
    auto_rebalance: bool = False  # candidates run with auto leader rebalance (every 2 s)
    replicating: bool = False  # brokers replicate (not lightweight), so replicas rejoin the ISR
    plan_runs: int = 20  # the plan's run count for the soak's pass figure (reference §6c): 20/20 unless it says
    variants: int = 1  # fault variants chosen by ``run % variants``: the per-PR tier runs each once at least


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------
def _new_active(cluster: Cluster, old_epoch: int) -> bool:
    """A candidate holds /controller, says it is active, and the epoch moved past ``old_epoch``."""
    active = cluster.active()
    _, epoch = cluster.controller_znode()
    return active is not None and epoch > old_epoch


def _headless(cluster: Cluster) -> list[int]:
    """Candidates saying they are active while not holding an epoch (KAFKA-13407's headless state)."""
    out = []
    for cid, c in cluster.candidates.items():
        status = c.status(timeout=0.5)
        if status is not None and str(status.get("active")) == "1" and int(status.get("epoch", 0)) <= 0:
            out.append(cid)
    return out


def _writes_after(cluster: Cluster, pid: int, after_t: float) -> int:
    """Successful ZooKeeper writes process ``pid`` recorded after monotonic time ``after_t``."""
    return sum(
        1
        for r in cluster.history()
        if r.get("pid") == pid
        and r.get("op") in ("set", "create", "delete")
        and r.get("result") == "OK"
        and float(r.get("t_mono", 0)) > after_t
    )


def _becomes_inactive(cluster: Cluster, cid: int, timeout: float) -> float | None:
    candidate = cluster.candidates[cid]
    return wait_until(lambda: candidate.status() is not None and not candidate.is_active(), timeout, 0.02)


# ------------------------------------------------------------------------------------------------
# scenarios
# ------------------------------------------------------------------------------------------------
def f1_controller_crash(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    old = cluster.active()
    _, old_epoch = cluster.controller_znode()
    assert old is not None
    cluster.candidates[old].signal(signal.SIGKILL)
    cluster.create_topic(f"after-crash-{run}", partitions=2, replication=2)  # an admin action pending meanwhile
    took = wait_until(lambda: _new_active(cluster, old_epoch), s.session_timeout_s + 15)
    bound = s.session_timeout_s + 3
    notes = [f"killed controller {old} (epoch {old_epoch})"]
    if took is None:
        return Outcome(None, False, [*notes, "no new controller"])
    resumed = cluster.all_partitions_led(10)
    if resumed is None:
        notes.append("the topic created during the failover was not led")
    return Outcome(took, took <= s.slack * bound and resumed is not None, notes)


def f2_graceful_stop(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    old = cluster.active()
    _, old_epoch = cluster.controller_znode()
    assert old is not None
    victim = cluster.candidates[old]
    assert victim.proc is not None
    pid = victim.proc.pid
    time.monotonic()
    victim.signal(signal.SIGTERM)
    took = wait_until(lambda: _new_active(cluster, old_epoch), s.session_timeout_s + 15)
    if took is None:
        return Outcome(None, False, ["no new controller after SIGTERM"])
    exited = wait_until(lambda: not victim.alive, 15)
    _, epoch = cluster.controller_znode()
    resign = [
        float(r["t_mono"])
        for r in cluster.history()
        if r.get("pid") == pid
        and r.get("op") == "delete"
        and r.get("path") == paths.CONTROLLER_PATH
        and r.get("result") == "OK"
    ]
    notes = [f"SIGTERM controller {old}: epoch {old_epoch} -> {epoch}"]
    late = _writes_after(cluster, pid, resign[0]) if resign else 0
    if not resign:
        notes.append("the stopped controller did not delete /controller fenced by its epoch")
    if late:
        notes.append(f"{late} writes by the old process after it resigned")
    met = took <= s.slack * 2.0 and exited is not None and bool(resign) and late == 0 and epoch == old_epoch + 1
    victim.start()  # back as a standby for the next scenario steps and the L1 check
    return Outcome(took, met, notes)


def _zombie_changes(cluster: Cluster, before: Mapping[str, StateStat], zombie_pid: int, zombie_epoch: int) -> list[str]:
    """State znodes written since ``before`` by the zombie: a changed ``mzxid`` that the zombie's own
    history recorded, or a change carrying the zombie's epoch (or older) in its JSON. The new
    controller may write meanwhile (its writes carry its own epoch); nobody else writes state znodes."""
    zombie_mzxids = {
        r.get("mzxid") for r in cluster.history() if r.get("pid") == zombie_pid and r.get("result") == "OK"
    }
    changed = []
    for name, now in cluster.state_znode_stats().items():
        was = before.get(name)
        if was is not None and (was.version, was.mzxid) == (now.version, now.mzxid):
            continue
        if now.mzxid in zombie_mzxids or now.controller_epoch <= zombie_epoch:
            changed.append(f"{name}: {was} -> {now}")
    return changed


def _attempts_after(cluster: Cluster, pid: int, after_t: float) -> list[str]:
    """Results of the ZooKeeper writes process ``pid`` tried after ``after_t`` (FENCED, OK, ...)."""
    return [
        str(r.get("result"))
        for r in cluster.history()
        if r.get("pid") == pid and r.get("op") in ("set", "create", "delete") and float(r.get("t_mono", 0)) > after_t
    ]


def f3_zombie(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """SIGSTOP, or a pause at a step while partitioned, until another wins; then resume the zombie.

    The fault must have happened for the run to pass: the process stopped (SIGSTOP) or blocked at its
    pause point, and another candidate elected meanwhile. A paused zombie is released only once its
    client runs a new ZooKeeper session, so its pending write reaches the server and only the epoch
    fence stops it (``before_write`` and ``event`` must show that fenced attempt in the history).
    Every state znode's version and ``mzxid`` is taken before the zombie resumes; none may change by
    the zombie's hand after.
    """
    variants = ("sigstop", "before_write", "after_write", "event")
    variant = variants[run % len(variants)]
    old = cluster.active()
    _, old_epoch = cluster.controller_znode()
    assert old is not None
    zombie = cluster.candidates[old]
    assert zombie.proc is not None
    notes = [f"variant {variant}: zombie {old} at epoch {old_epoch}"]
    injected: list[str] = []  # why the fault was not injected, when it was not
    started = time.monotonic()
    if variant == "sigstop":
        zombie.signal(signal.SIGSTOP)
        if wait_until(zombie.stopped, 5) is None:
            injected.append("the zombie process never stopped")
    else:
        # ``event.BrokerChange``: the event the broker loss below queues, which makes the zombie write.
        step = "event.BrokerChange" if variant == "event" else variant
        zombie.pause(step, timeout=0.2)  # arm the latch; the work below makes the zombie block on it
        # Work that makes the zombie decide and write: a broker goes away.
        victim = cluster.brokers[max(cluster.brokers)]
        victim.kill()
        if not zombie.pause(step, timeout=s.session_timeout_s * 3):
            injected.append(f"the zombie never reached {step}")
        old_session = zombie.session_id()
        zombie.proxies.set_mode("blackhole")  # cut it off so its session expires and another wins
    new = wait_until(lambda: _new_active(cluster, old_epoch), s.session_timeout_s * 2 + 15)
    won_at = time.monotonic()
    if new is None:
        injected.append("no other controller was elected while the zombie was out")
    if variant == "sigstop":
        time.sleep(max(0.0, 2 * s.session_timeout_s - (won_at - started)))  # the figure: stopped for 2 Ts
        before = cluster.state_znode_stats()
        resumed = time.monotonic()
        zombie.signal(signal.SIGCONT)
    else:
        zombie.proxies.set_mode("pass")
        # Its old session is gone: release it only once it runs a new one, so the write it holds
        # reaches ZooKeeper (an expired session would refuse it before the fence is even checked).
        if wait_until(lambda: zombie.session_id() not in (None, old_session), 15) is None:
            injected.append("the zombie never started a new session")
        before = cluster.state_znode_stats()
        resumed = time.monotonic()
        zombie.release_all()
    inactive = _becomes_inactive(cluster, old, 10)
    late = _writes_after(cluster, zombie.proc.pid, won_at)
    changed = _zombie_changes(cluster, before, zombie.proc.pid, old_epoch)
    notes.append(f"inactive {inactive if inactive is None else round(inactive, 2)} s after resuming")
    if variant in ("before_write", "event"):
        attempts = _attempts_after(cluster, zombie.proc.pid, resumed)
        notes.append(f"the zombie's writes after resuming: {attempts}")
        if not attempts:
            injected.append("the zombie tried no write after resuming")
    if late:
        notes.append(f"the zombie made {late} successful writes after the new election")
    if changed:
        notes.append(f"state znodes the zombie changed after resuming: {changed}")
    notes += [f"fault not injected: {why}" for why in injected]
    if variant != "sigstop":
        victim = cluster.brokers[max(cluster.brokers)]
        victim.start()
    met = (
        not injected
        and new is not None
        and inactive is not None
        and inactive <= s.slack * 1.0
        and late == 0
        and not changed
    )
    return Outcome(resumed - started if new is None else new, met, notes)


def f4_session_expiry(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    old = cluster.active()
    _, old_epoch = cluster.controller_znode()
    assert old is not None
    started = time.monotonic()
    cluster.candidates[old].expire_session()
    took = wait_until(lambda: _new_active(cluster, old_epoch), 20)
    notes = [f"expired controller {old}'s session (epoch {old_epoch})"]
    time.sleep(max(0.0, 1.0 - (time.monotonic() - started)))
    new_id = max(cluster.brokers) + 1
    late = Broker(cluster, new_id)
    cluster.brokers[new_id] = late
    late.start()
    registered = time.monotonic()
    seen = wait_until(lambda: bool(late.metadata_cache()) and late.metadata_cache() == _leaders(cluster), 15)
    seen_s = None if seen is None else time.monotonic() - registered
    notes.append(f"broker {new_id} registered after the expiry; metadata after {seen_s and round(seen_s, 2)} s")
    met = took is not None and took <= s.slack * 5.0 and seen_s is not None and seen_s <= s.slack * 2.0
    return Outcome(took, met, notes)


def _leaders(cluster: Cluster) -> dict[str, tuple[int, int]]:
    return {k: (p.leader, p.leader_epoch) for k, p in cluster.partition_states().items()}


def f5_client_side_expiry(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """The candidate drops its session locally (kazoo's _SESSION_EXPIRED) while the server keeps it."""
    old = cluster.active()
    _, old_epoch = cluster.controller_znode()
    assert old is not None
    started = time.monotonic()
    cluster.candidates[old].signal(signal.SIGUSR1)
    headless: set[int] = set()
    bound = s.slack * (s.session_timeout_s + 5)
    deadline = started + bound + 10  # keep watching past the bound, so a miss shows how late it was
    converged: float | None = None
    while time.monotonic() < deadline:
        headless.update(_headless(cluster))
        if converged is None and _new_active(cluster, old_epoch) and len(cluster.active_controllers()) == 1:
            converged = time.monotonic() - started
            break
        time.sleep(0.05)
    notes = [f"client-side expiry of controller {old} (epoch {old_epoch})"]
    if headless:
        notes.append(f"headless: {sorted(headless)} said active without an epoch (old ephemeral taken for its own)")
    violations = (
        [Violation("L1", f"candidates {sorted(headless)} active without an epoch (headless)")] if headless else []
    )
    if converged is None or converged > bound:
        notes.append(f"converged after {converged and round(converged, 2)} s (bound {bound:.0f} s)")
    return Outcome(converged, converged is not None and converged <= bound and not headless, notes, violations)


def f6_short_blip(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    old = cluster.active()
    _, old_epoch = cluster.controller_znode()
    assert old is not None
    candidate = cluster.candidates[old]
    candidate.proxies.set_mode("blackhole")
    cluster.create_topic(f"blip-{run}", partitions=2, replication=2)  # a create the controller's watch misses
    cluster.zk.create(paths.topic_path("blip-gone"), b'{"version":2,"partitions":{"0":[1]}}')
    cluster.zk.delete(paths.topic_path("blip-gone"))  # created and deleted within the blip
    time.sleep(0.5 * s.session_timeout_s)
    candidate.proxies.set_mode("pass")
    healed = time.monotonic()
    led = cluster.all_partitions_led(10)
    seen = None if led is None else time.monotonic() - healed
    holder, epoch = cluster.controller_znode()
    gone = cluster.zk.exists(paths.partitions_path("blip-gone")) is None
    notes = [f"blackhole {0.5 * s.session_timeout_s:.1f} s on controller {old}: epoch {old_epoch} -> {epoch}"]
    met = seen is not None and seen <= s.slack * 2.0 and epoch == old_epoch and holder == old and gone
    return Outcome(seen, met, notes)


def f10_bounce_in_watch_gap(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    active = cluster.active()
    assert active is not None
    controller = cluster.candidates[active]
    bid = rng.choice(sorted(b for b in cluster.brokers if b != max(cluster.brokers)) or sorted(cluster.brokers))
    broker = cluster.brokers[bid]
    (controller.pause_dir / "event").write_text("")
    broker.kill()
    broker.start(timeout=s.session_timeout_s * 4)  # waits for the old session to expire: a new czxid
    paused = controller.pause("event", timeout=5)  # the watch gap: the controller blocked before an event
    controller.release("event")
    hosted = {k for k, r in _assignments(cluster).items() if bid in r}

    def recovered() -> bool:
        cache = broker.metadata_cache()
        return cache is not None and cache == _leaders(cluster) and _hosted(broker) >= hosted

    took = wait_until(recovered, 15)
    notes = [f"bounced broker {bid} while controller {active} paused"]
    if not paused:
        notes.append("fault not injected: the controller never blocked at its event pause point")
    return Outcome(took, paused and took is not None and took <= s.slack * 3.0, notes)


def _assignments(cluster: Cluster) -> dict[str, list[int]]:
    return {f"{t}-{p}": r for t, a in cluster.topics.items() for p, r in a.items()}


def _hosted(broker: Broker) -> set[str]:
    import json
    import urllib.request

    if broker.port is None:
        return set()
    with urllib.request.urlopen(f"http://127.0.0.1:{broker.port}/v1/state", timeout=2.0) as response:
        state = json.loads(response.read())
    return {f"{r['topic']}-{r['partition']}" for r in state.get("replicas", [])}


def f11_broker_hard_kill(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    bid = max(cluster.brokers)
    started = time.monotonic()
    cluster.brokers[bid].kill()

    def moved() -> bool:
        states = cluster.partition_states()
        for key, p in states.items():
            if key.startswith("solo-"):
                if p.leader != -1 or p.isr != (bid,):
                    return False
            elif p.leader == bid or bid in p.isr:
                return False
        return True

    took = wait_until(moved, s.session_timeout_s + 15)
    bound = s.session_timeout_s + 3
    return Outcome(took, took is not None and took <= s.slack * bound, [f"SIGKILL broker {bid} at {started:.1f}"])


def f18_redis_loss(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """Redis SIGKILLed and restarted empty while a broker dies (even runs), or FLUSHALL (odd runs)."""
    rig = cluster.mirror
    assert rig is not None
    notes: list[str] = []
    progressed: float | None = 0.0
    if run % 2 == 0:
        rig.kill_redis()
        victim = max(cluster.brokers)
        cluster.brokers[victim].kill()
        # ZooKeeper is the truth: the controller moves leaders while Redis is gone.
        progressed = wait_until(
            lambda: all(p.leader != victim for k, p in cluster.partition_states().items() if not k.startswith("solo-")),
            s.session_timeout_s + 10,
        )
        notes.append(
            f"Redis killed, broker {victim} killed: leaders moved after {progressed and round(progressed, 2)} s"
        )
        returned = time.monotonic()  # measured from the restart command (conservative)
        rig.restart_redis()
    else:
        returned = time.monotonic()
        rig.flushall()
        notes.append("FLUSHALL")
    converged = wait_until(lambda: rig.view() == cluster.partition_states(), 20, 0.1)
    equal = None if converged is None else time.monotonic() - returned
    notes.append(f"mirror equal to ZooKeeper {equal and round(equal, 2)} s after Redis returned")
    return Outcome(equal, equal is not None and equal <= s.slack * 5.0 and progressed is not None, notes)


class _Named(Protocol):
    @property
    def name(self) -> str: ...


NamedT = TypeVar("NamedT", bound=_Named)


def by_name(*scenarios: NamedT) -> dict[str, NamedT]:
    """A registry of scenarios keyed by their name (``F1``...), in the order given; a name given
    twice is a mistake in the table, refused at import."""
    twice = sorted(name for name, n in Counter(sc.name for sc in scenarios).items() if n > 1)
    if twice:
        raise ValueError(f"scenario names given twice: {', '.join(twice)}")
    return {sc.name: sc for sc in scenarios}


SCENARIOS: dict[str, Scenario] = by_name(
    Scenario("F1", "active controller crash (SIGKILL)", "new controller <= Ts + 3 s", f1_controller_crash, fast=True),
    Scenario("F2", "graceful stop (SIGTERM)", "failover <= 2 s, no write after resigning", f2_graceful_stop, fast=True),
    Scenario(
        "F3",
        "zombie controller",
        "0 zombie writes; inactive <= 1 s after resuming",
        f3_zombie,
        fast=True,
        plan_runs=50,
        variants=4,
    ),
    Scenario("F4", "server-side session expiry", "re-elected <= 5 s; new broker <= 2 s", f4_session_expiry, fast=True),
    Scenario(
        "F5", "client-side expiry", "one controller <= Ts + 5 s, never headless", f5_client_side_expiry, fast=True
    ),
    Scenario("F6", "short ZooKeeper blip (0.5 Ts)", "same epoch; missed changes <= 2 s", f6_short_blip, fast=True),
    Scenario(
        "F10", "broker bounce in a watch gap", "broker served <= 3 s after release", f10_bounce_in_watch_gap, fast=True
    ),
    Scenario("F11", "broker hard kill", "leaders moved <= Ts + 3 s", f11_broker_hard_kill, fast=True),
    Scenario("F18", "Redis loss", "mirror equals ZK <= 5 s after Redis", f18_redis_loss, fast=True, mirror=True),
)


#: The per-PR tier (reference §6c tiering), in the order the test command runs it.
FAST_TIER = tuple(name for name, sc in SCENARIOS.items() if sc.fast)


def run_scenario(
    scenario: Scenario,
    run: int,
    work_dir: Path,
    zk_addresses: Sequence[tuple[str, int]],
    *,
    seed: int = 0,
    settings: Settings | None = None,
    ensemble: Any = None,
) -> RunResult:
    """One run: fresh cluster, workload, fault, heal, convergence, checker."""
    s = settings or Settings()
    rng = random.Random(f"{seed}-{scenario.name}-{run}")
    started = time.monotonic()
    cluster = Cluster(
        work_dir / f"{scenario.name}-{run}",
        zk_addresses,
        controllers=s.controllers,
        brokers=s.brokers,
        session_timeout_s=s.session_timeout_s,
        mirror=scenario.mirror,
        auto_rebalance=scenario.auto_rebalance,
        lightweight_brokers=not scenario.replicating,
    )
    cluster.ensemble = ensemble
    violations: list[Violation] = []
    notes: list[str] = []
    outcome = Outcome(None, False)
    try:
        cluster.start()
        cluster.create_topic("rel", partitions=s.partitions, replication=min(3, s.brokers))
        cluster.create_topic("solo", partitions=2, replication=1, brokers=[max(cluster.brokers)])
        if cluster.all_partitions_led(20) is None:
            raise RuntimeError("the initial topics were not led")
        outcome = scenario.run(cluster, rng, run, s)
        notes += outcome.notes
        violations += outcome.violations
        _heal(cluster)
        converged = wait_until(
            lambda: not check_liveness(cluster.final_state()) and cluster._complete(), s.heal_timeout_s, 0.2
        )
        if converged is None:
            notes.append(f"not converged {s.heal_timeout_s:.0f} s after heal")
        violations += check(cluster.history(), cluster.final_state())
    except Exception as exc:
        notes.append(f"harness error: {exc!r}")
        notes.append(traceback.format_exc(limit=3))
        notes.append(cluster.logs()[-3000:])
    finally:
        cluster.close()
    passed = outcome.figure_met and not violations and not any(n.startswith("harness error") for n in notes)
    return RunResult(scenario.name, run, passed, outcome.recovery_s, violations, notes, time.monotonic() - started)


def _heal(cluster: Cluster) -> None:
    for cid in list(cluster.pending_restarts):
        if not cluster.candidates[cid].alive:
            cluster.candidates[cid].start()
        cluster.pending_restarts.remove(cid)
    for candidate in cluster.candidates.values():
        candidate.release_all()
        candidate.proxies.set_mode("pass")
        candidate.signal(signal.SIGCONT)
    for broker in cluster.brokers.values():
        broker.signal(signal.SIGCONT)
