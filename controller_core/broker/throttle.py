"""Replication throttles as Kafka applies them (KIP-73): config names, formats and the quotas.

Kafka's dynamic configs say *how fast* and *which replicas*:

* ``leader.replication.throttled.rate`` / ``follower.replication.throttled.rate``: bytes per second,
  per broker, from ``/config/brokers/<id>`` (falling back to ``/config/brokers/<default>``);
  absent means unlimited.
* ``leader.replication.throttled.replicas`` / ``follower.replication.throttled.replicas``: in
  ``/config/topics/<topic>``, a comma-separated list of ``partition:broker`` pairs, or ``*`` for
  every replica of the topic. A broker throttles, on the leader side, the partitions it leads whose
  pair names it in the leader list and, on the follower side, those it follows whose pair names it in
  the follower list.

As in Kafka, traffic is throttled only for replicas *outside the ISR* (a follower still catching up),
so a throttle never slows down the replication that keeps an in-sync replica in sync. One quota per
broker and direction is shared by all its throttled replicas.

The quota is a token bucket refilled at the rate and holding at most one second of it (Kafka
measures the rate over ``replication.quota.window.size.seconds`` = 1 s windows and stops serving
once the measured rate exceeds the quota; the bucket bounds the same burst and lets a copy's
measured rate land on the set one). Replication here is simulated (docs/broker-agent.md: messages
are counted, ``message_size_bytes`` each), so bytes are messages times the message size and a grant is a
whole number of messages.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from controller_core.model import TopicPartition

LEADER_RATE: Final = "leader.replication.throttled.rate"
FOLLOWER_RATE: Final = "follower.replication.throttled.rate"
LEADER_REPLICAS: Final = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS: Final = "follower.replication.throttled.replicas"
BROKER_RATE_KEYS: Final = (LEADER_RATE, FOLLOWER_RATE)
TOPIC_REPLICA_KEYS: Final = (LEADER_REPLICAS, FOLLOWER_REPLICAS)
ALL_REPLICAS: Final = "*"
#: How much unused quota a broker may bank (Kafka's 1 s quota window).
BURST_S: Final = 1.0

# Kafka's ThrottledReplicaListValidator: "*" or "([0-9]+:[0-9]+)?(,[0-9]+:[0-9]+)*", spaces allowed.
_PAIR: Final = re.compile(r"^\s*([0-9]+)\s*:\s*([0-9]+)\s*$")


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """One topic's throttled replica list: every replica (``*``) or the listed ``(partition, broker)``."""

    everything: bool = False
    pairs: frozenset[tuple[int, int]] = frozenset()

    @classmethod
    def parse(cls, text: str) -> ThrottledReplicas:
        """``"*"``, ``""`` or ``"0:1,0:2,1:3"``; ``ValueError`` names what is wrong."""
        stripped = text.strip()
        if stripped == ALL_REPLICAS:
            return cls(everything=True)
        if not stripped:
            return cls()
        pairs = set()
        for item in stripped.split(","):
            match = _PAIR.match(item)
            if match is None:
                raise ValueError(
                    f"throttled replicas must be '*' or comma-separated partition:broker pairs, got {item.strip()!r}"
                )
            pairs.add((int(match.group(1)), int(match.group(2))))
        return cls(pairs=frozenset(pairs))

    def format(self) -> str:
        """Kafka's text: ``*`` or pairs sorted by partition then broker."""
        if self.everything:
            return ALL_REPLICAS
        return ",".join(f"{p}:{b}" for p, b in sorted(self.pairs))

    def names(self, partition: int, broker: int) -> bool:
        return self.everything or (partition, broker) in self.pairs


def format_pairs(pairs: Iterable[tuple[int, int]]) -> str:
    """``partition:broker`` pairs in Kafka's text form (sorted, deduplicated)."""
    return ThrottledReplicas(pairs=frozenset(pairs)).format()


def parse_rate(text: str | None) -> int | None:
    """A throttle rate in bytes/s: a positive whole number; None when absent. ``ValueError`` otherwise."""
    if text is None:
        return None
    stripped = text.strip()
    if not stripped.isdigit() or int(stripped) <= 0:
        raise ValueError(f"a replication throttle rate must be a positive whole number of bytes/s, got {text!r}")
    return int(stripped)


