"""Controller election and epoch (reference §1.3), and the cluster-wide znodes set at failover.

A candidate wins by creating ephemeral ``/controller`` in the same multi that bumps
``/controller_epoch`` on condition of the version it read; that new data version is the fencing
token of every later write (``engine``). A retried election verifies its own registration rather
than trusting a lost reply. ``/feature`` (failover step 1, fenced) and ``/cluster/id`` live here
too: like ``/controller``, they describe the cluster rather than a broker or a topic.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NamedTuple

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller_core.errors import ControllerMovedError, ZkOperationError
from controller_core.ports import ZkCode
from controller_core.zk import codecs, paths
from controller_core.zk.codecs import ControllerInfo, FeatureZNode
from controller_core.zk.store.engine import FencedMultiEngine
from controller_core.zk.store.wire import CONNECTION_DROPPED, CREATE, DELETE, SET, Op, multi_failure, zk_code

logger = logging.getLogger(__name__)


class ControllerEpoch(NamedTuple):
    """The controller epoch and the data version of ``/controller_epoch`` (the fencing token)."""

    epoch: int
    epoch_zk_version: int


class ControllerZnodes(FencedMultiEngine):
    """``/controller``, ``/controller_epoch``, ``/feature`` and ``/cluster/id``."""

    # ==============================================================================================
    # controller election (reference §1.3)
    # ==============================================================================================
    def get_controller(self) -> ControllerInfo | None:
        """``/controller`` decoded, or None when no controller is registered.

        Raises ``ValueError`` when the znode holds something other than Kafka's JSON.
        """
        try:
            data, _ = self._client.get(paths.CONTROLLER_PATH)
        except NoNodeError:
            return None
        return codecs.decode_controller(data)

    def get_controller_id(self) -> int | None:
        """The registered controller's broker id, or None (an unreadable ``/controller`` counts as none,
        with a warning, as Kafka's ``getControllerId`` does)."""
        try:
            info = self.get_controller()
        except ValueError as exc:
            logger.warning("ignoring unreadable /controller: %s", exc)
            return None
        return None if info is None else info.broker_id

    def get_controller_epoch(self) -> ControllerEpoch | None:
        """``(epoch, zk version)`` of ``/controller_epoch``, or None when it does not exist yet."""
        try:
            data, stat = self._client.get(paths.CONTROLLER_EPOCH_PATH)
        except NoNodeError:
            return None
        return ControllerEpoch(codecs.decode_controller_epoch(data), stat.version)

    def register_controller_and_increment_epoch(
        self, controller_id: int, extra: Mapping[str, Any] | None = None
    ) -> ControllerEpoch:
        """Become the controller: create ephemeral ``/controller`` and bump ``/controller_epoch`` in one multi.

        Steps (Kafka's ``registerControllerAndIncrementControllerEpoch``):

        1. Read ``/controller_epoch``; create it with ``0`` when absent (so the first controller of a
           cluster gets epoch 1 at zk version 1).
        2. One multi: create ``/controller`` (ephemeral, ``extra`` keys added to Kafka's JSON) and set
           ``/controller_epoch`` to epoch+1 on condition of the version read.
        3. On NODEEXISTS or BADVERSION (or a connection loss that hides the outcome), verify: we won
           only if ``/controller`` names ``controller_id``, is owned by *this* session, and the epoch is
           now epoch+1.

        Returns the new ``(epoch, epoch_zk_version)``. Raises ``ControllerMovedError`` when another
        candidate holds ``/controller`` or won the race, ``ZkOperationError`` on other ZooKeeper errors.
        """
        current = self._read_or_create_controller_epoch()
        new_epoch = current.epoch + 1
        payload = codecs.encode_controller(controller_id, extra=extra)

        def attempt() -> list[Any]:
            tx = self._client.transaction()
            tx.create(paths.CONTROLLER_PATH, payload, ephemeral=True)
            tx.set_data(
                paths.CONTROLLER_EPOCH_PATH, codecs.encode_controller_epoch(new_epoch), current.epoch_zk_version
            )
            results: list[Any] = tx.commit_async().get(timeout=self.timeout)
            return results

        try:
            results = attempt()
        except CONNECTION_DROPPED:
            # The outcome is unknown: run it again; if the first one was applied, this one fails with
            # NODEEXISTS and the verification below recognises our own registration.
            logger.info("connection lost during the controller election multi; retrying")
            results = attempt()
        if not any(isinstance(r, Exception) for r in results):
            logger.info("controller %d registered; controller epoch %d -> %d", controller_id, current.epoch, new_epoch)
            if self._recorder is not None:
                self._record_election(controller_id, new_epoch, results[1].version, results[1].mzxid)
            return ControllerEpoch(new_epoch, results[1].version)
        failure = multi_failure(results)
        if isinstance(failure, NodeExistsError | BadVersionError):
            verified = self._verify_controller_registration(controller_id, new_epoch)
            if self._recorder is not None:
                stat = self._client.exists(paths.CONTROLLER_EPOCH_PATH)
                self._record_election(controller_id, verified.epoch, verified.epoch_zk_version, stat and stat.mzxid)
            return verified
        raise ZkOperationError(zk_code(failure), paths.CONTROLLER_PATH, f"controller election failed: {failure!r}")

    def _read_or_create_controller_epoch(self) -> ControllerEpoch:
        found = self.get_controller_epoch()
        if found is not None:
            return found
        try:
            self._client.create(paths.CONTROLLER_EPOCH_PATH, codecs.encode_controller_epoch(0), makepath=True)
            return ControllerEpoch(0, 0)
        except NodeExistsError:
            found = self.get_controller_epoch()
            if found is None:
                raise ZkOperationError(
                    ZkCode.NO_NODE, paths.CONTROLLER_EPOCH_PATH, "created concurrently, then deleted"
                ) from None
            return found

    def _verify_controller_registration(self, controller_id: int, new_epoch: int) -> ControllerEpoch:
        try:
            data, stat = self._client.get(paths.CONTROLLER_PATH)
        except NoNodeError:
            raise ControllerMovedError(
                f"controller election for broker {controller_id} failed and /controller is absent"
            ) from None
        holder = codecs.decode_controller(data).broker_id
        session = self._session_id()
        epoch = self.get_controller_epoch()
        if (
            holder == controller_id
            and stat.ephemeralOwner == session
            and epoch is not None
            and epoch.epoch == new_epoch
        ):
            logger.info("controller %d registration confirmed after a retried election", controller_id)
            return epoch
        raise ControllerMovedError(
            f"broker {controller_id} lost the controller election: /controller names broker {holder}"
            + ("" if epoch is None else f", controller epoch is {epoch.epoch}")
        )

    def delete_controller(self, expected_controller_epoch_zk_version: int) -> bool:
        """Delete ``/controller`` (resigning, Kafka's ``triggerControllerMove``); fenced.

        Returns False when it was already gone. Raises ``ControllerMovedError`` when the epoch moved.
        """
        (outcome,) = self._fenced_write([Op(DELETE, paths.CONTROLLER_PATH)], expected_controller_epoch_zk_version)
        return self._deleted(outcome, paths.CONTROLLER_PATH)

    # ==============================================================================================
    # /feature and /cluster/id
    # ==============================================================================================
    def get_feature_znode(self) -> FeatureZNode | None:
        """``/feature`` decoded, or None when absent."""
        data = self._get_or_none(paths.FEATURE_PATH)
        return None if data is None else codecs.decode_feature_znode(data)

    def set_feature_znode(self, node: FeatureZNode, expected_controller_epoch_zk_version: int) -> None:
        """Create or overwrite ``/feature`` (controller failover step 1); fenced."""
        payload = codecs.encode_feature_znode(node)
        (outcome,) = self._fenced_write([Op(SET, paths.FEATURE_PATH, payload)], expected_controller_epoch_zk_version)
        if outcome.code is ZkCode.NO_NODE:
            (outcome,) = self._fenced_write(
                [Op(CREATE, paths.FEATURE_PATH, payload)], expected_controller_epoch_zk_version
            )
        if outcome.code is not ZkCode.OK:
            raise ZkOperationError(outcome.code, paths.FEATURE_PATH, repr(outcome.error))

    def get_or_create_cluster_id(self, proposed: str | None = None) -> str:
        """The cluster id from ``/cluster/id``, creating it (``proposed`` or a fresh id) when absent."""
        data = self._get_or_none(paths.CLUSTER_ID_PATH)
        if data is not None:
            return codecs.decode_cluster_id(data)
        cluster_id = proposed or codecs.new_topic_id()
        try:
            self._client.create(paths.CLUSTER_ID_PATH, codecs.encode_cluster_id(cluster_id), makepath=True)
        except NodeExistsError:
            data, _ = self._client.get(paths.CLUSTER_ID_PATH)
            return codecs.decode_cluster_id(data)
        return cluster_id

    # -- reliability history (off unless RELIABILITY_HISTORY_DIR is set) ---------------------------

    def _record_election(self, controller_id: int, epoch: int, epoch_zk_version: int, mzxid: int | None) -> None:
        assert self._recorder is not None
        self._recorder.record(
            op="elect",
            controller_id=controller_id,
            controller_epoch=epoch,
            epoch_zk_version=epoch_zk_version,
            session=self._session_id(),
            mzxid=mzxid,
            result="OK",
        )
