"""Keep this broker registered in ZooKeeper: ``/brokers/ids/<id>``, ephemeral, Kafka's JSON v5.

Guarantees and failure behaviour:

* ``register`` creates the registration through ``ZkStore.register_broker`` (one multi: create the
  ephemeral, then set its data) and returns the **broker epoch**, the znode's czxid.
* If the id is registered by another live session, ``register`` raises ``BrokerIdTakenError``
  right away, or after ``wait_s`` seconds of waiting for that registration to go (a broker restarted
  right after a crash must outwait its previous session, which ZooKeeper keeps for the session
  timeout).
* After a session expiry the ephemeral is gone; as soon as kazoo has a new session the registrar
  registers again (on its own thread, retrying every ``retry_backoff_s``) and reports the new
  epoch through ``on_epoch``. A mere disconnection keeps the session and the registration.
* ``deregister`` deletes the znode (only while our session owns it) and stops re-registering.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.protocol.states import KazooState

from controller_core.errors import ZkOperationError
from controller_core.model import BrokerRegistration
from controller_core.ports import ZkCode
from controller_core.signal_wait import wait_until_set
from controller_core.zk import paths
from controller_core.zk.store import ZkStore

logger = logging.getLogger(__name__)

#: How long deregistering waits for each ZooKeeper answer at shutdown.
DEREGISTER_TIMEOUT_S = 5.0


class BrokerIdTakenError(Exception):
    """Another live session holds ``/brokers/ids/<id>``: another broker runs with this id."""


class BrokerRegistrar:
    """Registers one broker and re-registers it after each session expiry.

    Example::

        registrar = BrokerRegistrar(zk, ZkStore(zk), registration, on_epoch=rm.set_broker_epoch)
        epoch = registrar.register()
        ...
        registrar.deregister()
    """

    def __init__(
        self,
        zk: KazooClient,
        store: ZkStore,
        registration: BrokerRegistration,
        on_epoch: Callable[[int], None],
        *,
        retry_backoff_s: float = 1.0,
    ) -> None:
        self._zk = zk
        self._store = store
        self._registration = registration
        self._on_epoch = on_epoch
        self._retry_backoff_s = retry_backoff_s
        self._stopped = threading.Event()
        self._lost = False
        self._lock = threading.Lock()
        self.epoch: int | None = None
        self.registrations = 0

    @property
    def path(self) -> str:
        return paths.broker_id_path(self._registration.id)

    def register(self, wait_s: float = 0.0) -> int:
        """Register for the first time; see the module docstring for ``wait_s``."""
        deadline = time.monotonic() + wait_s
        announced = False
        while True:
            try:
                epoch = self._register_once()
                break
            except ZkOperationError as exc:
                if exc.code != ZkCode.NODE_EXISTS:
                    raise
                if self._stopped.is_set():
                    raise BrokerIdTakenError(f"{exc} (stopped waiting: shutting down)") from None
                if time.monotonic() >= deadline:
                    raise BrokerIdTakenError(str(exc)) from None
                if not announced:
                    logger.warning(
                        "broker id %d is registered by another session; waiting up to %.0fs for it to expire",
                        self._registration.id,
                        max(0.0, deadline - time.monotonic()),
                    )
                    announced = True
                # Not Event.wait: ``cancel`` runs in a signal handler on this (the main) thread.
                wait_until_set(self._stopped, min(0.5, max(0.0, deadline - time.monotonic())))
        self._zk.add_listener(self._on_state)
        return epoch

    def cancel(self) -> None:
        """Stop waiting in ``register`` and stop re-registering (from a signal handler)."""
        self._stopped.set()

    def _register_once(self) -> int:
        epoch = self._store.register_broker(self._registration)
        with self._lock:
            self.epoch = epoch
            self.registrations += 1
        self._on_epoch(epoch)
        return epoch

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread: must not block.
        if state == KazooState.LOST:
            self._lost = True
            logger.warning("broker %d: ZooKeeper session expired; its registration is gone", self._registration.id)
        elif state == KazooState.CONNECTED and self._lost and not self._stopped.is_set():
            self._lost = False
            threading.Thread(target=self._reregister, name="broker-reregister", daemon=True).start()

    def _reregister(self) -> None:
        while not self._stopped.is_set():
            try:
                epoch = self._register_once()
            except (ZkOperationError, KazooException) as exc:
                logger.warning(
                    "broker %d: re-registration failed (%s); retrying in %.1fs",
                    self._registration.id,
                    exc,
                    self._retry_backoff_s,
                )
                self._stopped.wait(self._retry_backoff_s)
                continue
            logger.info("broker %d: re-registered after session expiry, broker epoch %d", self._registration.id, epoch)
            return

    def deregister(self) -> None:
        """Remove our registration (if our session still owns it) and stop re-registering."""
        self._stopped.set()
        self._zk.remove_listener(self._on_state)
        # Bounded waits: with ZooKeeper unreachable, kazoo's synchronous calls wait for ever and the
        # broker would never exit (F12, ZooKeeper down); closing the session removes the znode anyway.
        wait_s = DEREGISTER_TIMEOUT_S
        if not self._zk.connected:
            logger.warning(
                "broker %d: ZooKeeper unreachable, not deleting %s; its session's expiry removes it",
                self._registration.id,
                self.path,
            )
            return
        try:
            stat = self._zk.exists_async(self.path).get(timeout=wait_s)
            session = self._zk.client_id[0] if self._zk.client_id else None
            if stat is not None and stat.ephemeralOwner == session:
                self._zk.delete_async(self.path, version=stat.version).get(timeout=wait_s)
                logger.info("broker %d: deregistered", self._registration.id)
        except NoNodeError:
            pass
        except (KazooException, self._zk.handler.timeout_exception) as exc:
            logger.warning(
                "broker %d: could not delete %s (%s); closing the session removes it",
                self._registration.id,
                self.path,
                exc,
            )
