"""Broker agent settings, with Kafka's names (and defaults, except where the demo needs faster ones).

Frozen, so that every component of one agent sees the same values for its whole life. Times are in
milliseconds as in Kafka's configs; the ``*_s`` helpers convert for ``time``/``threading`` calls.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from pathlib import Path


class Acks(IntEnum):
    """The producer's ``acks``: 0 (fire and forget), 1 (leader wrote it), -1 = all (the ISR has it)."""

    NONE = 0
    LEADER = 1
    ALL = -1

    @classmethod
    def parse(cls, text: str) -> Acks:
        """Parse ``0``, ``1``, ``all`` or ``-1``."""
        value = text.strip().lower()
        if value in {"all", "-1"}:
            return cls.ALL
        if value in {"0", "1"}:
            return cls(int(value))
        raise ValueError(f"acks must be 0, 1 or all, got {text!r}")


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Everything one broker agent needs to know; validated on construction."""

    broker_id: int
    zookeeper_connect: str
    host: str = "127.0.0.1"
    #: Port of the PLAINTEXT (replication) and CONTROL (controller requests) listeners; 0 = any free port.
    port: int = 0
    #: Host written into the registration; defaults to ``host`` (set it when binding 0.0.0.0).
    advertised_host: str | None = None
    rack: str | None = None
    zookeeper_session_timeout_ms: int = 18_000
    #: Synthetic produce load: messages per second on every partition this broker leads (0 = none).
    produce_rate: float = 0.0
    acks: Acks = Acks.LEADER
    message_size_bytes: int = 512
    min_insync_replicas: int = 1
    #: Kafka's default is 30000; 10 s keeps the demo's ISR reactions visible.
    replica_lag_time_max_ms: int = 10_000
    replica_fetch_max_bytes: int = 1024 * 1024
    replica_fetch_response_max_bytes: int = 10 * 1024 * 1024
    #: How long a follower waits before fetching again when the leader had nothing new.
    replica_fetch_wait_ms: int = 100
    #: Back-off after a failed fetch (Kafka: ``replica.fetch.backoff.ms``).
    replica_fetch_backoff_ms: int = 500
    request_timeout_ms: int = 30_000
    controlled_shutdown_enable: bool = True
    controlled_shutdown_max_retries: int = 3
    controlled_shutdown_retry_backoff_ms: int = 5_000
    #: Back-off before resending a failed AlterIsr (Kafka's AlterIsrManager retries after 50 ms;
    #: a little longer avoids hammering a controller that is failing over).
    alter_isr_retry_backoff_ms: int = 200
    #: Replication off (no fetchers, no produce, no ISR changes), requests still fully answered:
    #: for benchmarks with 100,000 partitions per broker.
    lightweight: bool = False
    #: Where logs are checkpointed (log start, end offset, HW, epochs); None keeps them in memory only.
    data_dir: Path | None = None
    checkpoint_interval_ms: int = 5_000
    features: dict[str, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.broker_id < 0:
            raise ValueError(f"broker id must be >= 0, got {self.broker_id}")
        if not self.zookeeper_connect:
            raise ValueError("zookeeper connect string is empty")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be within 0..65535, got {self.port}")
        if self.produce_rate < 0:
            raise ValueError(f"produce rate must be >= 0 messages/s, got {self.produce_rate}")
        if self.min_insync_replicas < 1:
            raise ValueError(f"min.insync.replicas must be >= 1, got {self.min_insync_replicas}")
        if self.message_size_bytes < 1:
            raise ValueError(f"message size must be >= 1 byte, got {self.message_size_bytes}")
        for name in (
            "zookeeper_session_timeout_ms",
            "replica_lag_time_max_ms",
            "replica_fetch_max_bytes",
            "replica_fetch_response_max_bytes",
            "replica_fetch_wait_ms",
            "replica_fetch_backoff_ms",
            "request_timeout_ms",
            "alter_isr_retry_backoff_ms",
            "checkpoint_interval_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name.replace('_', '.')} must be positive, got {getattr(self, name)}")
        if self.controlled_shutdown_max_retries < 1:
            raise ValueError("controlled.shutdown.max.retries must be >= 1")
        if self.controlled_shutdown_retry_backoff_ms < 0:
            raise ValueError("controlled.shutdown.retry.backoff.ms must be >= 0")
        if self.rack is not None and not self.rack:
            raise ValueError("rack must be a non-empty string when given")

    @property
    def registered_host(self) -> str:
        return self.advertised_host or self.host

    @property
    def records_per_partition_fetch(self) -> int:
        """How many synthetic messages fit in one partition's share of a fetch."""
        return max(1, self.replica_fetch_max_bytes // self.message_size_bytes)
