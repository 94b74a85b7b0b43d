"""Auto leader rebalance that waits for catch-up (issue #29, item 4; ``leader_imbalance_min_isr_seconds``).

Kafka's auto rebalance moves leadership back to a preferred replica as soon as it is in the ISR, which
can put a replica that rejoined a moment ago, with cold caches, in front of every client. With
``leader_imbalance_min_isr_seconds`` = T > 0 the controller moves it only once the partition's
leader-and-ISR state has stayed the same for T seconds with the preferred replica in the ISR (the
same conservative rule the dashboard's catch-up election uses with the state znode's age: any ISR or
leader change restarts the count).

The controller only knows the states it wrote or read, so the age is measured from when this
controller first saw the current state version (at failover every state counts as just seen: a new
controller waits T before its first catch-up rebalance). Lag in messages is not known to the
controller (Kafka's controller does not know it either); the dashboard's catch-up election checks it
through the broker agents.

Pure and single-threaded: called from the controller's event thread.
"""

from __future__ import annotations

from collections.abc import Iterable

from controller_core.model import LeaderAndIsr, TopicPartition


class IsrTenure:
    """When each partition's current leader-and-ISR version was first seen."""

    def __init__(self) -> None:
        self._seen: dict[TopicPartition, tuple[int, int, float]] = {}

    def age(self, tp: TopicPartition, state: LeaderAndIsr, now: float) -> float:
        """Seconds since ``state`` (by leader epoch and znode version) was first seen for ``tp``."""
        key = (state.leader_epoch, state.zk_version)
        seen = self._seen.get(tp)
        if seen is None or seen[:2] != key:
            self._seen[tp] = (*key, now)
            return 0.0
        return now - seen[2]

    def ready(self, tp: TopicPartition, state: LeaderAndIsr, preferred: int, min_isr_s: float, now: float) -> bool:
        """Whether ``preferred`` may lead ``tp`` now: in the ISR of a state unchanged for ``min_isr_s``."""
        age = self.age(tp, state, now)
        return preferred in state.isr and (min_isr_s <= 0 or age >= min_isr_s)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._seen.pop(tp, None)