class Quota:
    """A byte-rate quota shared by threads: a token bucket of at most ``BURST_S`` seconds of rate.

    Starts empty, so the first second is not a free burst and a copy measured from its start runs at
    the rate. ``rate=None`` is unlimited. Thread-safe.
    """

    def __init__(self, rate: int | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._clock = clock
        self._rate: int | None = None
        self._tokens = 0.0
        self._stamp = clock()
        self.bytes_recorded = 0
        self.set_rate(rate)

    @property
    def rate(self) -> int | None:
        return self._rate

    def set_rate(self, rate: int | None) -> None:
        """Change the rate; a lowered rate takes effect at once (the bank is capped to the new burst)."""
        with self._lock:
            self._refill()
            if rate != self._rate:
                self._rate = rate
                if rate is None:
                    self._tokens = 0.0
                else:
                    self._tokens = min(self._tokens, rate * BURST_S)

    def _refill(self) -> None:
        now = self._clock()
        if self._rate is not None:
            self._tokens = min(self._rate * BURST_S, self._tokens + (now - self._stamp) * self._rate)
        self._stamp = now

    def acquire(self, wanted: int, unit: int) -> int:
        """Take up to ``wanted`` bytes in whole ``unit``-byte messages; returns the bytes granted
        (0 when the quota is exhausted for now). Unlimited quotas grant everything."""
        with self._lock:
            if self._rate is None:
                self.bytes_recorded += wanted
                return wanted
            self._refill()
            units = min(wanted // unit, int(self._tokens // unit))
            if units <= 0 and self._rate < unit and self._tokens >= self._rate * BURST_S - 1e-9:
                # A rate below one message per second still moves one message per full bank.
                units = min(1, wanted // unit)
            granted = max(0, units) * unit
            self._tokens -= granted
            self.bytes_recorded += granted
            return granted

    def refund(self, unused: int) -> None:
        """Give back bytes acquired but not used (the other side granted less)."""
        if unused <= 0:
            return
        with self._lock:
            self.bytes_recorded -= unused
            if self._rate is not None:
                self._tokens = min(self._rate * BURST_S, self._tokens + unused)

    def seconds_until(self, unit: int) -> float:
        """How long until one ``unit`` can be granted (0 when it can now)."""
        with self._lock:
            if self._rate is None:
                return 0.0
            self._refill()
            missing = min(unit, self._rate * BURST_S) - self._tokens
            return max(0.0, missing / self._rate)


class ThrottleState:
    """What this broker throttles: both quotas and every topic's throttled replica lists.

    ``set_broker_configs`` and ``set_topic_config`` are called by the config-change listener; the
    replica manager and the fetchers ask ``leader_throttled`` / ``follower_throttled``.
    """

    def __init__(self, broker_id: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.broker_id = broker_id
        self.leader = Quota(clock=clock)
        self.follower = Quota(clock=clock)
        self.leader_replicas: dict[str, ThrottledReplicas] = {}
        self.follower_replicas: dict[str, ThrottledReplicas] = {}
        self.errors: dict[str, str] = {}

    def set_broker_configs(self, own: Mapping[str, str], default: Mapping[str, str]) -> None:
        """Rates from ``/config/brokers/<id>``, else ``/config/brokers/<default>``; a bad value is
        reported in ``errors`` and read as unset (Kafka refuses it at write time)."""
        for key, quota in ((LEADER_RATE, self.leader), (FOLLOWER_RATE, self.follower)):
            source = own if key in own else default
            try:
                rate = parse_rate(source.get(key))
            except ValueError as exc:
                self.errors[f"brokers:{key}"] = str(exc)
                rate = None
            else:
                self.errors.pop(f"brokers:{key}", None)
            quota.set_rate(rate)

    def set_topic_config(self, topic: str, config: Mapping[str, str] | None) -> None:
        """A topic's throttled replica lists (None or no keys: not throttled)."""
        for key, table in ((LEADER_REPLICAS, self.leader_replicas), (FOLLOWER_REPLICAS, self.follower_replicas)):
            text = (config or {}).get(key)
            error_key = f"topics/{topic}:{key}"
            if text is None:
                table.pop(topic, None)
                self.errors.pop(error_key, None)
                continue
            try:
                parsed = ThrottledReplicas.parse(text)
            except ValueError as exc:
                self.errors[error_key] = str(exc)
                table.pop(topic, None)
                continue
            self.errors.pop(error_key, None)
            if parsed.everything or parsed.pairs:
                table[topic] = parsed
            else:
                table.pop(topic, None)

    def leader_throttled(self, tp: TopicPartition) -> bool:
        """Whether this broker, as leader of ``tp``, throttles it (before the ISR check)."""
        if self.leader.rate is None:
            return False
        entry = self.leader_replicas.get(tp.topic)
        return entry is not None and entry.names(tp.partition, self.broker_id)

    def follower_throttled(self, tp: TopicPartition) -> bool:
        """Whether this broker, as follower of ``tp``, throttles it (before the ISR check)."""
        if self.follower.rate is None:
            return False
        entry = self.follower_replicas.get(tp.topic)
        return entry is not None and entry.names(tp.partition, self.broker_id)

    def snapshot(self) -> dict[str, Any]:
        """JSON-ready state for ``GET /v1/state``."""
        return {
            "leader_rate": self.leader.rate,
            "follower_rate": self.follower.rate,
            "leader_bytes_throttled": self.leader.bytes_recorded,
            "follower_bytes_throttled": self.follower.bytes_recorded,
            "leader_replicas": {t: r.format() for t, r in sorted(self.leader_replicas.items())},
            "follower_replicas": {t: r.format() for t, r in sorted(self.follower_replicas.items())},
            "errors": dict(self.errors),
        }
