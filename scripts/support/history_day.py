"""One simulated day of the controller: the event sequences (broker failure, controlled shutdown,
preferred rebalance, AlterIsr, reassignment, failover) that write a day's records through ``DayRecords``.
"""

from __future__ import annotations

import heapq
import json
import random
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scripts.support.history_records import (
    NULL,
    OFFLINE,
    ONLINE,
    R_DEL_OK,
    R_DEL_START,
    R_GONE,
    R_NEW,
    R_OFFLINE,
    R_ONLINE,
    SESSION_TIMEOUT_MS,
    DayRecords,
)
from scripts.support.history_spec import DayPlan, DayResult, HistorySpec, Reassignment, base_assignment, topic_name


class SimulatedDay:
    """One day of the cluster: state arrays, an event heap and Kafka's handling of each incident."""

    def __init__(self, spec: HistorySpec, plan: DayPlan, out: DayRecords) -> None:
        self.spec = spec
        self.plan = plan
        self.out = out
        self.rng = random.Random(f"day:{spec.seed}:{spec.cluster}:{plan.index}")
        self.day_start_ms = out.clock
        n = spec.partitions
        ppt = spec.partitions_per_topic
        self.topic_of = [topic_name(spec, p // ppt) for p in range(n)]
        self.entity = [f"{self.topic_of[p]}-{p % ppt}" for p in range(n)]
        self.unclean_topics = {
            t
            for t in range(spec.topics)
            if random.Random(f"unclean:{spec.seed}:{t}").random() < spec.unclean_topic_fraction
        }
        self.assign = [plan.overrides.get(p) or base_assignment(spec, p) for p in range(n)]
        self.leader = [a[0] for a in self.assign]
        self.isr = list(self.assign)
        self.lepoch = [1000 * plan.index] * n
        self.alive = set(range(1, spec.brokers + 1))
        self.led: dict[int, set[int]] = {b: set() for b in self.alive}
        self.hosted: dict[int, set[int]] = {b: set() for b in self.alive}
        self.replica_down: dict[int, set[int]] = {b: set() for b in self.alive}
        for p, replicas in enumerate(self.assign):
            self.led[replicas[0]].add(p)
            for r in replicas:
                self.hosted[r].add(p)
        self.offline: set[int] = set()
        self.reassigning: dict[int, tuple[tuple[int, ...], tuple[int, ...], str]] = {}
        hot = max(1, n // 50)
        self.hot_partitions = self.rng.sample(range(n), hot)
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._order = 0

    # -- scheduling --

    def at(self, second_of_day: float, action: Callable[..., None], *args: Any) -> None:
        self.at_ms(self.day_start_ms + second_of_day * 1000.0, action, *args)

    def at_ms(self, t_ms: float, action: Callable[..., None], *args: Any) -> None:
        self._order += 1
        heapq.heappush(self._heap, (t_ms, self._order, action, args))

    def run(self) -> None:
        plan, spec, rng = self.plan, self.spec, self.rng
        if plan.rolling_restart:
            for i, broker in enumerate(range(1, spec.brokers + 1)):
                self.at(2 * 3600.0 + i * 600.0, self.controlled_shutdown, broker)
        for broker, start, downtime in plan.hard_failures:
            self.at(start - 5.0, self.collapse_isr, broker)
            self.at(start, self.fail, broker)
            self.at(start + downtime, self.restart, broker)
        for r in plan.reassignments:
            self.at(r.start_s, self.reassign_start, r)
        if plan.failover is not None:
            self.at(plan.failover[0], self.resign, plan.failover[1])
        for _ in range(plan.flaps):
            self.at(rng.uniform(60.0, 23.5 * 3600.0), self.flap)
        self.at(23.75 * 3600.0, self.settle)
        while self._heap:
            t_ms, _, action, args = heapq.heappop(self._heap)
            self.out.advance_to(t_ms)
            action(*args)

    def event_id(self) -> str:
        return f"{self.rng.getrandbits(128):032x}"

    # -- record helpers --

    def _batch(self, cause: str, eid: str, partitions: int) -> None:
        self.out.other(
            "request_batch",
            cause,
            eid,
            f'"request_controller_epoch":{self.out.epoch},"leader_and_isr":{{}},'
            f'"update_metadata":{{"brokers":[],"partitions":{partitions}}},"stop_replica":{{}}',
        )

    def _record(
        self,
        kind: str,
        cause: str,
        eid: str,
        p: int,
        from_state: str,
        to_state: str,
        replica: int | None = None,
        **fields: str,
    ) -> None:
        """A record about partition ``p`` (or its ``replica``): entity, topic and partition from ``p``."""
        self.out.partition(
            kind,
            cause,
            eid,
            self.entity[p] if replica is None else f"{self.entity[p]}@{replica}",
            self.topic_of[p],
            p % self.spec.partitions_per_topic,
            NULL if replica is None else str(replica),
            from_state,
            to_state,
            **fields,
        )

    def _replica(self, cause: str, eid: str, p: int, broker: int, from_state: str, to_state: str) -> None:
        self._record("replica_transition", cause, eid, p, from_state, to_state, broker)

    def _set_leader(self, p: int, leader: int) -> None:
        old = self.leader[p]
        if old > 0:
            self.led[old].discard(p)
        if leader > 0:
            self.led[leader].add(p)
        self.leader[p] = leader

    def _isr_change(self, cause: str, eid: str, p: int, leader: int, isr: tuple[int, ...], replica: int | None) -> None:
        out = self.out
        before_leader, before_isr, before_epoch = self.leader[p], self.isr[p], self.lepoch[p]
        after_epoch = before_epoch + 1 if leader != before_leader else before_epoch
        self._record(
            "isr_change",
            cause,
            eid,
            p,
            NULL,
            NULL,
            replica,
            leader_before=str(before_leader),
            leader_after=str(leader),
            isr_before=out.isr(before_isr),
            isr_after=out.isr(isr),
            epoch_before=str(before_epoch),
            epoch_after=str(after_epoch),
        )
        self._set_leader(p, leader)
        self.isr[p] = isr
        self.lepoch[p] = after_epoch

    def _election(
        self,
        cause: str,
        eid: str,
        p: int,
        strategy: str,
        from_state: str,
        leader: int,
        isr: tuple[int, ...],
        unclean: bool,
    ) -> None:
        out = self.out
        before_epoch = self.lepoch[p]
        self._record(
            "election",
            cause,
            eid,
            p,
            from_state,
            ONLINE,
            strategy=f'"{strategy}"',
            leader_before=str(self.leader[p]),
            leader_after=str(leader),
            isr_before=out.isr(self.isr[p]),
            isr_after=out.isr(isr),
            epoch_before=str(before_epoch),
            epoch_after=str(before_epoch + 1),
            unclean="true" if unclean else "false",
        )
        self._set_leader(p, leader)
        self.isr[p] = isr
        self.lepoch[p] = before_epoch + 1
        self.offline.discard(p)

    def _elect_offline(self, cause: str, eid: str, p: int) -> None:
        """Kafka's offline election: a live ISR member, else (if the topic allows) any live replica."""
        replicas, isr, alive = self.assign[p], self.isr[p], self.alive
        leader = next((r for r in replicas if r in alive and r in isr), None)
        unclean = False
        if leader is None and (p // self.spec.partitions_per_topic) in self.unclean_topics:
            leader = next((r for r in replicas if r in alive), None)
            unclean = leader is not None
        if leader is None:
            self._record(
                "failed_change",
                cause,
                eid,
                p,
                OFFLINE,
                ONLINE,
                strategy='"offline"',
                error=f'"StateChangeFailedError: No live in-sync replica of partition {self.entity[p]}"',
            )
            return
        new_isr = (leader,) if unclean else tuple(r for r in isr if r in alive)
        self._election(cause, eid, p, "offline", OFFLINE, leader, new_isr, unclean)

    # -- incidents --

    def collapse_isr(self, broker: int) -> None:
        """A struggling leader drops its followers first: a few partitions are left with ISR = {leader}."""
        led = sorted(self.led[broker])
        if not led:
            return
        eid = self.event_id()
        for p in self.rng.sample(led, max(1, int(len(led) * self.spec.isr_collapse_fraction))):
            if len(self.isr[p]) > 1 and p not in self.offline and p not in self.reassigning:
                self._isr_change("AlterIsrReceived", eid, p, broker, (broker,), None)

    def fail(self, broker: int, expired: bool = True) -> None:
        """Broker loss (Kafka's onBrokerFailure): leaders first, then replicas and ISRs.

        ``expired``: the broker died and its ZooKeeper session expired, so the controller records the
        estimated loss (noticed minus the brokers' 18 s session timeout), as ``Controller`` does; not
        after a controlled shutdown, whose registration goes when the broker closes its session.
        """
        if broker not in self.alive:
            return
        out, cause, eid = self.out, "BrokerChange", self.event_id()
        self.alive.discard(broker)
        tail = f'"new_brokers":[],"dead_brokers":[{broker}],"bounced_brokers":[]'
        if expired:
            lost = f',"session_lost_brokers":[{broker}],"session_lost_estimated":true,"session_lost_ms":'
            out.other("broker_change", cause, eid, lambda: f"{tail}{lost}{out.clock - SESSION_TIMEOUT_MS:.3f}")
        else:
            out.other("broker_change", cause, eid, tail)
        led = sorted(self.led[broker])
        for p in led:
            if p not in self.offline:
                self._record("partition_transition", cause, eid, p, ONLINE, OFFLINE)
                self.offline.add(p)
        for p in led:
            self._elect_offline(cause, eid, p)
        down = self.replica_down[broker]
        hosted = sorted(self.hosted[broker])
        for p in hosted:
            if p not in down:
                self._replica(cause, eid, p, broker, R_ONLINE, R_OFFLINE)
                down.add(p)
        for p in hosted:
            isr = self.isr[p]
            if broker in isr:
                leader = -1 if self.leader[p] == broker else self.leader[p]
                self._isr_change(
                    cause, eid, p, leader, isr if len(isr) == 1 else tuple(r for r in isr if r != broker), broker
                )
        self._batch(cause, eid, len(hosted))

    def restart(self, broker: int) -> None:
        """Broker startup: replicas online, offline partitions re-elected, catch-up, then rebalance."""
        if broker in self.alive:
            return
        out, cause, eid = self.out, "BrokerChange", self.event_id()
        self.alive.add(broker)
        out.other("broker_change", cause, eid, f'"new_brokers":[{broker}],"dead_brokers":[],"bounced_brokers":[]')
        down = self.replica_down[broker]
        for p in sorted(down):
            self._replica(cause, eid, p, broker, R_OFFLINE, R_ONLINE)
        down.clear()
        for p in sorted(self.offline):
            self._elect_offline(cause, eid, p)
        self._batch(cause, eid, len(self.hosted[broker]))
        lagging = sorted(p for p in self.hosted[broker] if broker not in self.isr[p])
        for i in range(10):
            self.at_ms(out.clock + 5000.0 * (i + 1), self.catch_up, broker, lagging[i::10])
        self.at_ms(out.clock + 300_000.0, self.preferred, broker)

    def catch_up(self, broker: int, partitions: Sequence[int]) -> None:
        """AlterIsr from the leaders: ``broker`` is back in sync for ``partitions``."""
        if broker not in self.alive:
            return
        eid = self.event_id()
        for p in partitions:
            self._expand(eid, p, broker)

    def _expand(self, eid: str, p: int, broker: int) -> None:
        isr, leader = self.isr[p], self.leader[p]
        if broker in isr or leader < 0 or leader not in self.alive or broker not in self.assign[p]:
            return
        new_isr = tuple(r for r in self.assign[p] if r in isr or r == broker)
        self._isr_change("AlterIsrReceived", eid, p, leader, new_isr, None)

    def preferred(self, broker: int) -> None:
        """Auto rebalance: give ``broker`` back the partitions it is the preferred leader of."""
        if broker not in self.alive:
            return
        cause, eid = "AutoPreferredReplicaLeaderElection", self.event_id()
        moved = 0
        for p in sorted(self.hosted[broker]):
            if self.assign[p][0] == broker and self.leader[p] not in (broker, -1) and broker in self.isr[p]:
                self._election(cause, eid, p, "preferred", ONLINE, broker, self.isr[p], False)
                moved += 1
        if moved:
            self._batch(cause, eid, moved)

    def controlled_shutdown(self, broker: int) -> None:
        """Rolling restart step: move leadership off ``broker``, stop its followers, then it leaves."""
        if broker not in self.alive:
            return
        out, cause, eid = self.out, "ControlledShutdown", self.event_id()
        out.other("controlled_shutdown", cause, eid, f'"broker_id":{broker}')
        for p in sorted(self.led[broker]):
            isr = self.isr[p]
            leader = next((r for r in self.assign[p] if r in isr and r in self.alive and r != broker), None)
            if leader is not None:
                self._election(
                    cause, eid, p, "controlled_shutdown", ONLINE, leader, tuple(r for r in isr if r != broker), False
                )
        down = self.replica_down[broker]
        for p in sorted(self.hosted[broker]):
            if self.leader[p] != broker and p not in down:
                self._replica(cause, eid, p, broker, R_ONLINE, R_OFFLINE)
                down.add(p)
                if broker in self.isr[p] and len(self.isr[p]) > 1:
                    self._isr_change(
                        cause, eid, p, self.leader[p], tuple(r for r in self.isr[p] if r != broker), broker
                    )
        self._batch(cause, eid, len(self.hosted[broker]))
        self.at_ms(out.clock + 10_000.0, self.fail, broker, False)
        self.at_ms(out.clock + self.rng.uniform(60_000.0, 120_000.0), self.restart, broker)

    def flap(self) -> None:
        """A follower falls out of the ISR for a moment (mostly on a few hot partitions)."""
        rng = self.rng
        for _ in range(3):
            p = rng.choice(self.hot_partitions) if rng.random() < 0.8 else rng.randrange(self.spec.partitions)
            isr, leader = self.isr[p], self.leader[p]
            if leader < 0 or leader not in self.alive or len(isr) < 2 or p in self.reassigning:
                continue
            follower = rng.choice([r for r in isr if r != leader])
            self._isr_change(
                "AlterIsrReceived", self.event_id(), p, leader, tuple(r for r in isr if r != follower), None
            )
            self.at_ms(self.out.clock + rng.uniform(2000.0, 90_000.0), self.unflap, p, follower)
            return

    def unflap(self, p: int, follower: int) -> None:
        if follower in self.alive:
            self._expand(self.event_id(), p, follower)

    def reassign_start(self, r: Reassignment) -> None:
        out, cause, eid = self.out, "ZkPartitionReassignment", self.event_id()
        ppt = self.spec.partitions_per_topic
        for p, target in zip(r.partitions, r.targets, strict=True):
            origin = self.assign[p]
            out.other(
                "reassignment",
                cause,
                eid,
                f'"phase":"started","entity":"{self.entity[p]}","topic":"{self.topic_of[p]}","partition":{p % ppt},'
                f'"origin_replicas":{out.isr(origin)},"target_replicas":{out.isr(target)}',
            )
            for b in target:
                if b not in origin:
                    self._replica(cause, eid, p, b, R_GONE, R_NEW)
            self.reassigning[p] = (origin, target, eid)
            if not r.cancel:
                self.at_ms(out.clock + self.rng.uniform(30_000.0, 300_000.0), self.reassign_complete, p)
        if r.cancel:
            self.at_ms(out.clock + self.rng.uniform(10_000.0, 25_000.0), self.reassign_cancel, r)

    def reassign_complete(self, p: int, force: bool = False) -> None:
        """New replicas caught up (AlterIsr), then phase B: leader into the targets, old replicas removed."""
        if p not in self.reassigning:
            return
        origin, target, _ = self.reassigning[p]
        adding = [b for b in target if b not in origin]
        if not force and any(b not in self.alive for b in adding):
            self.at_ms(self.out.clock + 60_000.0, self.reassign_complete, p)
            return
        leader = self.leader[p]
        if leader > 0:
            catch_up = self.event_id()
            for b in adding:
                if b in self.alive:
                    self._isr_change("AlterIsrReceived", catch_up, p, leader, (*self.isr[p], b), None)
        cause, eid = "PartitionReassignmentIsrChange", self.event_id()
        for b in adding:
            self._replica(cause, eid, p, b, R_NEW, R_ONLINE)
            self.hosted[b].add(p)
        if self.leader[p] not in target:
            new_leader = next((b for b in target if b in self.isr[p] and b in self.alive), None)
            if new_leader is not None:
                self._election(cause, eid, p, "reassign", ONLINE, new_leader, self.isr[p], False)
        for b in origin:
            if b in target:
                continue
            self._replica(cause, eid, p, b, R_ONLINE, R_OFFLINE)
            if b in self.isr[p] and len(self.isr[p]) > 1:
                self._isr_change(cause, eid, p, self.leader[p], tuple(r for r in self.isr[p] if r != b), b)
            self._replica(cause, eid, p, b, R_OFFLINE, R_DEL_START)
            self._replica(cause, eid, p, b, R_DEL_START, R_DEL_OK)
            self._replica(cause, eid, p, b, R_DEL_OK, R_GONE)
            self.hosted[b].discard(p)
            self.replica_down[b].discard(p)
        self.assign[p] = target
        self._reassignment_end(p, "completed", origin, target, cause, eid)

    def reassign_cancel(self, r: Reassignment) -> None:
        cause, eid = "ZkPartitionReassignment", self.event_id()
        for p in r.partitions:
            if p not in self.reassigning:
                continue
            origin, target, _ = self.reassigning[p]
            for b in target:
                if b not in origin:
                    self._replica(cause, eid, p, b, R_NEW, R_OFFLINE)
                    self._replica(cause, eid, p, b, R_OFFLINE, R_GONE)
            self._reassignment_end(p, "cancelled", origin, target, cause, eid)

    def _reassignment_end(
        self, p: int, phase: str, origin: tuple[int, ...], target: tuple[int, ...], cause: str, eid: str
    ) -> None:
        out = self.out
        del self.reassigning[p]
        out.other(
            "reassignment",
            cause,
            eid,
            f'"phase":"{phase}","entity":"{self.entity[p]}","topic":"{self.topic_of[p]}",'
            f'"partition":{p % self.spec.partitions_per_topic},"origin_replicas":{out.isr(origin)},'
            f'"target_replicas":{out.isr(target)}',
        )

    def resign(self, new_controller: int) -> None:
        """Controller failover: the old one resigns, the new one takes over a few seconds later."""
        self.out.other("resignation", "Expire", self.event_id(), f'"controller_epoch_resigned":{self.out.epoch}')
        self.at_ms(self.out.clock + self.rng.uniform(2000.0, 8000.0), self.take_over, new_controller)

    def take_over(self, controller_id: int) -> None:
        out = self.out
        elected_at = out.clock
        out.switch_controller(controller_id)
        eid = self.event_id()
        out.clock += self.rng.uniform(300.0, 1500.0)  # reading every znode of a big cluster takes a while
        n = self.spec.partitions
        out.other("states_initialized", "Reelect", eid, f'"machine":"replica","counts":{{"OnlineReplica":{3 * n}}}')
        out.other("states_initialized", "Reelect", eid, f'"machine":"partition","counts":{{"OnlinePartition":{n}}}')
        out.other(
            "failover",
            "Reelect",
            eid,
            f'"elected_at_ms":{elected_at:.3f},"completed_at_ms":{out.clock:.3f},'
            f'"duration_ms":{out.clock - elected_at:.3f},'
            f'"live_brokers":{out.isr(tuple(sorted(self.alive)))},"partitions":{n},"endpoint":"127.0.0.1:9{controller_id:03d}"',
        )
        out.other("state_snapshot", "Reelect", eid, self._snapshot)

    def _snapshot(self) -> str:
        states: dict[str, list[str]] = {}
        for p, entity in enumerate(self.entity):
            states.setdefault("OfflinePartition" if p in self.offline else "OnlinePartition", []).append(entity)
        replicas: dict[str, list[str]] = {}
        for p, replicas_of_p in enumerate(self.assign):
            for b in replicas_of_p:
                state = "OfflineReplica" if p in self.replica_down[b] else "OnlineReplica"
                replicas.setdefault(state, []).append(f"{self.entity[p]}@{b}")
        dumps = json.JSONEncoder(separators=(",", ":")).encode
        return f'"partition_states":{dumps(states)},"replica_states":{dumps(replicas)}'

    def settle(self) -> None:
        """End of day: finish reassignments, fill ISRs, restore preferred leaders (the next day's start)."""
        for p in sorted(self.reassigning):
            self.reassign_complete(p, force=True)
        eid = self.event_id()
        for b in sorted(self.alive):
            for p in sorted(self.hosted[b]):
                self._expand(eid, p, b)
        cause, eid = "AutoPreferredReplicaLeaderElection", self.event_id()
        for p in range(self.spec.partitions):
            preferred = self.assign[p][0]
            if self.leader[p] != preferred and preferred in self.isr[p]:
                self._election(cause, eid, p, "preferred", ONLINE, preferred, self.isr[p], False)
            if self.isr[p] != self.assign[p]:
                self.isr[p] = self.assign[p]  # a reordered ISR is the same set; keep tomorrow's start canonical


def run_day(args: tuple[HistorySpec, DayPlan, str | None]) -> DayResult:
    spec, plan, path = args
    start = datetime.combine(spec.start + timedelta(days=plan.index), datetime.min.time(), tzinfo=UTC)
    out = DayRecords(plan, start.timestamp() * 1000.0, None if path is None else Path(path))
    try:
        SimulatedDay(spec, plan, out).run()
    finally:
        out.close()
    return out.result
