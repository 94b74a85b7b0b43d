"""Controller settings, with Kafka's names and defaults (reference §11).

Frozen, so that every collaborator sees the same values for the life of a controller.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ControllerConfig:
    controller_id: int
    zookeeper_connect: str
    zookeeper_session_timeout_s: float = 10.0
    #: host:port the controller's API (AlterIsr, ControlledShutdown) listens on; port 0 = any free port.
    api_host: str = "127.0.0.1"
    api_port: int = 0
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: float = 300.0
    #: Kafka schedules the first rebalance check 5 s after failover.
    first_rebalance_delay_seconds: float = 5.0
    #: Not Kafka's: the auto rebalance moves leadership to a preferred replica only once it has been
    #: in an unchanged ISR this long (0 = at once, as Kafka does; controller_core.rebalance_catchup).
    leader_imbalance_min_isr_seconds: float = 0.0
    unclean_leader_election_enable: bool = False
    delete_topic_enable: bool = True
    #: Many writes per multi (off only for the "unbatched" benchmark baseline: one fenced write per
    #: partition, pipelined, the way Kafka 1.1 writes).
    batched_writes: bool = True
    #: Elections and ISR shrinks write conditionally on the cached state's version first and read
    #: ZooKeeper only for conflicts (controller_core.cached_states); False reads every state first, as
    #: Kafka does. Both are equally safe: the write is conditional either way.
    decide_from_cache: bool = True
    #: Kafka's ``controller.socket.timeout.ms``: how long one attempt to deliver a control request
    #: waits for the broker's answer before the connection is dropped and the request resent. A
    #: broker applying a LeaderAndIsr for hundreds of thousands of partitions can need longer.
    request_timeout_s: float = 30.0
    #: The brokers' ``zookeeper.session.timeout.ms`` (Kafka's default, 18 s): a broker that died was
    #: gone about this long before its registration vanished, which the state-change log records as
    #: the estimated start of its partitions' outage (``session_lost_ms`` on ``broker_change``).
    broker_session_timeout_s: float = 18.0
    #: Keep the failover's reads current from ZooKeeper while standing by (controller_core.standby),
    #: so that taking over reads only what changed; False: every failover reads everything (cold).
    warm_standby: bool = True

    def __post_init__(self) -> None:
        if self.request_timeout_s <= 0:
            raise ValueError(f"the request timeout must be positive, got {self.request_timeout_s}")
        if self.controller_id < 0:
            raise ValueError(f"controller id must be >= 0, got {self.controller_id}")
        if not 0 <= self.leader_imbalance_per_broker_percentage <= 100:
            raise ValueError("leader.imbalance.per.broker.percentage must be within 0..100")
        if self.leader_imbalance_check_interval_seconds <= 0:
            raise ValueError("leader.imbalance.check.interval.seconds must be positive")
        if not self.leader_imbalance_min_isr_seconds >= 0:
            raise ValueError(
                "the auto rebalance's minimum time in the ISR must be >= 0 s, "
                f"got {self.leader_imbalance_min_isr_seconds}"
            )
