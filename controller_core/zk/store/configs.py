"""Entity configs and the notification znodes (reference §1.2.7-§1.2.9, §8.8, §8.10).

``/config/<type>/<entity>`` overrides with their ``/config/changes`` announcements, and the
sequential notifications brokers leave for the controller (``/isr_change_notification``,
``/log_dir_event_notification``). Why together: each is written by an admin or a broker, read in
bulk by the controller, and (for notifications) deleted by it, fenced, once handled; unreadable
ones are logged and skipped, never fatal.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TypeVar

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from controller_core.model import TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store.engine import FencedMultiEngine

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ConfigAndNotificationZnodes(FencedMultiEngine):
    """Config overrides, config changes and broker notifications."""

    # ==============================================================================================
    # configs (reference §1.2.9)
    # ==============================================================================================
    def get_topic_configs(self, topics: Collection[str]) -> dict[str, Mapping[str, str]]:
        """Each topic's overrides from ``/config/topics/<t>`` (empty when absent or unreadable)."""
        return self.get_entity_configs(paths.CONFIG_TYPE_TOPIC, topics)

    def get_entity_configs(self, entity_type: str, entities: Collection[str]) -> dict[str, Mapping[str, str]]:
        """Config overrides of ``/config/<type>/<entity>`` for each entity, in bulk (empty when absent;
        unreadable JSON is logged and read as empty, so a bad override falls back to the defaults)."""
        names = list(dict.fromkeys(entities))
        results = self._read_data([paths.entity_config_path(entity_type, n) for n in names], size_hint=256)
        out: dict[str, Mapping[str, str]] = {}
        for name, r in zip(names, results, strict=True):
            config: Mapping[str, str] = {}
            if r.error is None:
                try:
                    config = codecs.decode_entity_config(r.data, f"/config/{entity_type}/{name}")
                except ValueError as exc:
                    logger.error("ignoring unreadable config: %s", exc)
            out[name] = config
        return out

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        """Replace a topic's overrides and announce the change, as ``kafka-configs`` does (unfenced
        admin write): set-or-create ``/config/topics/<t>``, then a ``/config/changes`` notification."""
        self._set_or_create(paths.topic_config_path(topic), codecs.encode_entity_config(config))
        self._client.create(
            f"{paths.CONFIG_CHANGES_PATH}/{paths.CONFIG_CHANGE_PREFIX}",
            codecs.encode_config_change_notification(f"{paths.CONFIG_TYPE_TOPIC}/{topic}"),
            sequence=True,
            makepath=True,
        )

    def alter_entity_config(
        self, entity_type: str, entity: str, updates: Mapping[str, str], deletes: Collection[str] = ()
    ) -> dict[str, str]:
        """Set ``updates`` and remove ``deletes`` in ``/config/<type>/<entity>``, keeping every other
        override, then announce it with ``{"version":2,"entity_path":"<type>/<entity>"}`` as
        ``kafka-configs --alter`` does (unfenced admin write; a concurrent writer makes it retry on the
        znode version). Returns the new overrides; nothing is written when nothing changes."""
        path = paths.entity_config_path(entity_type, entity)
        while True:
            try:
                data, stat = self._client.get(path)
                version: int | None = stat.version
            except NoNodeError:
                data, version = None, None
            current = codecs.decode_entity_config(data, path)
            wanted = {k: v for k, v in current.items() if k not in deletes}
            wanted.update(updates)
            if wanted == current and version is not None:
                return wanted
            if version is None and not wanted:
                return wanted
            payload = codecs.encode_entity_config(wanted)
            try:
                if version is None:
                    self._client.create(path, payload, makepath=True)
                else:
                    self._client.set(path, payload, version=version)
            except (NodeExistsError, BadVersionError, NoNodeError):
                continue
            break
        self._client.create(
            f"{paths.CONFIG_CHANGES_PATH}/{paths.CONFIG_CHANGE_PREFIX}",
            codecs.encode_config_change_notification(f"{entity_type}/{entity}"),
            sequence=True,
            makepath=True,
        )
        return wanted

    def delete_topic_configs(self, topics: Collection[str], expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/config/topics/<t>`` of each topic (topic deletion); fenced; absent ones are fine."""
        self._delete_all([paths.topic_config_path(t) for t in topics], expected_controller_epoch_zk_version)

    # ==============================================================================================
    # notifications (reference §1.2.7, §1.2.8, §8.8, §8.10)
    # ==============================================================================================
    def get_isr_change_notification_names(self) -> list[str]:
        """Child names of ``/isr_change_notification``, in sequence order."""
        return self._sequential_children(paths.ISR_CHANGE_NOTIFICATION_PATH, paths.ISR_CHANGE_NOTIFICATION_PREFIX)

    def get_isr_change_notifications(self, names: Sequence[str]) -> dict[str, set[TopicPartition]]:
        """The partitions of each named notification, in bulk; vanished or unreadable ones are left out."""
        return self._read_notifications(
            names, paths.isr_change_notification_path, codecs.decode_isr_change_notification, 512
        )

    def delete_isr_change_notifications(
        self, names: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete the named ISR-change notifications; fenced; absent ones are fine."""
        self._delete_all([paths.isr_change_notification_path(n) for n in names], expected_controller_epoch_zk_version)

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """Publish an ISR-change notification as a pre-AlterIsr partition leader does; returns its name."""
        return self._create_notification(
            paths.ISR_CHANGE_NOTIFICATION_PATH,
            paths.ISR_CHANGE_NOTIFICATION_PREFIX,
            codecs.encode_isr_change_notification(partitions),
        )

    def get_log_dir_event_notification_names(self) -> list[str]:
        """Child names of ``/log_dir_event_notification``, in sequence order."""
        return self._sequential_children(paths.LOG_DIR_EVENT_NOTIFICATION_PATH, paths.LOG_DIR_EVENT_NOTIFICATION_PREFIX)

    def get_log_dir_event_broker_ids(self, names: Sequence[str]) -> dict[str, int]:
        """The broker id of each named log-dir event notification; vanished/unreadable ones left out."""
        return self._read_notifications(names, paths.log_dir_event_notification_path, codecs.decode_log_dir_event, 64)

    def delete_log_dir_event_notifications(
        self, names: Collection[str], expected_controller_epoch_zk_version: int
    ) -> None:
        """Delete the named log-dir event notifications; fenced; absent ones are fine."""
        self._delete_all(
            [paths.log_dir_event_notification_path(n) for n in names], expected_controller_epoch_zk_version
        )

    def create_log_dir_event_notification(self, broker_id: int) -> str:
        """Publish a log-dir failure event for ``broker_id`` (broker side); returns the node name."""
        return self._create_notification(
            paths.LOG_DIR_EVENT_NOTIFICATION_PATH,
            paths.LOG_DIR_EVENT_NOTIFICATION_PREFIX,
            codecs.encode_log_dir_event(broker_id),
        )

    def _read_notifications(
        self, names: Sequence[str], path_of: Callable[[str], str], decode: Callable[[bytes | None], T], size_hint: int
    ) -> dict[str, T]:
        """Each named notification decoded, in bulk: a vanished one is left out, an unreadable one
        logged and left out (a broker's bad notification must not stop the controller)."""
        results = self._read_data([path_of(n) for n in names], size_hint=size_hint)
        out: dict[str, T] = {}
        for name, r in zip(names, results, strict=True):
            if r.error is None:
                try:
                    out[name] = decode(r.data)
                except ValueError as exc:
                    logger.warning("ignoring notification %s: %s", path_of(name), exc)
        return out

    def _create_notification(self, parent: str, prefix: str, data: bytes) -> str:
        """Create a sequential notification under ``parent`` (and the parent if missing); its name."""
        created: str = self._client.create(f"{parent}/{prefix}", data, sequence=True, makepath=True)
        return created.rsplit("/", 1)[1]
