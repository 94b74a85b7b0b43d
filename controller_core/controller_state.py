"""What the controller is doing right now: Kafka's ``ControllerState`` values, used as metric labels.

The numeric values are Kafka's (reference §7.3), so the ``ControllerState`` gauge reads the same as
a Kafka controller's JMX gauge on a Grafana board.
"""

from __future__ import annotations

from enum import IntEnum


class ControllerState(IntEnum):
    IDLE = 0
    CONTROLLER_CHANGE = 1
    BROKER_CHANGE = 2
    TOPIC_CHANGE = 3
    TOPIC_DELETION = 4
    ALTER_PARTITION_REASSIGNMENT = 5
    AUTO_LEADER_BALANCE = 6
    MANUAL_LEADER_BALANCE = 7
    CONTROLLED_SHUTDOWN = 8
    ISR_CHANGE = 9
    LEADER_AND_ISR_RESPONSE_RECEIVED = 10
    LOG_DIR_CHANGE = 11
    CONTROLLER_SHUTDOWN = 12
    UNCLEAN_LEADER_ELECTION_ENABLE = 13
    TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE = 14
    LIST_PARTITION_REASSIGNMENT = 15
    UPDATE_METADATA_RESPONSE_RECEIVED = 16

    @property
    def timer_name(self) -> str | None:
        """Kafka's ``<State>RateAndTimeMs`` metric name (None for states without a timer)."""
        if self in (ControllerState.IDLE, ControllerState.UPDATE_METADATA_RESPONSE_RECEIVED):
            return None
        if self is ControllerState.BROKER_CHANGE:
            return "LeaderElectionRateAndTimeMs"
        if self is ControllerState.ALTER_PARTITION_REASSIGNMENT:
            return "PartitionReassignmentRateAndTimeMs"
        camel = "".join(part.capitalize() for part in self.name.split("_"))
        return f"{camel}RateAndTimeMs"
