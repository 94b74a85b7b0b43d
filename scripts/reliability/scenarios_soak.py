"""The soak-only scenarios (reference §6c): long partitions, ZooKeeper faults, failover mid-operation,
event floods and the seeded randomized nemesis (F22). They run from ``scripts/soak`` against a
3-node ensemble; ``run_scenario`` (``scenarios``) wraps each with the heal phase and the checker.
"""

from __future__ import annotations

import json
import random
import signal
import time
import urllib.request
from typing import Any

from controller_core.model import TopicPartition
from controller_core.protocol.messages import ALTER_PARTITION_REASSIGNMENTS_PATH, ErrorCode
from controller_core.zk import paths
from controller_core.zk.store import ZkStore
from scripts.reliability.cluster import Cluster, wait_until
from scripts.reliability.scenarios import (
    SCENARIOS,
    Outcome,
    Scenario,
    Settings,
    _becomes_inactive,
    _new_active,
    _writes_after,
)
from scripts.reliability.scenarios_redis import REDIS_SCENARIOS


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


def _kill_at_nth_write(cluster: Cluster, cid: int, nth: int, trigger: Any) -> bool:
    """Arm ``before_write`` on ``cid``, run ``trigger``, let ``nth`` writes through, SIGKILL at the next."""
    candidate = cluster.candidates[cid]
    (candidate.pause_dir / "before_write").write_text("")
    trigger()
    for _ in range(nth):
        if not candidate.pause("before_write", timeout=15):
            break
        candidate.release("before_write")
        time.sleep(0.05)
        (candidate.pause_dir / "before_write").write_text("")
    reached = candidate.pause("before_write", timeout=15)
    candidate.signal(signal.SIGKILL)
    candidate.release_all()
    return reached


