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
from typing import Any, ClassVar, dataclass_transform

from controller_core.controller_state import ControllerState
from controller_core.model import TopicPartition


class ElectionType(StrEnum):
    PREFERRED = "preferred"
    UNCLEAN = "unclean"


class ElectionTrigger(StrEnum):
    ZK = "zk"  # /admin/preferred_replica_election
    ADMIN = "admin"  # the controller's API
    AUTO = "auto"  # auto leader rebalance


@dataclass_transform(frozen_default=True, eq_default=False, field_specifiers=(field,))
class ControllerEvent:
    """Base of every event. ``state`` is what the controller reports while handling it.

    Every subclass is a frozen dataclass compared by identity (two equal-looking events are still
    two events on the queue) and names its state as a class keyword:
    ``class BrokerChange(ControllerEvent, state=ControllerState.BROKER_CHANGE)``.
    """

    state: ClassVar[ControllerState] = ControllerState.IDLE

    def __init_subclass__(cls, *, state: ControllerState | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if state is not None:
            cls.state = state
        dataclass(frozen=True, eq=False)(cls)

    def preempt(self) -> None:
        """Called instead of processing when the queue is cleared; answer any waiting caller."""


class Startup(ControllerEvent, state=ControllerState.CONTROLLER_CHANGE):
    """The controller process starts: register the watches and compete for ``/controller``."""


class ControllerChange(ControllerEvent, state=ControllerState.CONTROLLER_CHANGE):
    """``/controller`` was created or changed."""


class Reelect(ControllerEvent, state=ControllerState.CONTROLLER_CHANGE):
    """``/controller`` was deleted: resign if we were active, then compete."""


class Expire(ControllerEvent, state=ControllerState.CONTROLLER_CHANGE):
    """The ZooKeeper session is lost: resign at once (enqueued with ``clear_and_put``)."""


class Suspend(ControllerEvent, state=ControllerState.CONTROLLER_CHANGE):
    """The connection is suspended: leadership may not hold, so stop acting until it returns."""


class Reconnected(ControllerEvent, state=ControllerState.CONTROLLER_CHANGE):
    """The connection came back within the session: verify we still hold ``/controller``."""


class RegisterAndReelect(ControllerEvent, state=ControllerState.CONTROLLER_CHANGE):
    """A new session exists after an expiry: re-arm watches and compete again."""


class BrokerChange(ControllerEvent, state=ControllerState.BROKER_CHANGE):
    """``/brokers/ids`` children changed: brokers came or went."""


class BrokerModifications(ControllerEvent, state=ControllerState.BROKER_CHANGE):
    """``/brokers/ids/<id>`` changed: a live broker's registration (endpoints, features)."""

    broker_id: int


class TopicChange(ControllerEvent, state=ControllerState.TOPIC_CHANGE):
    """``/brokers/topics`` children changed: topics were created."""


class PartitionModifications(ControllerEvent, state=ControllerState.TOPIC_CHANGE):
    """``/brokers/topics/<topic>`` changed: partitions were added to the topic."""

    topic: str


class TopicDeletion(ControllerEvent, state=ControllerState.TOPIC_DELETION):
    """``/admin/delete_topics`` children changed: topics were queued for deletion."""


class TopicDeletionStopReplicaResponseReceived(ControllerEvent, state=ControllerState.TOPIC_DELETION):
    """A broker answered StopReplica (delete) for partitions of topics being deleted."""

    broker_id: int
    request_error: int
    partition_errors: Mapping[TopicPartition, int]


class ZkPartitionReassignment(ControllerEvent, state=ControllerState.ALTER_PARTITION_REASSIGNMENT):
    """``/admin/reassign_partitions`` was created (or must be re-read)."""


class PartitionReassignmentIsrChange(ControllerEvent, state=ControllerState.ALTER_PARTITION_REASSIGNMENT):
    """A reassigning partition's ISR changed: its target replicas may have caught up."""

    topic_partition: TopicPartition


class ApiPartitionReassignment(ControllerEvent, state=ControllerState.ALTER_PARTITION_REASSIGNMENT):
    """AlterPartitionReassignments from the controller's API: partition -> target, None = cancel.

    ``callback(error_code, {partition: (error_code, message)})`` answers the caller.
    """

    reassignments: Mapping[TopicPartition, tuple[int, ...] | None]
    callback: Callable[[int, Mapping[TopicPartition, tuple[int, str]]], None]

    def preempt(self) -> None:
        from controller_core.protocol.messages import ErrorCode

        self.callback(int(ErrorCode.NOT_CONTROLLER), {})


class ReplicaLeaderElection(ControllerEvent, state=ControllerState.MANUAL_LEADER_BALANCE):
    """Preferred or unclean elections, from ZooKeeper, the API or the auto balancer."""

    partitions: frozenset[TopicPartition] | None
    election_type: ElectionType = ElectionType.PREFERRED
    trigger: ElectionTrigger = ElectionTrigger.ZK
    callback: Callable[[Mapping[TopicPartition, Any]], None] | None = None

    def preempt(self) -> None:
        if self.callback is not None:
            self.callback(dict.fromkeys(self.partitions or (), "NOT_CONTROLLER"))


class AutoPreferredReplicaLeaderElection(ControllerEvent, state=ControllerState.AUTO_LEADER_BALANCE):
    """The auto leader rebalance timer fired: check every broker's imbalance."""


class ControlledShutdown(ControllerEvent, state=ControllerState.CONTROLLED_SHUTDOWN):
    broker_id: int
    broker_epoch: int
    callback: Callable[[int, Sequence[TopicPartition]], None]

    def preempt(self) -> None:
        from controller_core.protocol.messages import ErrorCode

        self.callback(int(ErrorCode.NOT_CONTROLLER), ())


class AlterIsrReceived(ControllerEvent, state=ControllerState.ISR_CHANGE):
    """A leader proposes new ISRs (AlterIsr): ``partitions`` maps to (leader_epoch, new_isr, zk_version)."""

    broker_id: int
    broker_epoch: int
    partitions: Mapping[TopicPartition, tuple[int, tuple[int, ...], int]]
    callback: Callable[[int, Mapping[TopicPartition, Any]], None]

    def preempt(self) -> None:
        from controller_core.protocol.messages import ErrorCode

        self.callback(int(ErrorCode.NOT_CONTROLLER), {})


class IsrChangeNotification(ControllerEvent, state=ControllerState.ISR_CHANGE):
    """``/isr_change_notification`` children changed: brokers without AlterIsr shrank or grew ISRs."""


class LogDirEventNotification(ControllerEvent, state=ControllerState.LOG_DIR_CHANGE):
    """``/log_dir_event_notification`` children changed: a broker lost a log directory."""


class LeaderAndIsrResponseReceived(ControllerEvent, state=ControllerState.LEADER_AND_ISR_RESPONSE_RECEIVED):
    """A broker answered LeaderAndIsr: replicas on its failed log directories go offline. ``response``:
    the answer as digested on the sender thread (``answer_digest.LeaderAndIsrAnswer``), or as decoded."""

    broker_id: int
    response: Any


class StateSnapshotDue(ControllerEvent, state=ControllerState.CONTROLLER_CHANGE):
    """Failover number ``failover``'s requests were all answered (or a request timeout passed): time
    for its state-snapshot record (``Controller._on_state_snapshot_due``)."""

    failover: int


class TopicConfigChange(ControllerEvent, state=ControllerState.TOPIC_UNCLEAN_LEADER_ELECTION_ENABLE):
    """A topic's ``/config/topics/<t>`` changed (unclean election may have been enabled)."""

    topic: str


class ShutdownEventThread(ControllerEvent, state=ControllerState.CONTROLLER_SHUTDOWN):
    """The controller stops: the last event its thread handles."""


class Probe(ControllerEvent):
    """Runs ``action`` on the event thread: for status queries that must see a consistent context."""

    action: Callable[[], None] = field(default=lambda: None)
