"""The seams between the controller's logic and the outside world, as Protocols.

The state machines talk to ZooKeeper only through ``PartitionStateStore`` (implemented over kazoo by
``controller_core.zk.store.ZkStore``, and by an in-memory fake with the same version and epoch
invariants for unit tests). Requests to brokers leave through ``RequestTransport`` (implemented by
the broker channel), and state changes through ``StateChangeSink`` (``state_change_log``).

Every write method that takes ``expected_controller_epoch_zk_version`` is *fenced*: it runs in a
ZooKeeper multi that first checks the version of ``/controller_epoch`` and raises
``ControllerMovedError`` when that check fails, leaving every znode untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol

import msgspec

from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, TopicPartition


class ZkCode(StrEnum):
    """The ZooKeeper result codes the controller distinguishes (names as in Kafka's ``Code``)."""

    OK = "OK"
    NO_NODE = "NONODE"
    NODE_EXISTS = "NODEEXISTS"
    BAD_VERSION = "BADVERSION"
    NOT_EMPTY = "NOTEMPTY"
    CONNECTION_LOSS = "CONNECTIONLOSS"
    SESSION_EXPIRED = "SESSIONEXPIRED"
    RUNTIME_INCONSISTENCY = "RUNTIMEINCONSISTENCY"
    OTHER = "OTHER"


class PartitionStateRead(msgspec.Struct, frozen=True, gc=False):
    """The result of reading one ``.../partitions/<p>/state`` znode.

    ``state`` is set when ``code`` is OK and the JSON decoded; its ``leader_and_isr.zk_version`` is
    the znode's data version. A frozen ``msgspec.Struct`` (built in C, not GC-tracked) because a
    failover makes one per partition.
    """

    code: ZkCode
    state: LeaderIsrAndControllerEpoch | None = None


@dataclass(slots=True)
class UpdateLeaderAndIsrResult:
    """Outcome of a batched, conditional write of partition states.

    ``finished`` maps each partition to its new ``LeaderAndIsr`` (carrying the new zk version) or to
    the exception that failed it; ``needs_retry`` lists the partitions whose write hit BADVERSION.
    """

    finished: dict[TopicPartition, LeaderAndIsr | Exception] = field(default_factory=dict)
    needs_retry: list[TopicPartition] = field(default_factory=list)


LeaderAndIsrWrite = tuple[TopicPartition, LeaderAndIsr | Exception | None]
"""One partition's outcome of a conditional state write: the new ``LeaderAndIsr`` (with its new zk
version), the exception that failed it, or None for BADVERSION (re-read and retry)."""


class PartitionStateStore(Protocol):
    """What the replica and partition state machines need from ZooKeeper."""

    def get_partition_states(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, PartitionStateRead]:
        """Read state znodes in bulk (multi-read where available)."""
        ...

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, ZkCode]:
        """Create ``/brokers/topics/<t>/partitions[/<p>]`` parents (NODEEXISTS ignored) then the state
        znodes; fenced; per-partition result code of the state-znode create."""
        ...

    def update_leader_and_isr_iter(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> Iterator[LeaderAndIsrWrite]:
        """Conditionally set each state znode (expected version = ``LeaderAndIsr.zk_version``),
        writing ``controller_epoch`` into the JSON; fenced; batched. Each partition's outcome comes
        once, in the order of ``states``, as soon as it is known, so the caller's work overlaps the
        writes still in flight. ``ControllerMovedError`` is raised after the outcomes already yielded
        (those writes were made while this controller held the epoch)."""
        ...

    def get_topic_configs(self, topics: Collection[str]) -> dict[str, Mapping[str, str]]:
        """Each topic's overrides from ``/config/topics/<t>`` (empty when absent)."""
        ...


class RequestTransport(Protocol):
    """Delivers controller requests to brokers (the broker channel implements it).

    ``send`` must not block: it queues the request for ``broker_id`` (dropping it, with a warning,
    for a broker that has no queue) and later calls ``callback`` with the broker's response.
    """

    def send(
        self,
        broker_id: int,
        request: Any,
        callback: Callable[[Any], None] | None = None,
    ) -> None: ...


class StateChangeSink(Protocol):
    """Receives every state-change record (JSON-ready dict) in order."""

    def emit(self, record: Mapping[str, Any]) -> None: ...

    def flush(self) -> None: ...
