"""Follower fetching: one thread per source leader broker, fetching all partitions it leads for us.

Kafka's ``ReplicaFetcherManager`` / ``ReplicaFetcherThread``, over ``POST /v1/fetch`` on the leader's
PLAINTEXT listener:

* The replica manager adds partitions when they become followers of a leader (with the leader's
  address from the LeaderAndIsr request's live leaders) and removes them when they lead, stop, or
  follow someone else. A thread whose last partition goes away stops.
* Each round fetches every partition of the thread in one request, from each partition's log end
  offset with its current leader epoch, and applies the answer through the replica manager (which
  skips partitions whose state changed while the request was in flight).
* A partition the leader answers with an error (fenced or unknown epoch, not leader, unknown) is
  retried after ``replica.fetch.backoff.ms``; a failed request (leader down, timeout) backs off every
  partition of the thread. When the leader had nothing new, the thread waits
  ``replica_fetch_wait_ms`` before the next round, as a leader would hold the fetch in Kafka.

Catch-up takes real time: each partition gets at most ``replica.fetch.max.bytes`` per round.

Follower throttle (KIP-73, ``throttle``): a partition followed from outside the ISR with a follower
throttle on it asks for at most what the broker's follower quota grants now and is left out of the
round when the quota is exhausted; what the leader did not send is given back to the quota.
"""

from __future__ import annotations

import http.client
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from controller_core.broker.config import BrokerConfig
from controller_core.broker.replica_manager import FollowerFetchOutcome
from controller_core.broker.throttle import ThrottleState
from controller_core.model import TopicPartition
from controller_core.protocol.client import HttpStatusError, JsonConnection
from controller_core.protocol.messages import (
    FETCH_PATH,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    LiveLeader,
    decode,
    encode,
)

logger = logging.getLogger(__name__)


class FollowerReplicas(Protocol):
    """The replica manager's follower side."""

    @property
    def throttles(self) -> ThrottleState: ...

    def throttled_followers(self, partitions: Iterable[TopicPartition]) -> set[TopicPartition]: ...

    def follower_positions(
        self, leader_id: int, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, tuple[int, int, int]]: ...

    def apply_fetch_response(
        self, leader_id: int, sent: Mapping[TopicPartition, tuple[int, int, int]], response: FetchResponse
    ) -> FollowerFetchOutcome: ...


class ReplicaFetcherThread:
    """Fetches for one leader broker at one address."""

    def __init__(
        self,
        leader: LiveLeader,
        replicas: FollowerReplicas,
        config: BrokerConfig,
        broker_epoch: Callable[[], int],
    ) -> None:
        self.leader_id = leader.id
        self.address = (leader.host or "127.0.0.1", leader.port)
        self._replicas = replicas
        self._config = config
        self._broker_epoch = broker_epoch
        self._connection = JsonConnection(self.address[0], self.address[1], config.request_timeout_ms / 1000.0)
        #: partition -> monotonic time before which it must not be fetched (back-off)
        self._partitions: dict[TopicPartition, float] = {}
        self._cond = threading.Condition()
        self._stopped = threading.Event()
        self.fetches = 0
        self.records = 0
        self.errors = 0
        self.last_error: str | None = None
        self._thread = threading.Thread(
            target=self._run, name=f"replica-fetcher-{config.broker_id}-from-{leader.id}", daemon=True
        )

    def start(self) -> None:
        self._thread.start()

    def add(self, partitions: Iterable[TopicPartition]) -> None:
        with self._cond:
            for tp in partitions:
                self._partitions[tp] = 0.0
            self._cond.notify()

    def remove(self, partitions: Iterable[TopicPartition]) -> None:
        with self._cond:
            for tp in partitions:
                self._partitions.pop(tp, None)

    def partitions(self) -> list[TopicPartition]:
        with self._cond:
            return list(self._partitions)

    def is_idle(self) -> bool:
        with self._cond:
            return not self._partitions

    def stop(self) -> None:
        """Ask the thread to stop and break a request in flight (does not wait)."""
        self._stopped.set()
        with self._cond:
            self._cond.notify_all()
        self._connection.abort()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, timeout: float) -> None:
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout)

    def stats(self) -> dict[str, Any]:
        return {
            "leader_id": self.leader_id,
            "address": f"{self.address[0]}:{self.address[1]}",
            "partitions": len(self._partitions),
            "fetches": self.fetches,
            "records": self.records,
            "errors": self.errors,
            "last_error": self.last_error,
        }

    # -- the fetch loop ----------------------------------------------------------------------------

    def _ready(self) -> list[TopicPartition] | None:
        """Partitions due for a fetch, waiting as needed; None when stopped."""
        with self._cond:
            while not self._stopped.is_set():
                now = time.monotonic()
                ready = [tp for tp, until in self._partitions.items() if until <= now]
                if ready:
                    return ready
                wake = min(self._partitions.values(), default=None)
                self._cond.wait(None if wake is None else max(0.001, wake - now))
        return None

    def _back_off(self, partitions: Iterable[TopicPartition]) -> None:
        until = time.monotonic() + self._config.replica_fetch_backoff_ms / 1000.0
        with self._cond:
            for tp in partitions:
                if tp in self._partitions:
                    self._partitions[tp] = until

    def _run(self) -> None:
        try:
            while True:
                ready = self._ready()
                if ready is None:
                    return
                outcome = self._fetch_once(ready)
                if outcome is not None and outcome.records == 0:
                    self._stopped.wait(self._config.replica_fetch_wait_ms / 1000.0)
        finally:
            self._connection.close()

    def _fetch_once(self, ready: list[TopicPartition]) -> FollowerFetchOutcome | None:
        positions = self._replicas.follower_positions(self.leader_id, ready)
        if not positions:
            # Not following this leader any more; the replica manager is about to remove them.
            self._stopped.wait(self._config.replica_fetch_wait_ms / 1000.0)
            return None
        sizes = {tp: self._config.replica_fetch_max_bytes for tp in positions}
        throttled = self._replicas.throttled_followers(positions)
        if throttled:
            quota = self._replicas.throttles.follower
            unit = self._config.message_size_bytes
            for tp in throttled:
                sizes[tp] = quota.acquire(sizes[tp], unit)
                if sizes[tp] <= 0:
                    del positions[tp]
            if not positions:
                # Everything due is throttled and the quota is spent: wait for it to refill.
                self._stopped.wait(
                    min(max(quota.seconds_until(unit), 0.005), self._config.replica_fetch_wait_ms / 1000.0)
                )
                return None
        request = FetchRequest(
            replica_id=self._config.broker_id,
            max_bytes=self._config.replica_fetch_response_max_bytes,
            partitions=tuple(
                FetchPartition(tp.topic, tp.partition, offset, epoch, log_start, sizes[tp])
                for tp, (offset, epoch, log_start) in positions.items()
            ),
            broker_epoch=self._broker_epoch(),
        )
        try:
            body = self._connection.post(FETCH_PATH, encode(request))
            response = decode(body, FetchResponse, "fetch response")
        except (OSError, http.client.HTTPException, HttpStatusError, ValueError) as exc:
            for tp in throttled & positions.keys():
                self._replicas.throttles.follower.refund(sizes[tp])
            if self._stopped.is_set():
                return None
            self.errors += 1
            message = f"{type(exc).__name__}: {exc}"
            if message != self.last_error:
                logger.warning(
                    "broker %d: fetching from leader %d at %s:%d failed: %s",
                    self._config.broker_id,
                    self.leader_id,
                    *self.address,
                    message,
                )
            self.last_error = message
            self._back_off(positions)
            return None
        self.fetches += 1
        self.last_error = None
        if throttled:
            received = {(p.topic, p.partition): p.records_bytes for p in response.partitions}
            for tp in throttled & positions.keys():
                self._replicas.throttles.follower.refund(sizes[tp] - received.get((tp.topic, tp.partition), 0))
        outcome = self._replicas.apply_fetch_response(self.leader_id, positions, response)
        self.records += outcome.records
        if outcome.failed:
            self.errors += 1
            self._back_off(outcome.failed)
        return outcome


