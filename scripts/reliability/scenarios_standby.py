"""Warm-standby faults (issue 28): the candidate that wins must take over from a view it has proven
current, or read everything; never act on a stale view.

* F23: the standby's connection to ZooKeeper stalls (its fault proxy holds server-to-client bytes)
  while the cluster changes and the active controller stops: a short stall delays the events in
  order (the catch-up still proves the view), a long one drops the connection and its watches (the
  standby must reload or fall back);
* F24: failover in the middle of an ISR-change storm (leaders rewriting their ISR conditionally on
  the version read, with notifications) while a broker fails: elections written from the view's
  versions meet BADVERSION and re-read, as Kafka does;
* F25: failover with a reassignment and a topic deletion in flight (both blocked on a broker that is
  down); they complete when it returns;
* F26: a standby restarted from nothing gets warm again from a full read and takes over warm;
* F27: a state znode changes after the takeover's catch-up proved the view current and before the
  first write made from it (held open by the ``before_write`` pause point): that write meets
  BADVERSION, the partition is re-read, and the election follows ZooKeeper's state, not the view's.

In every scenario the standby meant to win is the only other candidate left running (the third is
stopped gracefully and restarted by the heal phase), so the run judges that candidate's takeover.
``scenarios_soak`` registers them; ``run_scenario`` adds the heal phase and the checker (S1-S6, L1-L5).
"""

from __future__ import annotations

import random
import signal
import threading
import time
from typing import Any

from kazoo.exceptions import BadVersionError, NoNodeError

from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from scripts.reliability.cluster import Candidate, Cluster, wait_until
from scripts.reliability.scenarios import Outcome, Scenario, Settings


def _status(candidate: Candidate) -> dict[str, Any]:
    return candidate.status(timeout=2.0) or {}


def _warm(candidate: Candidate, timeout: float) -> float | None:
    return wait_until(lambda: str(_status(candidate).get("standby_warm")) == "1", timeout, 0.1)


def _only_standby(cluster: Cluster, rng: random.Random) -> tuple[int, Candidate]:
    """The active id and one standby; any other candidate is stopped (the heal restarts it)."""
    active = cluster.active()
    if active is None:
        raise RuntimeError("no active controller")
    others = sorted(cid for cid in cluster.candidates if cid != active)
    chosen = rng.choice(others)
    for cid in others:
        if cid != chosen:
            cluster.candidates[cid].signal(signal.SIGTERM)
            wait_until(lambda c=cid: not cluster.candidates[c].alive, 15)  # type: ignore[misc]
            cluster.pending_restarts.append(cid)
    return active, cluster.candidates[chosen]


def _stop_active(cluster: Cluster, active: int, sig: int = signal.SIGTERM) -> int:
    _, epoch = cluster.controller_znode()
    cluster.candidates[active].signal(sig)
    cluster.pending_restarts.append(active)
    return epoch


def _took_over(cluster: Cluster, standby: Candidate, old_epoch: int, timeout: float) -> float | None:
    def done() -> bool:
        holder, epoch = cluster.controller_znode()
        status = _status(standby)
        # failover_count moves as the failover starts; last_failover_path once it is done
        return holder == standby.id and epoch > old_epoch and bool(status.get("last_failover_path"))

    return wait_until(done, timeout, 0.05)


