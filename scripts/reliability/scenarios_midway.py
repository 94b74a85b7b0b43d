"""The soak's failovers in the middle of a multi-write operation (reference §6c): the controller
SIGKILLed at the n-th ZooKeeper write of a reassignment (F13) or a topic deletion (F14), and their
variants (a KIP-455 cancel with the target broker offline; a deletion with a replica's broker down;
a reassignment of a topic being deleted).

Why apart: these stage the operation, stop the controller at a chosen write (the ``before_write``
latch) and judge that the next controller finishes or refuses it as Kafka's does; ``scenarios_soak``
registers them, and ``run_scenario`` (``scenarios``) wraps each with the heal phase and the checker.
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
from scripts.reliability.scenarios import Outcome, Settings


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