class ReplicaFetcherManager:
    """One fetcher thread per leader broker; implements the replica manager's ``FetcherControl``.

    Called with the replica manager's lock held, so it never waits for a fetcher thread (which may be
    waiting for that lock); stopped threads are joined only by ``shutdown``.

    Example::

        fetchers = ReplicaFetcherManager(replica_manager, config, lambda: replica_manager.broker_epoch)
        fetchers.add_partitions(LiveLeader(2, "127.0.0.1", 9093), [TopicPartition("t", 0)])
    """

    def __init__(self, replicas: FollowerReplicas, config: BrokerConfig, broker_epoch: Callable[[], int]) -> None:
        self._replicas = replicas
        self._config = config
        self._broker_epoch = broker_epoch
        self._threads: dict[int, ReplicaFetcherThread] = {}
        self._stopped: list[ReplicaFetcherThread] = []
        self._lock = threading.Lock()
        self._shut_down = False

    def add_partitions(self, leader: LiveLeader, partitions: Iterable[TopicPartition]) -> None:
        tps = list(partitions)
        with self._lock:
            if self._shut_down or not tps:
                return
            thread = self._threads.get(leader.id)
            address = (leader.host or "127.0.0.1", leader.port)
            if thread is not None and thread.address != address:
                # The leader re-registered elsewhere: everything fetched from it moves to the new address.
                tps = thread.partitions() + tps
                self._retire(thread)
                thread = None
            if thread is None:
                thread = ReplicaFetcherThread(leader, self._replicas, self._config, self._broker_epoch)
                self._threads[leader.id] = thread
                thread.add(tps)
                thread.start()
                logger.info(
                    "broker %d: started fetching %d partitions from broker %d at %s:%d",
                    self._config.broker_id,
                    len(tps),
                    leader.id,
                    *address,
                )
            else:
                thread.add(tps)

    def remove_partitions(self, partitions: Iterable[TopicPartition]) -> None:
        tps = list(partitions)
        with self._lock:
            for thread in list(self._threads.values()):
                thread.remove(tps)
                if thread.is_idle():
                    self._retire(thread)

    def _retire(self, thread: ReplicaFetcherThread) -> None:
        thread.stop()
        self._threads.pop(thread.leader_id, None)
        self._stopped = [t for t in self._stopped if t.alive]
        self._stopped.append(thread)

    def shutdown(self) -> None:
        """Stop every fetcher and wait for them (call without the replica manager's lock)."""
        with self._lock:
            self._shut_down = True
            threads = list(self._threads.values()) + self._stopped
            self._threads.clear()
            self._stopped = []
        for thread in threads:
            thread.stop()
        for thread in threads:
            thread.join(timeout=5.0)

    def stats(self) -> list[dict[str, Any]]:
        with self._lock:
            threads = list(self._threads.values())
        return [t.stats() for t in sorted(threads, key=lambda t: t.leader_id)]