def f13_failover_mid_reassignment(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """Move a replica (RF 2: [1,2] -> [2,3]) and SIGKILL the controller at its n-th ZooKeeper write of
    the reassignment (even runs; n = run/2 mod 3, it makes three fenced multis); the next controller
    finishes it. Odd runs: the KIP-455 cancel variant (``_cancel_with_target_offline``)."""
    if run % 2 == 1:
        return _cancel_with_target_offline(cluster, s)
    active = cluster.active()
    assert active is not None
    cluster.create_topic("moving", partitions=2, replication=2, brokers=[1, 2])
    if cluster.all_partitions_led(15) is None:
        return Outcome(None, False, ["topic moving was not led"])
    targets = {TopicPartition("moving", 0): [2, 3], TopicPartition("moving", 1): [3, 2]}
    store = ZkStore(cluster.zk)
    nth = (run // 2) % 3  # the reassignment makes three fenced multis here (measured)
    reached = _kill_at_nth_write(cluster, active, nth, lambda: store.create_partition_reassignment_request(targets))
    killed = time.monotonic()
    cluster.note_assignment("moving", {tp.partition: t for tp, t in targets.items()})
    for tp, target in targets.items():
        cluster.topics["moving"][tp.partition] = list(target)

    def done() -> bool:
        if cluster.zk.exists(paths.REASSIGN_PARTITIONS_PATH) is not None:
            return False
        replicas = ZkStore(cluster.zk).get_replica_assignments(["moving"])["moving"]
        states = cluster.partition_states()
        return all(
            list(replicas.partitions[tp.partition].replicas) == list(t)
            and not replicas.partitions[tp.partition].adding_replicas
            and not replicas.partitions[tp.partition].removing_replicas
            and set(states[f"moving-{tp.partition}"].isr) <= set(t)
            for tp, t in targets.items()
        )

    finished = wait_until(done, s.session_timeout_s + 25)
    took = None if finished is None else time.monotonic() - killed
    notes = [f"killed controller {active} at write #{nth + 1} of the reassignment (reached: {reached})"]
    if not reached:
        notes.append("the reassignment finished before that write: no mid-reassignment kill")
    return Outcome(took, reached and took is not None and took <= s.slack * (s.session_timeout_s + 10), notes)


def _call_controller(cluster: Cluster, cid: int, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` to candidate ``cid``'s controller API (the KIP-455 endpoint, say)."""
    api = cluster.candidates[cid].api
    assert api is not None
    request = urllib.request.Request(
        api.rstrip("/") + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=20) as response:
        answer = json.loads(response.read())
    assert isinstance(answer, dict)
    return answer


def _cancel_with_target_offline(cluster: Cluster, s: Settings) -> Outcome:
    """A reassignment to a broker that is down can never finish; KIP-455's cancel (replicas null)
    must put every partition back on its original replicas and leave nothing behind: no adding or
    removing replicas, ISR within the original replicas, ``/admin/reassign_partitions`` absent."""
    active = cluster.active()
    assert active is not None
    cluster.create_topic("moving", partitions=2, replication=2, brokers=[1, 2])
    if cluster.all_partitions_led(15) is None:
        return Outcome(None, False, ["topic moving was not led"])
    original = {
        TopicPartition("moving", p): list(a.replicas)
        for p, a in ZkStore(cluster.zk).get_replica_assignments(["moving"])["moving"].partitions.items()
    }
    offline = 3
    cluster.brokers[offline].kill()
    targets = {tp: [r for r in replicas if r != replicas[0]] + [offline] for tp, replicas in original.items()}

    def reassign(replicas: dict[TopicPartition, list[int] | None]) -> list[str]:
        body = {
            "partitions": [{"topic": tp.topic, "partition": tp.partition, "replicas": r} for tp, r in replicas.items()]
        }
        answer = _call_controller(cluster, active, ALTER_PARTITION_REASSIGNMENTS_PATH, body)
        errors = [
            f"{p['topic']}-{p['partition']}: {p['error_message']}" for p in answer["partitions"] if p["error_code"]
        ]
        return ([f"error {answer['error_code']}"] if answer["error_code"] else []) + errors

    notes = [f"broker {offline} killed; moving {original} -> {targets}"]
    refused = reassign(dict(targets))
    started = wait_until(
        lambda: all(
            a.adding_replicas
            for a in ZkStore(cluster.zk).get_replica_assignments(["moving"])["moving"].partitions.values()
        ),
        10,
    )
    if refused or started is None:
        notes.append(f"the reassignment did not start: {refused or 'no adding replicas after 10 s'}")
        cluster.brokers[offline].start(timeout=s.session_timeout_s * 4)
        return Outcome(None, False, notes)
    time.sleep(1.0)  # it is stuck: the adding replica's broker is down
    # Kafka's cancel restores the origin replicas as the in-flight assignment records them: its
    # replicas minus the adding ones, in that order (reference §2.1), which can differ in order from
    # the list before the move ([1,2] -> [2,3] cancels to [2,1]); the set is always the original one.
    in_flight = ZkStore(cluster.zk).get_replica_assignments(["moving"])["moving"].partitions
    expected = {
        tp: [r for r in in_flight[tp.partition].replicas if r not in in_flight[tp.partition].adding_replicas]
        for tp in original
    }
    lost = any(set(expected[tp]) != set(replicas) for tp, replicas in original.items())
    if lost:
        notes.append(f"the in-flight assignment lost an original replica: {in_flight}")
    cancelled = time.monotonic()
    refused = reassign(dict.fromkeys(targets))
    if refused:
        notes.append(f"cancel refused: {refused}")

    def reverted() -> bool:
        if cluster.zk.exists(paths.REASSIGN_PARTITIONS_PATH) is not None:
            return False
        assignment = ZkStore(cluster.zk).get_replica_assignments(["moving"])["moving"].partitions
        states = cluster.partition_states()
        return all(
            list(assignment[tp.partition].replicas) == replicas
            and not assignment[tp.partition].adding_replicas
            and not assignment[tp.partition].removing_replicas
            and set(states[f"moving-{tp.partition}"].isr) <= set(replicas)
            and states[f"moving-{tp.partition}"].leader in replicas
            for tp, replicas in expected.items()
        )

    done = wait_until(reverted, 20)
    took = None if done is None else time.monotonic() - cancelled
    if done is None:
        assignment = ZkStore(cluster.zk).get_replica_assignments(["moving"])["moving"].partitions
        states = cluster.partition_states()
        notes.append(
            f"expected {expected}; left: /admin/reassign_partitions "
            f"{'present' if cluster.zk.exists(paths.REASSIGN_PARTITIONS_PATH) else 'gone'}; "
            + "; ".join(
                f"moving-{p}: replicas {list(a.replicas)} adding {list(a.adding_replicas)} removing "
                f"{list(a.removing_replicas)} leader {states[f'moving-{p}'].leader} "
                f"isr {list(states[f'moving-{p}'].isr)}"
                for p, a in sorted(assignment.items())
            )
        )
    notes.append(
        f"cancelled with broker {offline} down: back on the original replicas after {took and round(took, 2)} s"
    )
    cluster.brokers[offline].start(timeout=s.session_timeout_s * 4)
    return Outcome(took, not lost and not refused and took is not None and took <= s.slack * 5.0, notes)


def _doomed_gone(cluster: Cluster) -> bool:
    return all(
        cluster.zk.exists(p) is None
        for p in (paths.topic_path("doomed"), "/config/topics/doomed", paths.delete_topic_path("doomed"))
    )


def f14_failover_mid_deletion(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """Kill the controller at the n-th write of a topic deletion; the next one finishes it (runs
    0 and 1 of every 4; n = run mod 4). Run 2 of 4: a replica's broker dies as the deletion starts
    (KAFKA-10548). Run 3 of 4: a reassignment of a partition of the topic being deleted."""
    if run % 4 == 2:
        return _deletion_with_a_replica_broker_down(cluster, s)
    if run % 4 == 3:
        return _reassignment_of_a_topic_being_deleted(cluster, s)
    active = cluster.active()
    assert active is not None
    cluster.create_topic("doomed", partitions=3, replication=2)
    cluster.all_partitions_led(15)
    store = ZkStore(cluster.zk)
    nth = run % 4  # the deletion makes two fenced multis here before the topic is gone (measured)
    reached = _kill_at_nth_write(cluster, active, nth, lambda: store.mark_topic_for_deletion("doomed"))
    killed = time.monotonic()
    del cluster.topics["doomed"]
    finished = wait_until(lambda: _doomed_gone(cluster), 30)
    took = None if finished is None else time.monotonic() - killed
    notes = [f"killed controller {active} at write #{nth + 1} of the deletion (reached: {reached})"]
    return Outcome(took, reached and took is not None and took <= s.slack * 15.0, notes)


def _deletion_with_a_replica_broker_down(cluster: Cluster, s: Settings) -> Outcome:
    """SIGKILL a broker holding replicas of ``doomed`` as its deletion is requested: the controller's
    StopReplica(delete) to it gets no answer, its registration expires, and the deletion must halt
    (not finish with a replica undeleted), then finish once the broker is back."""
    cluster.create_topic("doomed", partitions=3, replication=2)
    if cluster.all_partitions_led(15) is None:
        return Outcome(None, False, ["topic doomed was not led"])
    assignment = ZkStore(cluster.zk).get_replica_assignments(["doomed"])["doomed"].partitions
    victim = assignment[0].replicas[0]
    cluster.brokers[victim].kill()
    ZkStore(cluster.zk).mark_topic_for_deletion("doomed")
    del cluster.topics["doomed"]
    notes = [f"broker {victim} SIGKILLed as the deletion of doomed was requested"]
    expired = wait_until(lambda: victim not in cluster.live_brokers(), 3 * s.session_timeout_s)
    time.sleep(1.0)
    halted = cluster.zk.exists(paths.topic_path("doomed")) is not None
    if not halted:
        notes.append(f"the topic was gone while broker {victim}, holding a replica, was down")
    cluster.brokers[victim].start(timeout=s.session_timeout_s * 4)
    back = time.monotonic()
    finished = wait_until(lambda: _doomed_gone(cluster), 30)
    took = None if finished is None else time.monotonic() - back
    notes.append(
        f"registration expired: {expired is not None}; halted while it was down: {halted}; "
        f"deleted {took and round(took, 2)} s after it returned"
    )
    if expired is None:
        notes.append(f"fault not injected: broker {victim}'s registration never expired")
    return Outcome(took, expired is not None and halted and took is not None and took <= s.slack * 15.0, notes)


def _reassignment_of_a_topic_being_deleted(cluster: Cluster, s: Settings) -> Outcome:
    """Reassign a partition of ``doomed`` while its deletion is under way (halted: a replica's
    broker is down, so the topic stays queued): the controller must refuse it with
    UNKNOWN_TOPIC_OR_PARTITION, as Kafka's does for a topic queued for deletion, and the deletion
    must finish once the broker is back, with no reassignment left behind. (A reassignment that
    reaches the controller *before* the deletion request is Kafka's other order: it is accepted,
    and the deletion waits for it to finish.)"""
    active = cluster.active()
    assert active is not None
    cluster.create_topic("doomed", partitions=3, replication=2, brokers=[1, 2])
    if cluster.all_partitions_led(15) is None:
        return Outcome(None, False, ["topic doomed was not led"])
    cluster.brokers[1].kill()
    wait_until(lambda: 1 not in cluster.live_brokers(), 3 * s.session_timeout_s)
    ZkStore(cluster.zk).mark_topic_for_deletion("doomed")
    del cluster.topics["doomed"]
    time.sleep(1.0)
    halted = cluster.zk.exists(paths.topic_path("doomed")) is not None
    body = {"partitions": [{"topic": "doomed", "partition": 0, "replicas": [2, 3]}]}
    answer = _call_controller(cluster, active, ALTER_PARTITION_REASSIGNMENTS_PATH, body)
    codes = [int(p["error_code"]) for p in answer.get("partitions", [])]
    refused = int(answer.get("error_code", 0)) == 0 and codes == [int(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    cluster.brokers[1].start(timeout=s.session_timeout_s * 4)
    back = time.monotonic()
    finished = wait_until(
        lambda: _doomed_gone(cluster) and cluster.zk.exists(paths.REASSIGN_PARTITIONS_PATH) is None, 30
    )
    took = None if finished is None else time.monotonic() - back
    notes = [
        f"deletion halted (broker 1 down): {halted}; reassignment of doomed-0 answered {answer}; "
        f"deleted {took and round(took, 2)} s after broker 1 returned"
    ]
    return Outcome(took, halted and refused and took is not None and took <= s.slack * 15.0, notes)


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


SOAK_SCENARIOS: dict[str, Scenario] = {
    sc.name: sc
    for sc in (
        Scenario("F7", "long controller-ZK partition (3 Ts)", "new controller <= Ts + 3 s", f7_long_partition),
        Scenario("F8", "ZooKeeper leader restart x5", "headless window <= 2 Ts", f8_zk_leader_restart, plan_runs=10),
        Scenario("F9", "ZooKeeper quorum loss 30 s", "converged <= 2 Ts + 5 s", f9_quorum_loss, plan_runs=10),
        Scenario(
            "F12",
            "controlled shutdown: 200 ms ZK delay / ZK down (odd runs)",
            "shutdown <= 10 s; ZK down: broker exits <= 3 x (timeout + backoff)",
            f12_controlled_shutdown_slow_zk,
        ),
        Scenario(
            "F13",
            "failover mid-reassignment / cancel, target offline (odd runs)",
            "complete <= Ts + 10 s; cancel reverted <= 5 s",
            f13_failover_mid_reassignment,
            replicating=True,
        ),
        Scenario(
            "F14",
            "topic deletion: failover mid-way / replica broker down / reassigned (runs mod 4)",
            "deleted <= 15 s (after the broker returns); the reassignment refused",
            f14_failover_mid_deletion,
        ),
        Scenario(
            "F15",
            "broker flapping, auto-rebalance on",
            "<= 3 leader changes per partition per bounce",
            f15_broker_flapping,
            auto_rebalance=True,
            replicating=True,
            plan_runs=10,
        ),
        Scenario("F21", "event flood (1,000 ISR notifications)", "drain <= 10 s; shutdown <= 5 s", f21_event_flood),
        Scenario("F22", "randomized nemesis (seeded)", "S1-S6; L1-L5 after heal", f22_nemesis, mirror=True),
    )
}

ALL_SCENARIOS: dict[str, Scenario] = dict(
    sorted({**SCENARIOS, **SOAK_SCENARIOS, **REDIS_SCENARIOS}.items(), key=lambda kv: int(kv[0][1:]))
)
