"""The watch registry when kazoo hands it events out of order.

kazoo runs watch callbacks and the completions of async requests on two different threads, so the
answer to the re-arm read a watch event sent can be handled *after* the next watch event. These
tests drive the registry with a scripted client to put the two in exactly that order (CI saw it as a
spurious CREATED after a node's deletion, test_zk_watchers.py).
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
from kazoo.protocol.states import EventType, KeeperState, WatchedEvent

from controller_core.zk.watchers import WatchEvent, WatchEventType, WatchRegistry

pytestmark = pytest.mark.unit


class Pending:
    """An async read whose answer the test delivers when it chooses."""

    def __init__(self) -> None:
        self._value: Any = None
        self._link: Callable[[Pending], None] | None = None

    def rawlink(self, fn: Callable[[Pending], None]) -> None:
        self._link = fn

    def get(self, block: bool = True) -> Any:
        return self._value

    def answer(self, value: Any) -> None:
        self._value = value
        assert self._link is not None
        self._link(self)


class ScriptedClient:
    connected = True

    def __init__(self) -> None:
        self.reads: list[Pending] = []
        self.watch: Callable[[WatchedEvent], None] | None = None

    def add_listener(self, listener: Any) -> None: ...

    def remove_listener(self, listener: Any) -> None: ...

    def exists(self, path: str, watch: Callable[[WatchedEvent], None]) -> Any:
        self.watch = watch
        return None  # the node does not exist yet

    def exists_async(self, path: str, watch: Callable[[WatchedEvent], None]) -> Pending:
        pending = Pending()
        self.reads.append(pending)
        return pending

    def fire(self, kind: EventType) -> Pending:
        """Deliver a watch event; return the re-arm read it sent (not answered yet)."""
        assert self.watch is not None
        self.watch(WatchedEvent(kind, KeeperState.CONNECTED, "/x"))
        return self.reads.pop()


STAT = SimpleNamespace(czxid=10, mzxid=11)


@pytest.fixture
def setup() -> tuple[ScriptedClient, list[WatchEventType]]:
    client, seen = ScriptedClient(), cast(list[WatchEventType], [])
    registry = WatchRegistry(cast(Any, client), seen.append, reader=cast(Any, object()))

    def event_type(e: WatchEvent) -> WatchEventType:
        return e.type

    assert registry.watch_node("/x", event_type) is False
    return client, seen


def test_a_re_arm_answered_after_the_next_event_reports_nothing_of_its_own(
    setup: tuple[ScriptedClient, list[WatchEventType]],
) -> None:
    client, seen = setup
    client.fire(EventType.CREATED).answer(STAT)
    after_change = client.fire(EventType.CHANGED)  # its read finds the node ...
    after_delete = client.fire(EventType.DELETED)  # ... but the deletion's event is handled first
    after_change.answer(STAT)
    after_delete.answer(None)
    assert seen == [WatchEventType.CREATED, WatchEventType.CHANGED, WatchEventType.DELETED]


def test_a_deletion_no_watch_saw_is_still_reported(setup: tuple[ScriptedClient, list[WatchEventType]]) -> None:
    client, seen = setup
    client.fire(EventType.CREATED).answer(STAT)
    client.fire(EventType.CHANGED).answer(None)  # deleted before the re-arm read: no watch was armed
    assert seen == [WatchEventType.CREATED, WatchEventType.CHANGED, WatchEventType.DELETED]
