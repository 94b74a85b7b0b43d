"""ZooKeeper watches for the controller: armed by reads, re-armed by themselves, callbacks only enqueue.

Kafka keeps its ZooKeeper handlers in registries keyed by path (node handlers and child handlers,
reference §1.4) and turns every notification into a controller event. ``WatchRegistry`` is that
registry over kazoo:

* ``watch_node(path, event_for)`` registers a node handler and arms an ``exists`` watch (creation,
  deletion and data changes; works on absent paths) and returns whether the node exists — Kafka's
  "register and check existence" in one step, so no change between registering and reading is lost.
* ``watch_nodes(handlers)`` does the same for thousands of paths in a few round trips (a multi-read,
  then SetWatches requests armed relative to a zxid seen before that read; see its docstring).
* ``watch_children(path, event_for)`` registers a child handler, arms a ``getChildren`` watch and
  returns the children (None when the parent is absent; an ``exists`` watch then waits for it).
* When a watch fires, the callback (on kazoo's callback thread) does exactly two things: it sends a
  non-blocking async read that re-arms the one-shot watch, then puts ``event_for(WatchEvent(path,
  type))`` on the controller's queue through ``enqueue`` (unless the factory returns None). It never
  reads synchronously, never touches controller state, never blocks. ``event_for`` must be a cheap,
  pure constructor of an event value. Because the re-arm is sent first, every read the controller
  makes while handling the event is ordered after it: a change is either visible to that read or
  fires the watch again. (Several changes in a row may be coalesced into one event, as ZooKeeper's
  one-shot watches always do; handlers re-read, they do not count events.)
* Lost watches are restored. kazoo drops every raw watch on a disconnect (and on session expiry) and
  tells each watcher with a ``NONE`` event; the registry then re-arms the path as soon as the
  connection is back and compares what it reads with what it last saw (czxid/mzxid of a node, pzxid
  of a parent), enqueueing an event only if something changed meanwhile. A broker that bounced
  during the gap therefore still produces an event (pzxid moves), unlike kazoo's ``ChildrenWatch``.
* ``unregister(path)`` drops a handler at once: a watch of it that fires later is ignored.
  (ZooKeeper keeps the server-side watch until it fires; that costs nothing.)

Delivery guarantee: after a change to a registered path, at least one event for that path is
enqueued, provided the session survives or the registration outlives the expiry; events may be
duplicated, so handlers re-read current state when they process an event (KAFKA-5502).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

from kazoo.client import KazooClient
from kazoo.exceptions import ConnectionClosedError, ConnectionLoss, NoNodeError, SessionExpiredError, ZookeeperError
from kazoo.protocol.states import EventType, KazooState

from controller_core.zk.multiread import MultiReader
from controller_core.zk.setwatches import set_node_watches

logger = logging.getLogger(__name__)


class WatchKind(StrEnum):
    """Kafka's two handler registries."""

    NODE = "node"
    CHILDREN = "children"


class WatchEventType(StrEnum):
    """What happened at the watched path."""

    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"  # the node's data changed
    CHILDREN = "children"  # the parent's child list changed


@dataclass(frozen=True, slots=True)
class WatchEvent:
    """A notification for a registered path, handed to the registration's ``event_for`` factory."""

    path: str
    type: WatchEventType
    kind: WatchKind


EventFactory = Callable[[WatchEvent], object | None]
Enqueue = Callable[[Any], None]

_KAZOO_TYPES: Final = {
    EventType.CREATED: WatchEventType.CREATED,
    EventType.DELETED: WatchEventType.DELETED,
    EventType.CHANGED: WatchEventType.CHANGED,
    EventType.CHILD: WatchEventType.CHILDREN,
}
_RETRY_LATER: Final = (ConnectionLoss, ConnectionClosedError, SessionExpiredError)
# Expected bytes per node read by ``watch_nodes`` (a topic's assignment JSON is the largest usual case).
_NODE_SIZE_HINT: Final = 1024
# What ``_rearm_result`` returns when a re-arming read gave nothing to act on.
_FAILED: Final = object()