def f23_standby_stream_cut(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """Even runs: a 0.3 Ts stall (events late, in order); odd runs: 0.9 Ts (the connection drops)."""
    active, standby = _only_standby(cluster, rng)
    if _warm(standby, 20) is None:
        return Outcome(None, False, [f"standby {standby.id} never warm: {_status(standby)}"])
    reloads = int(_status(standby).get("standby_reloads", 0))
    stall = (0.3 if run % 2 == 0 else 0.9) * s.session_timeout_s
    standby.proxies.set_mode("drop_s2c")
    started = time.monotonic()
    cluster.create_topic(f"cut-{run}", partitions=2, replication=2)
    old_epoch = _stop_active(cluster, active)
    time.sleep(max(0.0, stall - (time.monotonic() - started)))
    standby.proxies.set_mode("pass")
    took = _took_over(cluster, standby, old_epoch, s.session_timeout_s + 15)
    notes = [f"standby {standby.id}: server-to-client stalled {stall:.1f} s while {active} stopped"]
    if took is None:
        return Outcome(None, False, [*notes, f"standby did not take over: {_status(standby)}"])
    status = _status(standby)
    path = status.get("last_failover_path")
    reloaded = int(status.get("standby_reloads", 0)) > reloads
    notes.append(f"failover path {path}; the standby reloaded after the stall: {reloaded}")
    # Warm after a dropped connection only from a reloaded view (the watches went with it).
    honest = path == "cold" or reloaded or run % 2 == 0
    led = cluster.all_partitions_led(15)
    if led is None:
        notes.append(f"topic cut-{run}, created during the stall, was not led")
    return Outcome(took, honest and led is not None and took <= s.slack * (s.session_timeout_s + 5), notes)


def _storm(cluster: Cluster, stop: threading.Event, counts: dict[str, int]) -> None:
    """Leaders' ISR changes as a pre-AlterIsr Kafka leader writes them: conditional on the version read,
    leader and epochs kept, one follower out then back in; each with an ISR-change notification."""
    store = ZkStore(cluster.zk)
    client = cluster.zk
    parts = [TopicPartition("rel", p) for p in cluster.topics["rel"]]
    i = 0
    while not stop.is_set():
        tp = parts[i % len(parts)]
        i += 1
        try:
            data, stat = client.get(paths.partition_state_path(tp))
            state = codecs.decode_partition_state(data, stat.version)
            lai = state.leader_and_isr
            replicas = cluster.topics["rel"][tp.partition]
            followers = [r for r in replicas if r != lai.leader]
            if not followers or lai.leader == -1:
                continue
            if len(lai.isr) == len(replicas):
                isr = tuple(r for r in lai.isr if r != followers[0])
            else:
                isr = tuple(r for r in replicas if r in lai.isr or r in cluster.live_brokers())
            new = LeaderIsrAndControllerEpoch(LeaderAndIsr(lai.leader, lai.leader_epoch, isr), state.controller_epoch)
            client.set(paths.partition_state_path(tp), codecs.encode_partition_state(new), version=stat.version)
            store.create_isr_change_notification([tp])
            counts["writes"] += 1
        except BadVersionError:
            counts["conflicts"] += 1
        except NoNodeError:
            continue
        time.sleep(0.002)


def _restore_isr(cluster: Cluster) -> None:
    """After the storm: every partition of ``rel`` with its live replicas in the ISR again, as the
    followers catching up would leave it (conditional writes, leader kept)."""
    client = cluster.zk
    for p, replicas in cluster.topics["rel"].items():
        tp = TopicPartition("rel", p)
        for _ in range(20):
            data, stat = client.get(paths.partition_state_path(tp))
            state = codecs.decode_partition_state(data, stat.version)
            lai = state.leader_and_isr
            isr = tuple(r for r in replicas if r == lai.leader or r in cluster.live_brokers())
            if lai.leader == -1 or set(isr) == set(lai.isr):
                break
            new = LeaderIsrAndControllerEpoch(LeaderAndIsr(lai.leader, lai.leader_epoch, isr), state.controller_epoch)
            try:
                client.set(paths.partition_state_path(tp), codecs.encode_partition_state(new), version=stat.version)
                ZkStore(client).create_isr_change_notification([tp])
                break
            except BadVersionError:
                continue


def f24_isr_storm_failover(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """SIGKILL the active controller and a broker in the middle of an ISR-change storm on ``rel``."""
    active, standby = _only_standby(cluster, rng)
    if _warm(standby, 20) is None:
        return Outcome(None, False, [f"standby {standby.id} never warm: {_status(standby)}"])
    stop = threading.Event()
    counts = {"writes": 0, "conflicts": 0}
    storm = threading.Thread(target=_storm, args=(cluster, stop, counts), daemon=True)
    storm.start()
    time.sleep(1.0)
    victim = rng.choice(sorted(cluster.brokers))
    old_epoch = _stop_active(cluster, active, signal.SIGKILL)
    cluster.brokers[victim].kill()
    took = _took_over(cluster, standby, old_epoch, s.session_timeout_s + 15)
    time.sleep(1.0)  # the storm goes on through the takeover and the elections
    stop.set()
    storm.join(timeout=10)
    notes = [f"storm: {counts['writes']} ISR writes, {counts['conflicts']} conflicts; broker {victim} and "
             f"controller {active} SIGKILLed"]  # fmt: skip
    if took is None:
        return Outcome(None, False, [*notes, f"standby did not take over: {_status(standby)}"])
    notes.append(f"failover path {_status(standby).get('last_failover_path')}")
    moved = wait_until(
        lambda: all(
            p.leader not in (-1, victim) for name, p in cluster.partition_states().items() if name.startswith("rel-")
        ),
        s.session_timeout_s + 10,
    )
    cluster.brokers[victim].start()
    _restore_isr(cluster)
    if moved is None:
        notes.append(f"partitions led by broker {victim} did not move")
    return Outcome(took, moved is not None and took <= s.slack * (s.session_timeout_s + 5), notes)


def f25_failover_with_work_in_flight(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """A reassignment onto a broker that is down and a deletion of a topic with a replica on it, both
    in flight when the active controller is SIGKILLed; both finish after the broker returns."""
    active, standby = _only_standby(cluster, rng)
    ids = sorted(cluster.brokers)
    down = ids[-1]
    cluster.create_topic("moving", partitions=2, replication=2, brokers=ids[:2])
    cluster.create_topic("doomed", partitions=2, replication=2, brokers=[ids[0], down])
    if cluster.all_partitions_led(15) is None:
        return Outcome(None, False, ["the topics were not led"])
    cluster.brokers[down].kill()
    if wait_until(lambda: down not in cluster.live_brokers(), 3 * s.session_timeout_s) is None:
        return Outcome(None, False, [f"broker {down}'s registration did not expire"])
    store = ZkStore(cluster.zk)
    targets = {TopicPartition("moving", 0): [ids[1], down], TopicPartition("moving", 1): [down, ids[1]]}
    store.create_partition_reassignment_request(targets)
    cluster.note_assignment("moving", {tp.partition: t for tp, t in targets.items()})
    store.mark_topic_for_deletion("doomed")
    del cluster.topics["doomed"]
    time.sleep(1.0)  # both started and blocked on the missing broker
    if _warm(standby, 20) is None:
        return Outcome(None, False, [f"standby {standby.id} never warm: {_status(standby)}"])
    old_epoch = _stop_active(cluster, active, signal.SIGKILL)
    took = _took_over(cluster, standby, old_epoch, s.session_timeout_s + 15)
    notes = [f"reassignment onto broker {down} (down) and deletion of doomed in flight; {active} SIGKILLed"]
    if took is None:
        return Outcome(None, False, [*notes, f"standby did not take over: {_status(standby)}"])
    notes.append(f"failover path {_status(standby).get('last_failover_path')}")
    in_flight = cluster.zk.exists(paths.topic_path("doomed")) is not None
    cluster.brokers[down].start()
    returned = time.monotonic()

    def finished() -> bool:
        if cluster.zk.exists(paths.REASSIGN_PARTITIONS_PATH) is not None:
            return False
        if cluster.zk.exists(paths.topic_path("doomed")) is not None:
            return False
        moving = ZkStore(cluster.zk).get_replica_assignments(["moving"])["moving"].partitions
        return all(tuple(moving[tp.partition].replicas) == tuple(t) for tp, t in targets.items())

    done = wait_until(finished, 30, 0.2)
    for tp, target in targets.items():
        cluster.topics["moving"][tp.partition] = list(target)
    if done is None:
        notes.append("the reassignment or the deletion did not finish after the broker returned")
    else:
        notes.append(f"both finished {time.monotonic() - returned:.1f} s after broker {down} returned")
    if not in_flight:
        notes.append("the deletion had finished before the failover (not in flight)")
    return Outcome(took, done is not None and in_flight and took <= s.slack * (s.session_timeout_s + 5), notes)


def f26_standby_restarted_from_nothing(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """SIGKILL the standby, start it again (no state), change the cluster while it loads; it must be
    warm again within 10 s and take over warm."""
    active, standby = _only_standby(cluster, rng)
    standby.signal(signal.SIGKILL)
    wait_until(lambda: not standby.alive, 10)
    standby.start()
    restarted = time.monotonic()
    cluster.create_topic(f"fresh-{run}", partitions=3, replication=2)
    warm = _warm(standby, 20)
    warm_s = None if warm is None else time.monotonic() - restarted
    notes = [f"standby {standby.id} restarted: warm after {warm_s and round(warm_s, 2)} s"]
    if warm_s is None:
        return Outcome(None, False, [*notes, f"never warm: {_status(standby)}"])
    old_epoch = _stop_active(cluster, active)
    took = _took_over(cluster, standby, old_epoch, s.session_timeout_s + 15)
    if took is None:
        return Outcome(None, False, [*notes, f"did not take over: {_status(standby)}"])
    path = _status(standby).get("last_failover_path")
    notes.append(f"failover path {path}")
    led = cluster.all_partitions_led(15)
    return Outcome(took, path == "warm" and led is not None and warm_s <= s.slack * 10 and took <= s.slack * 3, notes)


def _late_isr_shrinks(cluster: Cluster, victim: int) -> dict[TopicPartition, int]:
    """The dead leader's last ISR shrinks landing late: every ``rel`` partition led by ``victim`` with
    a full ISR loses its last follower (leader, leader epoch and controller epoch kept, conditional on
    the version read, as a pre-AlterIsr leader writes it). Returns each rewritten partition with the
    follower left in its ISR, the only replica a correct election can choose."""
    client = cluster.zk
    kept: dict[TopicPartition, int] = {}
    for p, replicas in cluster.topics["rel"].items():
        tp = TopicPartition("rel", p)
        data, stat = client.get(paths.partition_state_path(tp))
        state = codecs.decode_partition_state(data, stat.version)
        lai = state.leader_and_isr
        followers = [r for r in replicas if r != victim and r in lai.isr]  # assignment order
        if lai.leader != victim or len(followers) < 2:
            continue
        isr = (victim, followers[-1])  # not the follower an election from the stale full ISR would choose
        new = LeaderIsrAndControllerEpoch(LeaderAndIsr(lai.leader, lai.leader_epoch, isr), state.controller_epoch)
        client.set(paths.partition_state_path(tp), codecs.encode_partition_state(new), version=stat.version)
        kept[tp] = followers[-1]
    return kept


def f27_stale_view_write(cluster: Cluster, rng: random.Random, run: int, s: Settings) -> Outcome:
    """A warm view made stale between the catch-up and the first write: the write fails its version
    check and that partition is re-read (Kafka's BadVersion handling), never decided from the view.

    The active controller is held at its BrokerChange event while a broker that leads ``rel``
    partitions is SIGKILLed, then SIGKILLed itself; the standby takes over from its view (the broker
    already gone) and elects leaders for the dead broker's partitions from the view's states and
    versions. Its first write is held at ``before_write``: meanwhile the dead leader's last ISR
    shrinks land (``_late_isr_shrinks``). Released, the standby must meet BADVERSION on exactly those
    state znodes, re-read them, and elect the one follower each kept.
    """
    active, standby = _only_standby(cluster, rng)
    if _warm(standby, 20) is None:
        return Outcome(None, False, [f"standby {standby.id} never warm: {_status(standby)}"])
    leaders = {p.leader for name, p in cluster.partition_states().items() if name.startswith("rel-")}
    victim = rng.choice(sorted(b for b in cluster.brokers if b in leaders))
    (cluster.candidates[active].pause_dir / "event.BrokerChange").write_text("")
    (standby.pause_dir / "before_write").write_text("")
    cluster.brokers[victim].kill()
    notes = [f"broker {victim} SIGKILLed while controller {active} holds its BrokerChange"]
    held = wait_until(lambda: any(cluster.candidates[active].pause_dir.glob("event.paused-*")), 3 * s.session_timeout_s)
    if held is None:
        standby.release_all()
        return Outcome(None, False, [*notes, "the active controller never reached the BrokerChange event"])
    old_epoch = _stop_active(cluster, active, signal.SIGKILL)
    if wait_until(lambda: any(standby.pause_dir.glob("before_write.paused-*")), s.session_timeout_s + 15) is None:
        standby.release_all()
        return Outcome(None, False, [*notes, f"the standby never wrote: {_status(standby)}"])
    kept = _late_isr_shrinks(cluster, victim)
    notes.append(f"{len(kept)} state znodes rewritten after the catch-up, before the first write")
    standby.release("before_write")
    took = _took_over(cluster, standby, old_epoch, s.session_timeout_s + 15)
    if took is None:
        return Outcome(None, False, [*notes, f"standby did not take over: {_status(standby)}"])
    path = _status(standby).get("last_failover_path")
    notes.append(f"failover path {path}")
    rewritten = {paths.partition_state_path(tp) for tp in kept}
    pid = standby.proc.pid if standby.proc is not None else -1
    conflicts = {
        str(r.get("path"))
        for r in cluster.history()
        if r.get("pid") == pid and r.get("op") == "set" and r.get("result") == "BAD_VERSION"
    }
    notes.append(f"BADVERSION on {len(conflicts & rewritten)} of them ({len(conflicts - rewritten)} elsewhere)")

    def elected() -> bool:
        states = cluster.partition_states()
        return all(states[f"rel-{tp.partition}"].leader == follower for tp, follower in kept.items())

    ok = wait_until(elected, s.session_timeout_s + 10)
    if ok is None:
        states = cluster.partition_states()
        notes.append(
            "not the kept followers: " + ", ".join(f"rel-{tp.partition} {states[f'rel-{tp.partition}']}" for tp in kept)
        )
    cluster.brokers[victim].start()
    _restore_isr(cluster)
    met = bool(kept) and conflicts >= rewritten and ok is not None and path == "warm"
    return Outcome(took, met and took <= s.slack * (s.session_timeout_s + 5), notes)


STANDBY_SCENARIOS: dict[str, Scenario] = {
    sc.name: sc
    for sc in (
        Scenario(
            "F23",
            "standby's watch stream stalled 0.3 Ts / 0.9 Ts (odd runs) before it wins",
            "takes over <= Ts + 5 s from a proven or reloaded view, or cold; changes made meanwhile led",
            f23_standby_stream_cut,
            variants=2,
        ),
        Scenario(
            "F24",
            "failover during an ISR-change storm, with a broker failure",
            "takes over <= Ts + 5 s; the failed broker's partitions moved",
            f24_isr_storm_failover,
        ),
        Scenario(
            "F25",
            "failover with a reassignment and a topic deletion in flight",
            "takes over <= Ts + 5 s; both finish <= 30 s after the broker returns",
            f25_failover_with_work_in_flight,
            replicating=True,
        ),
        Scenario(
            "F26",
            "standby restarted from nothing",
            "warm <= 10 s; takes over warm <= 3 s",
            f26_standby_restarted_from_nothing,
        ),
        Scenario(
            "F27",
            "a state znode rewritten between the takeover's catch-up and its first write",
            "the write meets BADVERSION, the partition is re-read and led by the replica ZooKeeper's ISR allows",
            f27_stale_view_write,
        ),
    )
}
