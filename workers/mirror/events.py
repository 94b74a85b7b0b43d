"""Events the mirror thread processes, in order. Watch callbacks and the stream reader only enqueue."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class MirrorEvent:
    """Base class of everything that goes through the mirror's queue."""


@dataclass(frozen=True, slots=True)
class SessionStateChanged(MirrorEvent):
    state: str  # kazoo's KazooState: CONNECTED, SUSPENDED, LOST


@dataclass(frozen=True, slots=True)
class ControllerChanged(MirrorEvent):
    pass


@dataclass(frozen=True, slots=True)
class BrokersChanged(MirrorEvent):
    pass


@dataclass(frozen=True, slots=True)
class TopicsChanged(MirrorEvent):
    pass


@dataclass(frozen=True, slots=True)
class TopicChanged(MirrorEvent):
    topic: str


@dataclass(frozen=True, slots=True)
class AdminChanged(MirrorEvent):
    pass


@dataclass(frozen=True, slots=True)
class StateChanged(MirrorEvent):
    """A watched partition state znode changed (observed mode: see ``Mirror._watch_unresolved``)."""

    tp: Any  # controller_core.model.TopicPartition


@dataclass(frozen=True, slots=True)
class StreamRecords(MirrorEvent):
    """A batch read from the controller's state-change stream by follower run ``run``."""

    run: int
    last_id: str
    records: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class Resync(MirrorEvent):
    reason: str


@dataclass(frozen=True, slots=True)
class Stop(MirrorEvent):
    pass


@dataclass(frozen=True, slots=True)
class Wakeup(MirrorEvent):
    """Nothing to apply: the writer thread finished a flush (or failed one) and the loop may go on."""
