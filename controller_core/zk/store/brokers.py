"""Broker registrations (reference §1.2.2): ``/brokers/ids/<id>``, written by brokers, read by the controller.

Registration is one multi ``[create(ephemeral), setData(json, version 0)]`` whose czxid is the
broker epoch; a leftover ephemeral of an earlier session of this store (ZOOKEEPER-2985) is
replaced, anybody else's is refused. Reads are bulk multi-reads; an unreadable registration is
left out with an error log rather than failing a failover.
"""

from __future__ import annotations

import contextlib
import logging

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller_core.errors import ZkOperationError
from controller_core.model import BrokerRegistration
from controller_core.ports import ZkCode
from controller_core.zk import codecs, paths
from controller_core.zk.store.engine import FencedMultiEngine
from controller_core.zk.store.wire import CONNECTION_DROPPED, multi_failure, zk_code

logger = logging.getLogger(__name__)


class BrokerZnodes(FencedMultiEngine):
    """Register, update and read ``/brokers/ids``."""

    def register_broker(self, registration: BrokerRegistration) -> int:
        """Register ``/brokers/ids/<id>`` (ephemeral) and return the broker epoch (its czxid).

        One multi ``[create(ephemeral), setData(json, version 0)]``. If the znode exists: owned by this
        session -> success with its czxid (data not updated); owned by an earlier session of this store
        (ZOOKEEPER-2985 leftover) -> delete and re-create; owned by anyone else -> ``ZkOperationError``
        (NODEEXISTS).
        """
        path = paths.broker_id_path(registration.id)
        payload = codecs.encode_broker_registration(registration)
        for _ in range(5):
            tx = self._client.transaction()
            tx.create(path, b"", ephemeral=True)
            tx.set_data(path, payload, 0)
            try:
                results = tx.commit_async().get(timeout=self.timeout)
            except CONNECTION_DROPPED:
                logger.info("connection lost while registering broker %d; retrying", registration.id)
                continue
            session = self._session_id() or 0
            if not any(isinstance(r, Exception) for r in results):
                self._own_sessions.add(session)
                logger.info("registered broker %d at %s (broker epoch %d)", registration.id, path, results[1].czxid)
                return int(results[1].czxid)
            if not isinstance(results[0], NodeExistsError):
                failure = multi_failure(results)
                raise ZkOperationError(zk_code(failure), path, f"broker registration failed: {failure!r}")
            stat = self._client.exists(path)
            if stat is None:
                continue  # it went away between the create and the read: try again
            if stat.ephemeralOwner == session:
                self._own_sessions.add(session)
                return int(stat.czxid)
            if stat.ephemeralOwner in self._own_sessions:
                logger.warning(
                    "broker %d: replacing the registration left by our earlier session 0x%x",
                    registration.id,
                    stat.ephemeralOwner,
                )
                with contextlib.suppress(NoNodeError, BadVersionError):
                    self._client.delete(path, version=stat.version)
                continue
            raise ZkOperationError(
                ZkCode.NODE_EXISTS,
                path,
                f"broker id {registration.id} is already registered by another session "
                f"(0x{stat.ephemeralOwner:x}); is another broker running with this id?",
            )
        raise ZkOperationError(ZkCode.OTHER, path, "broker registration did not settle after 5 attempts")

    def update_broker_registration(self, registration: BrokerRegistration) -> None:
        """Rewrite this broker's own registration data (endpoints/features changed); unconditional."""
        self._client.set(paths.broker_id_path(registration.id), codecs.encode_broker_registration(registration))

    def get_broker_ids(self) -> list[int]:
        """Ids of the registered brokers, sorted."""
        return sorted(int(c) for c in self._children(paths.BROKER_IDS_PATH) if c.isdigit())

    def get_broker_registration(self, broker_id: int) -> BrokerRegistration | None:
        """One broker's registration (epoch = czxid), or None when it is not registered."""
        try:
            data, stat = self._client.get(paths.broker_id_path(broker_id))
        except NoNodeError:
            return None
        return codecs.decode_broker_registration(broker_id, data, stat.czxid)

    def get_all_broker_registrations(self) -> dict[int, BrokerRegistration]:
        """Every registered broker with its epoch (czxid), read in bulk.

        A broker that vanishes between the listing and the read is left out; an unreadable
        registration is left out with an error log (it cannot be used to reach the broker).
        """
        ids = self.get_broker_ids()
        results = self._read_data([paths.broker_id_path(i) for i in ids], size_hint=512)
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id, r in zip(ids, results, strict=True):
            if r.error is not None:
                continue
            try:
                brokers[broker_id] = codecs.decode_broker_registration(broker_id, r.data, r.stat.czxid)
            except ValueError as exc:
                logger.error("ignoring broker %d: %s", broker_id, exc)
        return brokers
