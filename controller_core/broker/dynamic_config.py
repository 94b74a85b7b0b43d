"""The broker's dynamic-config listener: replication throttles picked up as Kafka's brokers do.

Kafka's ``ZkConfigManager``: an admin writes ``/config/<type>/<entity>`` and then a sequential
``/config/changes/config_change_<seq>`` holding ``{"version":2,"entity_path":"<type>/<entity>"}``
(version 1, ``{"version":1,"entity_type":...,"entity_name":...}``, is read too). Every broker watches
``/config/changes``, re-reads the entity of each notification newer than the last it processed, and
deletes notifications older than 15 minutes (``changeExpirationMs``).

Here only what throttles need is applied (``throttle.ThrottleState``): at start (and after a new
ZooKeeper session, when notifications may have been missed) every ``/config/topics/<t>`` plus
``/config/brokers/<id>`` and ``/config/brokers/<default>`` is read; afterwards only the entities
named by new notifications. Unreadable notifications are logged and skipped.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NoNodeError

from controller_core.broker.throttle import ThrottleState
from controller_core.zk import paths
from controller_core.zk.store import ZkStore

logger = logging.getLogger(__name__)

#: Kafka's ``ZkConfigManager.changeExpirationMs``: notifications older than this are purged.
CHANGE_EXPIRATION_S: Final = 15 * 60.0
#: How often old notifications are looked for (at most, when notifications arrive).
PURGE_INTERVAL_S: Final = 60.0


def entity_of_notification(data: bytes) -> tuple[str, str]:
    """``(type, name)`` named by a config-change notification (version 1 or 2); ``ValueError`` else."""
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object")
    version = obj.get("version")
    if version == 2:
        entity_path = obj.get("entity_path")
        if not isinstance(entity_path, str) or "/" not in entity_path:
            raise ValueError(f"entity_path must be '<type>/<name>', got {entity_path!r}")
        entity_type, _, name = entity_path.partition("/")
    elif version == 1:
        raw_type, raw_name = obj.get("entity_type"), obj.get("entity_name")
        if not isinstance(raw_type, str) or not isinstance(raw_name, str):
            raise ValueError("version 1 needs string entity_type and entity_name")
        entity_type, name = raw_type, raw_name
    else:
        raise ValueError(f"unknown notification version {version!r}")
    return entity_type, name


class ConfigChangeListener:
    """Keeps a broker's ``ThrottleState`` in line with ZooKeeper (see the module docstring)."""

    def __init__(
        self, client: KazooClient, throttles: ThrottleState, *, wall_clock: Callable[[], float] = time.time
    ) -> None:
        self._client = client
        self._store = ZkStore(client)
        self._throttles = throttles
        self._wall_clock = wall_clock
        self._lock = threading.Lock()
        self._last_seq = -1
        self._last_purge = 0.0
        self._reload_needed = threading.Event()
        self._stopped = False
        self.notifications_processed = 0
        self.reloads = 0

    def start(self) -> None:
        """Read everything, then follow ``/config/changes``."""
        self._client.ensure_path(paths.CONFIG_CHANGES_PATH)
        self._client.add_listener(self._on_state)
        with self._lock:
            self._reload()
        self._client.ChildrenWatch(paths.CONFIG_CHANGES_PATH, self._on_children)

    def stop(self) -> None:
        self._stopped = True
        self._client.remove_listener(self._on_state)

    def _on_state(self, state: str) -> None:
        if state == KazooState.LOST:
            self._reload_needed.set()
        elif state == KazooState.CONNECTED and self._reload_needed.is_set():
            # kazoo calls listeners on its event thread, which must not wait for ZooKeeper.
            self._client.handler.spawn(self._reload_after_new_session)

    def _reload_after_new_session(self) -> None:
        with self._lock:
            if self._reload_needed.is_set() and not self._stopped:
                self._reload_needed.clear()
                try:
                    self._reload()
                except KazooException as exc:
                    logger.warning("broker %d: config reload failed: %s", self._throttles.broker_id, exc)
                    self._reload_needed.set()

    def _reload(self) -> None:
        """Every throttle-bearing config, and the newest notification as the starting point."""
        names = self._notification_names()
        try:
            topics = self._client.get_children(f"{paths.CONFIG_PATH}/{paths.CONFIG_TYPE_TOPIC}")
        except NoNodeError:
            topics = []
        configs = self._store.get_entity_configs(paths.CONFIG_TYPE_TOPIC, topics) if topics else {}
        known = set(self._throttles.leader_replicas) | set(self._throttles.follower_replicas)
        for topic in known - set(configs):
            self._throttles.set_topic_config(topic, None)
        for topic, config in configs.items():
            self._throttles.set_topic_config(topic, config)
        self._reload_brokers()
        self._last_seq = max((seq for seq, _ in names), default=self._last_seq)
        self.reloads += 1

    def _reload_brokers(self) -> None:
        own = str(self._throttles.broker_id)
        configs = self._store.get_entity_configs(paths.CONFIG_TYPE_BROKER, [own, paths.DEFAULT_BROKER_CONFIG_ENTITY])
        self._throttles.set_broker_configs(configs[own], configs[paths.DEFAULT_BROKER_CONFIG_ENTITY])

    def _notification_names(self, children: list[str] | None = None) -> list[tuple[int, str]]:
        if children is None:
            try:
                children = self._client.get_children(paths.CONFIG_CHANGES_PATH)
            except NoNodeError:
                children = []
        out = []
        for name in children:
            if name.startswith(paths.CONFIG_CHANGE_PREFIX):
                suffix = name[len(paths.CONFIG_CHANGE_PREFIX) :]
                if suffix.isdigit():
                    out.append((int(suffix), name))
        return sorted(out)

    def _on_children(self, children: list[str]) -> bool:
        if self._stopped:
            return False
        try:
            with self._lock:
                self._process(self._notification_names(children))
        except KazooException as exc:
            logger.warning("broker %d: config notifications: %s", self._throttles.broker_id, exc)
            self._reload_needed.set()
        return True

    def _process(self, names: list[tuple[int, str]]) -> None:
        expired_before = self._wall_clock() - CHANGE_EXPIRATION_S
        for seq, name in names:
            path = f"{paths.CONFIG_CHANGES_PATH}/{name}"
            if seq <= self._last_seq:
                continue
            self._last_seq = seq
            try:
                data, _stat = self._client.get(path)
            except NoNodeError:
                continue
            try:
                entity_type, entity = entity_of_notification(data)
            except ValueError as exc:
                logger.warning("broker %d: ignoring %s: %s", self._throttles.broker_id, path, exc)
                continue
            self.notifications_processed += 1
            if entity_type == paths.CONFIG_TYPE_TOPIC:
                config = self._store.get_entity_configs(paths.CONFIG_TYPE_TOPIC, [entity])[entity]
                self._throttles.set_topic_config(entity, config)
            elif entity_type == paths.CONFIG_TYPE_BROKER and entity in (
                str(self._throttles.broker_id),
                paths.DEFAULT_BROKER_CONFIG_ENTITY,
            ):
                self._reload_brokers()
        if self._wall_clock() - self._last_purge >= PURGE_INTERVAL_S:
            self._last_purge = self._wall_clock()
            self._purge(names, expired_before)

    def _purge(self, names: list[tuple[int, str]], expired_before: float) -> None:
        """Delete processed notifications older than ``CHANGE_EXPIRATION_S`` (every broker may; the
        first to try wins, the others find them gone)."""
        for seq, name in names:
            if seq > self._last_seq:
                break
            path = f"{paths.CONFIG_CHANGES_PATH}/{name}"
            stat = self._client.exists(path)
            if stat is None or stat.ctime / 1000.0 >= expired_before:
                break  # sequence order is creation order: the rest are younger
            with contextlib.suppress(NoNodeError):
                self._client.delete(path)