# What the registry last saw at a path: (czxid, mzxid) of a node, pzxid of a parent; None = absent.
_Seen = tuple[int, int] | int | None


class _Registration:
    """One handler. ``callback`` is created once so kazoo's watcher sets de-duplicate re-arms."""

    __slots__ = ("active", "callback", "event_for", "expect_exists", "fired", "kind", "path", "rearm_pending", "seen")

    def __init__(self, path: str, kind: WatchKind, event_for: EventFactory) -> None:
        self.path = path
        self.kind = kind
        self.event_for = event_for
        self.active = True
        self.seen: _Seen = None
        self.rearm_pending = False
        # Node watches: whether the node exists after the last event delivered (None: no event yet).
        self.expect_exists: bool | None = None
        # Watch events delivered so far. kazoo runs watch callbacks and async completions on two
        # different threads, so a re-arm's answer can be handled after a *later* watch event; the
        # re-arm carries the count it was sent for and is compared only if no event came since.
        self.fired = 0
        self.callback: Callable[[Any], None] = lambda event: None


def _node_seen(stat: Any) -> _Seen:
    return None if stat is None else (int(stat.czxid), int(stat.mzxid))


class WatchRegistry:
    """Node and child handlers keyed by path, whose callbacks only enqueue controller events.

    Usage::

        registry = WatchRegistry(client, events.put)
        registry.watch_children("/brokers/ids", lambda e: BrokerChange())
        exists = registry.watch_node(
            "/controller", lambda e: Reelect() if e.type is WatchEventType.DELETED else ControllerChange()
        )
        ...
        registry.unregister("/brokers/ids")          # on resignation
        registry.unregister_all(keep=["/controller"])

    Registering a path again replaces its handler (and re-arms the watch). ``close()`` removes the
    connection listener and every handler.
    """

    def __init__(self, client: KazooClient, enqueue: Enqueue, reader: MultiReader | None = None) -> None:
        self._client = client
        self._reader = reader if reader is not None else MultiReader(client)
        self._enqueue = enqueue
        self._lock = threading.Lock()
        self._registrations: dict[tuple[str, WatchKind], _Registration] = {}
        self._closed = False
        client.add_listener(self._on_connection_state)

    # -- registration (controller thread) ------------------------------------------------------------
    def watch_node(self, path: str, event_for: EventFactory) -> bool:
        """Register a node handler for ``path`` and arm its watch; return whether the node exists.

        The handler sees CREATED, DELETED and CHANGED. If the read fails (connection loss), the
        handler stays registered, is armed when the connection returns, and the error is raised.
        """
        reg = self._register(path, WatchKind.NODE, event_for)
        try:
            stat = self._client.exists(path, watch=reg.callback)
        except _RETRY_LATER:
            reg.rearm_pending = True
            raise
        with self._lock:
            reg.seen = _node_seen(stat)
        return stat is not None

    def watch_nodes(self, handlers: Mapping[str, EventFactory], *, since: int | None = None) -> dict[str, bool]:
        """``watch_node`` for many paths at once (a failover arms two watches per topic: thousands).

        One multi-read learns what each node is now, then SetWatches requests (``setwatches``) arm
        every watch relative to a zxid the session had seen just before that read: a change the read
        missed has a later zxid and fires at once, so nothing between reading and arming is lost.
        A few round trips for 8,000 paths instead of 8,000.
        Without multi-read (ZooKeeper < 3.6) one ``exists`` per path is pipelined instead. Returns
        whether each node exists.

        ``since``: a zxid the caller's knowledge of these nodes is current to (a warm standby's
        context, armed after the failover's requests went out): every change after it fires.

        On a connection loss every handler stays registered and is armed when the connection returns
        (as ``watch_node``); the first error is raised after all replies are in.
        """
        regs = [self._register(path, WatchKind.NODE, event_for) for path, event_for in handlers.items()]
        if not regs:
            return {}
        if self._reader.supported is False:
            return self._watch_nodes_by_exists(regs)
        try:
            # A zxid this session has seen, no older than this round trip: everything changed after it
            # fires (the read below, in several requests, sees at least this much). kazoo's last zxid
            # alone may be old when the session was idle, and would fire for every node changed since.
            if since is None:
                self._client.exists("/")
                since = self._client.last_zxid
            reads = self._reader.get_data([reg.path for reg in regs], size_hint=_NODE_SIZE_HINT)
        except _RETRY_LATER:
            for reg in regs:
                self._retry_when_connected(reg)
            raise
        if not self._reader.supported:  # the probe inside get_data has just found out
            return self._watch_nodes_by_exists(regs)
        existing: list[_Registration] = []
        absent: list[_Registration] = []
        unreadable: list[_Registration] = []
        with self._lock:
            for reg, read in zip(regs, reads, strict=True):
                if read.error is None:
                    reg.seen = _node_seen(read.stat)
                    existing.append(reg)
                elif isinstance(read.error, NoNodeError):
                    reg.seen = None
                    absent.append(reg)
                else:  # e.g. no READ permission: the node exists, but its stat is not ours to see
                    unreadable.append(reg)
        exists = {reg.path: True for reg in existing} | {reg.path: False for reg in absent}
        pending = set_node_watches(
            self._client,
            since,
            [(reg.path, reg.callback) for reg in existing],
            [(reg.path, reg.callback) for reg in absent],
        )
        error: BaseException | None = None
        for result in pending:
            try:
                result.get(timeout=self._reader.timeout)
            except _RETRY_LATER as exc:
                error = error or exc
            except ZookeeperError as exc:  # a server that refuses SetWatches: arm them one by one
                logger.warning("SetWatches refused (%r); arming %d watches one by one", exc, len(regs))
                return self._watch_nodes_by_exists(regs)
        if error is not None:
            # The callbacks of a request that went out received kazoo's NONE event and re-arm
            # themselves; one still queued re-arms on reconnect. Re-arming all is idempotent.
            for reg in existing + absent:
                self._retry_when_connected(reg)
            raise error
        if unreadable:
            exists.update(self._watch_nodes_by_exists(unreadable))
        return exists

    def _watch_nodes_by_exists(self, regs: Sequence[_Registration]) -> dict[str, bool]:
        """Arm node watches with one pipelined ``exists`` per path."""
        pending = [(reg, self._client.exists_async(reg.path, watch=reg.callback)) for reg in regs]
        exists: dict[str, bool] = {}
        error: BaseException | None = None
        for reg, result in pending:
            try:
                stat = result.get()
            except _RETRY_LATER as exc:
                reg.rearm_pending = True
                error = error or exc
                continue
            with self._lock:
                reg.seen = _node_seen(stat)
            exists[reg.path] = stat is not None
        if error is not None:
            raise error
        return exists

    def watch_children(self, path: str, event_for: EventFactory) -> list[str] | None:
        """Register a child handler for ``path``, arm its watch and return the children (None when
        ``path`` does not exist; its creation then fires a CREATED event and arms the child watch).

        The handler sees CHILDREN, and CREATED/DELETED of ``path`` itself.
        """
        reg = self._register(path, WatchKind.CHILDREN, event_for)
        try:
            while True:
                try:
                    children, stat = self._client.get_children(path, watch=reg.callback, include_data=True)
                    with self._lock:
                        reg.seen = int(stat.pzxid)
                    return list(children)
                except NoNodeError:
                    if self._client.exists(path, watch=reg.callback) is None:
                        with self._lock:
                            reg.seen = None
                        return None
                    # Created between the two reads: list it again.
        except _RETRY_LATER:
            reg.rearm_pending = True
            raise

    def unregister(self, path: str, kind: WatchKind | None = None) -> None:
        """Drop the handler(s) of ``path`` (both kinds unless ``kind`` is given). Idempotent."""
        kinds = (kind,) if kind is not None else (WatchKind.NODE, WatchKind.CHILDREN)
        with self._lock:
            for k in kinds:
                reg = self._registrations.pop((path, k), None)
                if reg is not None:
                    reg.active = False

    def unregister_all(self, keep: Collection[str] = ()) -> None:
        """Drop every handler except those of the paths in ``keep`` (e.g. ``/controller`` on resignation)."""
        with self._lock:
            for key in [k for k in self._registrations if k[0] not in keep]:
                self._registrations.pop(key).active = False

    def is_registered(self, path: str, kind: WatchKind) -> bool:
        with self._lock:
            return (path, kind) in self._registrations

    def registered(self) -> list[tuple[str, WatchKind]]:
        """Every registered (path, kind), sorted."""
        with self._lock:
            return sorted(self._registrations)

    def close(self) -> None:
        """Unregister everything and stop listening to connection-state changes."""
        self.unregister_all()
        with self._lock:
            self._closed = True
        self._client.remove_listener(self._on_connection_state)

    def _register(self, path: str, kind: WatchKind, event_for: EventFactory) -> _Registration:
        reg = _Registration(path, kind, event_for)
        reg.callback = lambda event: self._fired(reg, event)
        with self._lock:
            if self._closed:
                raise RuntimeError("this WatchRegistry is closed")
            old = self._registrations.get((path, kind))
            if old is not None:
                old.active = False
            self._registrations[(path, kind)] = reg
        return reg

    # -- kazoo threads: never block, only enqueue and send async re-arm reads ----------------------
    def _fired(self, reg: _Registration, event: Any) -> None:
        if not reg.active:
            return
        if event.type == EventType.NONE:
            # kazoo dropped every watch (connection lost or session expired): re-arm once we are
            # back (the request waits in kazoo's queue) and compare, so changes made meanwhile count.
            self._rearm(reg, resync=True)
            return
        # Re-arm *before* enqueueing: the re-arm request is then ahead of every read the controller
        # makes while handling the event (same session, same order), so a change either happens
        # before that read (and the read sees it) or after the re-arm (and fires the watch again).
        event_type = _KAZOO_TYPES.get(event.type)
        with self._lock:
            reg.fired += 1
            sent_for = reg.fired
            if reg.kind is WatchKind.NODE and event_type is not None:
                reg.expect_exists = event_type is not WatchEventType.DELETED
        self._rearm(reg, resync=False, sent_for=sent_for)
        if event_type is not None:
            if reg.kind is WatchKind.CHILDREN and event_type is WatchEventType.CHANGED:
                event_type = WatchEventType.CHILDREN  # defensive: kazoo routes CHANGED to data watchers only
            self._emit(reg, event_type)

    def _emit(self, reg: _Registration, event_type: WatchEventType) -> None:
        try:
            item = reg.event_for(WatchEvent(reg.path, event_type, reg.kind))
            if item is not None:
                self._enqueue(item)
        except Exception:
            logger.exception("watch handler for %s (%s) failed to enqueue its event", reg.path, reg.kind)

    def _rearm(self, reg: _Registration, resync: bool, sent_for: int | None = None) -> None:
        """Read the node (or children) again with the watch; ``sent_for``: the watch event count it
        answers (None for a resynchronisation, which always compares)."""
        if not reg.active:
            return
        reg.rearm_pending = False
        try:
            if reg.kind is WatchKind.NODE:
                pending = self._client.exists_async(reg.path, watch=reg.callback)
            else:
                pending = self._client.get_children_async(reg.path, watch=reg.callback, include_data=True)
        except Exception:  # the client is closed
            logger.debug("cannot re-arm the watch of %s now", reg.path, exc_info=True)
            reg.rearm_pending = True
            return
        pending.rawlink(lambda result: self._rearmed(reg, result, resync, sent_for))

    def _retry_when_connected(self, reg: _Registration) -> None:
        # The connection listener re-arms pending handlers on CONNECTED. If the connection came back
        # before we got here, that listener has already run: re-arm now instead.
        reg.rearm_pending = True
        if self._client.connected:
            self._rearm(reg, resync=True)

    def _rearm_result(self, reg: _Registration, result: Any) -> Any:
        """The value of a re-arming read, or ``_FAILED`` when there is none to act on: after a
        connection loss the watch is re-armed once connected; any other failure is logged.
        ``NoNodeError`` is the caller's to handle."""
        try:
            return result.get(block=False)
        except NoNodeError:
            raise
        except _RETRY_LATER:
            self._retry_when_connected(reg)
        except Exception:
            logger.exception("re-arming the watch of %s failed", reg.path)
        return _FAILED

    def _rearmed(self, reg: _Registration, result: Any, resync: bool, sent_for: int | None = None) -> None:
        if not reg.active:
            return
        try:
            value = self._rearm_result(reg, result)
        except NoNodeError:
            # A child watch needs an existing parent: wait for the parent's creation instead.
            self._client.exists_async(reg.path, watch=reg.callback).rawlink(
                lambda r: self._rearmed_parent_absent(reg, r, resync, sent_for)
            )
            return
        if value is _FAILED:
            return
        now: _Seen = _node_seen(value) if reg.kind is WatchKind.NODE else int(value[1].pzxid)
        self._observe(reg, now, resync, sent_for)

    def _rearmed_parent_absent(
        self, reg: _Registration, result: Any, resync: bool, sent_for: int | None = None
    ) -> None:
        if not reg.active:
            return
        try:
            stat = self._rearm_result(reg, result)
        except NoNodeError:  # not from exists(), which answers None for a missing node
            logger.exception("re-arming the watch of %s failed", reg.path)
            return
        if stat is _FAILED:
            return
        if stat is not None:
            # Created between the two reads: arm the child watch and report what changed.
            self._rearm(reg, resync=True)
            return
        self._observe(reg, None, resync, sent_for)

    def _observe(self, reg: _Registration, now: _Seen, resync: bool, sent_for: int | None = None) -> None:
        with self._lock:
            if sent_for is not None and sent_for != reg.fired:
                # A later watch event was delivered after this re-arm was sent: what this read saw
                # is older than what that event says, and that event's own re-arm will compare.
                return
            before = reg.seen
            reg.seen = now
            expected, reg.expect_exists = reg.expect_exists, None
        if not resync:
            # The node was created or deleted after its watch fired and before the re-armed read: no
            # watch was armed to see it, so report it (a change of data alone is left to the handler's
            # own read of the node, as before).
            if reg.kind is WatchKind.NODE and expected is not None and expected != (now is not None):
                self._emit(reg, WatchEventType.CREATED if now is not None else WatchEventType.DELETED)
            return
        if before == now:
            return
        if now is None:
            self._emit(reg, WatchEventType.DELETED)
        elif before is None:
            self._emit(reg, WatchEventType.CREATED)
        elif reg.kind is WatchKind.CHILDREN:
            self._emit(reg, WatchEventType.CHILDREN)
        elif isinstance(before, tuple) and isinstance(now, tuple) and before[0] != now[0]:
            self._emit(reg, WatchEventType.CREATED)  # deleted and re-created while we were away
        else:
            self._emit(reg, WatchEventType.CHANGED)

    def _on_connection_state(self, state: str) -> None:
        # kazoo calls this on its connection thread: only async requests here.
        if state != KazooState.CONNECTED:
            return
        with self._lock:
            if self._closed:
                return
            waiting = [r for r in self._registrations.values() if r.rearm_pending]
        for reg in waiting:
            self._rearm(reg, resync=True)
