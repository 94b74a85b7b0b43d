"""Kafka's controller election over ZooKeeper: ephemeral ``/controller`` + ``/controller_epoch`` bump.

This is not kazoo's ``Election`` recipe (whose znodes differ from Kafka's): a candidate wins by
creating ``/controller`` in the same multi that increments ``/controller_epoch`` on condition of the
version it read (reference §1.3, ``ZkStore.register_controller_and_increment_epoch``). The new
``/controller_epoch`` data version is the fencing token of every later write.

Guarantees and failure behaviour:

* ``elect()`` returns the new ``ControllerEpoch`` when this candidate won, and None when another
  controller is registered or won the race (never raises ``ControllerMovedError``). Other ZooKeeper
  errors propagate; Kafka answers them with ``triggerControllerMove``.
* ``/controller`` is ephemeral: it disappears with our session, and the watch set by ``watch()``
  tells every candidate (``Reelect`` on deletion, ``ControllerChange`` on creation or change).
* ``resign()`` deletes ``/controller`` fenced by the epoch version, and only if it still names us.
"""

from __future__ import annotations

import logging

from kazoo.client import KazooClient

from controller_core.errors import ControllerMovedError
from controller_core.zk import paths
from controller_core.zk.codecs import ControllerInfo
from controller_core.zk.store import ControllerEpoch, ZkStore
from controller_core.zk.watchers import EventFactory, WatchRegistry

logger = logging.getLogger(__name__)

#: The extra ``/controller`` key carrying the controller's API endpoint for brokers.
ENDPOINT_KEY = "endpoint"


class ControllerElection:
    """One controller candidate (a broker id, optionally with the API endpoint brokers should use).

    Usage::

        election = ControllerElection(client, controller_id=1, endpoint="http://10.0.0.1:9000")
        election.watch(registry, lambda e: Reelect() if e.type is WatchEventType.DELETED else ControllerChange())
        won = election.elect()          # ControllerEpoch(epoch, epoch_zk_version) or None
        ...
        election.resign(won.epoch_zk_version)
    """

    def __init__(
        self, client: KazooClient, controller_id: int, endpoint: str | None = None, *, store: ZkStore | None = None
    ) -> None:
        self._client = client
        self.controller_id = controller_id
        self.endpoint = endpoint
        self._store = store or ZkStore(client)

    def elect(self) -> ControllerEpoch | None:
        """Try to become the controller; the epoch and fencing version on success, None otherwise."""
        if self._store.get_controller_id() is not None:
            return None
        extra = {ENDPOINT_KEY: self.endpoint} if self.endpoint else None
        try:
            return self._store.register_controller_and_increment_epoch(self.controller_id, extra)
        except ControllerMovedError as exc:
            logger.info("broker %d did not become controller: %s", self.controller_id, exc)
            return None

    def current(self) -> ControllerInfo | None:
        """The registered controller (with its ``extra`` keys, e.g. the endpoint), or None."""
        return self._store.get_controller()

    def active_controller_id(self) -> int | None:
        """The registered controller's broker id, or None."""
        return self._store.get_controller_id()

    def watch(self, registry: WatchRegistry, event_for: EventFactory) -> int | None:
        """Register the ``/controller`` node handler (arming its watch first) and return the current
        controller id — Kafka's ``registerZNodeChangeHandlerAndCheckExistence`` then ``getControllerId``."""
        if not registry.watch_node(paths.CONTROLLER_PATH, event_for):
            return None
        return self._store.get_controller_id()

    def resign(self, expected_controller_epoch_zk_version: int) -> bool:
        """Delete ``/controller`` if it still names this candidate (fenced); True when deleted.

        A ``ControllerMovedError`` (the epoch already moved) is swallowed with a warning, as in
        Kafka's ``triggerControllerMove``: someone else is controller and the node is theirs.
        """
        if self._store.get_controller_id() != self.controller_id:
            return False
        try:
            return self._store.delete_controller(expected_controller_epoch_zk_version)
        except ControllerMovedError as exc:
            logger.warning("not deleting /controller: %s", exc)
            return False
