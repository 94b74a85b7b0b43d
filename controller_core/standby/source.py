"""What a failover reads, from the warm view when it is proven current, else from ZooKeeper.

``Controller._initialize_controller_context`` reads four things, in this order: the registered
brokers, the topic names (then it arms each topic's watches), the assignments of those topics, and the
partition states of the assigned partitions. ``FailoverSource`` answers the same four calls as
``ZkStore`` and keeps the cold path's reasoning about watches:

* brokers: after a first catch-up (the ``/brokers/ids`` child watch was armed before it, so a later
  change fires the controller's BrokerChange, exactly as after the cold read);
* topic names: the view as it is then (at least as current as that catch-up);
* assignments and states: after a second catch-up, made *after* the topic watches were armed, so any
  change the view misses fired one of those watches; then the follower stops (``freeze``) and the
  view is handed over without copying (its values are immutable model objects, shared with the
  context).

Any step that cannot be proven current (the follower is cold, a catch-up times out, the session
dropped) falls back to the store for that read and every later one: mixing is safe because each read,
from either side, is at least as current as the watch that covers what follows it. ``path`` is
``"warm"`` only when every read came from the view.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Sequence
from typing import Any

from controller_core.model import BrokerRegistration, LeaderIsrAndControllerEpoch, TopicPartition
from controller_core.standby.follower import StandbyFollower
from controller_core.standby.view import ClusterView
from controller_core.zk.codecs import TopicAssignment


class FailoverSource:
    """The four failover reads (``ZkStore``'s names), warm when possible; see the module docstring."""

    def __init__(self, follower: StandbyFollower | None, store: Any) -> None:
        self._follower = follower
        self._store = store
        self._view: ClusterView | None = None
        self._warm = follower is not None and follower.is_warm
        self.reason = "following ZooKeeper" if self._warm else (follower.reason if follower else "no standby")
        self.catch_up_ms = 0.0
        self.reads_from_store: list[str] = []

    @property
    def path(self) -> str:
        return "warm" if self._warm and not self.reads_from_store else "cold"

    def _catch_up(self) -> bool:
        if not self._warm or self._follower is None:
            return False
        started = time.perf_counter()
        ok = self._follower.catch_up()
        self.catch_up_ms += (time.perf_counter() - started) * 1000
        if not ok:
            self._cold(self._follower.reason)
        return ok

    def _cold(self, reason: str) -> None:
        if self._warm:
            self._warm = False
            self.reason = reason

    def get_all_broker_registrations(self) -> dict[int, BrokerRegistration]:
        if self._follower is not None and self._catch_up():
            return self._follower.brokers()
        self.reads_from_store.append("brokers")
        return dict(self._store.get_all_broker_registrations())

    def get_all_topics(self) -> set[str]:
        if self._warm and self._follower is not None:
            return self._follower.topic_names()
        self.reads_from_store.append("topics")
        return set(self._store.get_all_topics())

    def get_replica_assignments(self, topics: Collection[str]) -> dict[str, TopicAssignment]:
        if self._follower is not None and self._catch_up():
            self._view = self._follower.freeze()
            if self._view is None:
                self._cold(self._follower.reason)
        if self._view is not None and self._warm:
            return self._view.assignments_for(topics)
        self.reads_from_store.append("assignments")
        return dict(self._store.get_replica_assignments(topics))

    def get_partition_leadership(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        if self._view is not None and self._warm:
            return self._view.leadership_for(partitions)
        self.reads_from_store.append("partition_states")
        return dict(self._store.get_partition_leadership(partitions))

    def finish(self) -> dict[str, Any]:
        """Stop the follower (the candidate is active now) and say how this failover read its state."""
        if self._follower is not None:
            self._follower.pause()
        self._view = None
        return {
            "path": self.path,
            "standby": self.reason if self.path == "cold" else "caught up to the election",
            "standby_catch_up_ms": round(self.catch_up_ms, 1),
        }
