"""Controller events: small frozen values that know their metric state and how to fail fast.

Watch callbacks and API handlers create these and put them on the event queue; only the event
thread acts on them (``Controller.process``). ``preempt`` is called instead of processing when the
queue is cleared (session expiry, shutdown): events that carry a caller's callback answer it with
NOT_CONTROLLER there, so no caller waits forever.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from controller_core.controller_state import ControllerState
from controller_core.model import TopicPartition


class ElectionType(StrEnum):
    PREFERRED = "preferred"
    UNCLEAN = "unclean"


class ElectionTrigger(StrEnum):
    ZK = "zk"  # /admin/preferred_replica_election
    ADMIN = "admin"  # the controller's API
    AUTO = "auto"  # auto leader rebalance


@dataclass(frozen=True, eq=False)
class ControllerEvent:
    """Base of every event. ``state`` is what the controller reports while handling it."""

    state: ClassVar[ControllerState] = ControllerState.IDLE

    def preempt(self) -> None:
        """Called instead of processing when the queue is cleared; answer any waiting caller."""


@dataclass(frozen=True, eq=False)
class Startup(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, eq=False)
class ControllerChange(ControllerEvent):
    """``/controller`` was created or changed."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, eq=False)
class Reelect(ControllerEvent):
    """``/controller`` was deleted: resign if we were active, then compete."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, eq=False)
class Expire(ControllerEvent):
    """The ZooKeeper session is lost: resign at once (enqueued with ``clear_and_put``)."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, eq=False)
class Suspend(ControllerEvent):
    """The connection is suspended: leadership may not hold, so stop acting until it returns."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, eq=False)
class Reconnected(ControllerEvent):
    """The connection came back within the session: verify we still hold ``/controller``."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, eq=False)
class RegisterAndReelect(ControllerEvent):
    """A new session exists after an expiry: re-arm watches and compete again."""

    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_CHANGE


@dataclass(frozen=True, eq=False)
class BrokerChange(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE


@dataclass(frozen=True, eq=False)
class BrokerModifications(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.BROKER_CHANGE
    broker_id: int


@dataclass(frozen=True, eq=False)
class TopicChange(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE


@dataclass(frozen=True, eq=False)
class PartitionModifications(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_CHANGE
    topic: str


@dataclass(frozen=True, eq=False)
class TopicDeletion(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION


@dataclass(frozen=True, eq=False)
class TopicDeletionStopReplicaResponseReceived(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.TOPIC_DELETION
    broker_id: int
    request_error: int
    partition_errors: Mapping[TopicPartition, int]


@dataclass(frozen=True, eq=False)
class ZkPartitionReassignment(ControllerEvent):
    """``/admin/reassign_partitions`` was created (or must be re-read)."""

    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT


@dataclass(frozen=True, eq=False)
class PartitionReassignmentIsrChange(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT
    topic_partition: TopicPartition


@dataclass(frozen=True, eq=False)
class ApiPartitionReassignment(ControllerEvent):
    """AlterPartitionReassignments from the controller's API: partition -> target, None = cancel.

    ``callback(error_code, {partition: (error_code, message)})`` answers the caller.
    """

    state: ClassVar[ControllerState] = ControllerState.ALTER_PARTITION_REASSIGNMENT
    reassignments: Mapping[TopicPartition, tuple[int, ...] | None]
    callback: Callable[[int, Mapping[TopicPartition, tuple[int, str]]], None]

    def preempt(self) -> None:
        from controller_core.protocol.messages import ErrorCode

        self.callback(int(ErrorCode.NOT_CONTROLLER), {})


@dataclass(frozen=True, eq=False)
class ReplicaLeaderElection(ControllerEvent):
    """Preferred or unclean elections, from ZooKeeper, the API or the auto balancer."""

    state: ClassVar[ControllerState] = ControllerState.MANUAL_LEADER_BALANCE
    partitions: frozenset[TopicPartition] | None
    election_type: ElectionType = ElectionType.PREFERRED
    trigger: ElectionTrigger = ElectionTrigger.ZK
    callback: Callable[[Mapping[TopicPartition, Any]], None] | None = None

    def preempt(self) -> None:
        if self.callback is not None:
            self.callback(dict.fromkeys(self.partitions or (), "NOT_CONTROLLER"))


@dataclass(frozen=True, eq=False)
class AutoPreferredReplicaLeaderElection(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.AUTO_LEADER_BALANCE


@dataclass(frozen=True, eq=False)
class ControlledShutdown(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.CONTROLLED_SHUTDOWN
    broker_id: int
    broker_epoch: int
    callback: Callable[[int, Sequence[TopicPartition]], None]

    def preempt(self) -> None:
        from controller_core.protocol.messages import ErrorCode

        self.callback(int(ErrorCode.NOT_CONTROLLER), ())


@dataclass(frozen=True, eq=False)
class AlterIsrReceived(ControllerEvent):
    """A leader proposes new ISRs (AlterIsr): ``partitions`` maps to (leader_epoch, new_isr, zk_version)."""

    state: ClassVar[ControllerState] = ControllerState.ISR_CHANGE
    broker_id: int
    broker_epoch: int
    partitions: Mapping[TopicPartition, tuple[int, tuple[int, ...], int]]
    callback: Callable[[int, Mapping[TopicPartition, Any]], None]

    def preempt(self) -> None:
        from controller_core.protocol.messages import ErrorCode

        self.callback(int(ErrorCode.NOT_CONTROLLER), {})


@dataclass(frozen=True, eq=False)
class IsrChangeNotification(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.ISR_CHANGE


@dataclass(frozen=True, eq=False)
class LogDirEventNotification(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.LOG_DIR_CHANGE


@dataclass(frozen=True, eq=False)
class LeaderAndIsrResponseReceived(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED
    broker_id: int
    response: Any


@dataclass(frozen=True, eq=False)
class TopicConfigChange(ControllerEvent):
    """A topic's ``/config/topics/<t>`` changed (unclean election may have been enabled)."""

    state: ClassVar[ControllerState] = ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE
    topic: str


@dataclass(frozen=True, eq=False)
class ShutdownEventThread(ControllerEvent):
    state: ClassVar[ControllerState] = ControllerState.CONTROLLER_SHUTDOWN


@dataclass(frozen=True, eq=False)
class Probe(ControllerEvent):
    """Runs ``action`` on the event thread: for status queries that must see a consistent context."""

    action: Callable[[], None] = field(default=lambda: None)
