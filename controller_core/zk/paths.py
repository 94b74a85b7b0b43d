"""Every ZooKeeper path the ZooKeeper-era Kafka controller reads or writes (reference §1.1).

The layout is Kafka's own, byte for byte, so this package can also drive (or observe) a real
ZooKeeper-mode Kafka cluster. Path builders are plain string formatting: they are called hundreds of
thousands of times during a failover. Topic names are checked only for what would escape their
subtree (empty, ``.``/``..``, or a ``/``); full Kafka name validation is ``validate_topic_name``, used
by admin writes that create topics.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final

from controller_core.model import TopicPartition

# The largest znode the controller's requests are built to: ZooKeeper drops the connection of a
# client that sends a packet over the server's jute.maxbuffer (0xfffff bytes by default), so the
# caller sees ConnectionLoss, not a reason. Admin requests are checked against this before writing.
MAX_ZNODE_BYTES: Final = 1_000_000

# -- controller election ---------------------------------------------------------------------------
CONTROLLER_PATH: Final = "/controller"
CONTROLLER_EPOCH_PATH: Final = "/controller_epoch"

# -- brokers and topics ----------------------------------------------------------------------------
BROKERS_PATH: Final = "/brokers"
BROKER_IDS_PATH: Final = "/brokers/ids"
BROKER_SEQUENCE_ID_PATH: Final = "/brokers/seqid"
TOPICS_PATH: Final = "/brokers/topics"

# -- admin requests --------------------------------------------------------------------------------
ADMIN_PATH: Final = "/admin"
DELETE_TOPICS_PATH: Final = "/admin/delete_topics"
REASSIGN_PARTITIONS_PATH: Final = "/admin/reassign_partitions"
PREFERRED_REPLICA_ELECTION_PATH: Final = "/admin/preferred_replica_election"

# -- notifications (sequential children) -----------------------------------------------------------
ISR_CHANGE_NOTIFICATION_PATH: Final = "/isr_change_notification"
ISR_CHANGE_NOTIFICATION_PREFIX: Final = "isr_change_"
LOG_DIR_EVENT_NOTIFICATION_PATH: Final = "/log_dir_event_notification"
LOG_DIR_EVENT_NOTIFICATION_PREFIX: Final = "log_dir_event_"

# -- configs ---------------------------------------------------------------------------------------
CONFIG_PATH: Final = "/config"
CONFIG_CHANGES_PATH: Final = "/config/changes"
CONFIG_CHANGE_PREFIX: Final = "config_change_"
CONFIG_TYPE_TOPIC: Final = "topics"
CONFIG_TYPE_CLIENT: Final = "clients"
CONFIG_TYPE_USER: Final = "users"
CONFIG_TYPE_BROKER: Final = "brokers"
CONFIG_TYPE_IP: Final = "ips"
CONFIG_TYPES: Final = (CONFIG_TYPE_TOPIC, CONFIG_TYPE_CLIENT, CONFIG_TYPE_USER, CONFIG_TYPE_BROKER, CONFIG_TYPE_IP)
DEFAULT_BROKER_CONFIG_ENTITY: Final = "<default>"

# -- everything else -------------------------------------------------------------------------------
CLUSTER_ID_PATH: Final = "/cluster/id"
FEATURE_PATH: Final = "/feature"
CONSUMERS_PATH: Final = "/consumers"
LATEST_PRODUCER_ID_BLOCK_PATH: Final = "/latest_producer_id_block"

#: Kafka's ``ZkData.PersistentZkPaths``: created (with parents) at broker start-up when missing.
PERSISTENT_PATHS: Final[tuple[str, ...]] = (
    CONSUMERS_PATH,
    BROKER_IDS_PATH,
    TOPICS_PATH,
    CONFIG_CHANGES_PATH,
    DELETE_TOPICS_PATH,
    BROKER_SEQUENCE_ID_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
    LATEST_PRODUCER_ID_BLOCK_PATH,
    LOG_DIR_EVENT_NOTIFICATION_PATH,
    *(f"{CONFIG_PATH}/{config_type}" for config_type in CONFIG_TYPES),
)

_LEGAL_TOPIC: Final = re.compile(r"[a-zA-Z0-9._-]+")
MAX_TOPIC_NAME_LENGTH: Final = 249


def validate_topic_name(topic: str) -> None:
    """Raise ``ValueError`` unless ``topic`` is a legal Kafka topic name (Kafka's ``Topic.validate``)."""
    if not topic:
        raise ValueError("topic name is empty")
    if topic in {".", ".."}:
        raise ValueError(f"topic name cannot be {topic!r}")
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise ValueError(f"topic name is {len(topic)} characters long; the maximum is {MAX_TOPIC_NAME_LENGTH}")
    if not _LEGAL_TOPIC.fullmatch(topic):
        raise ValueError(f"topic name {topic!r} has characters other than ASCII letters, digits, '.', '_' and '-'")


def _checked(topic: str) -> str:
    # Cheap guard against a name that would address another subtree (e.g. deleting "/brokers/topics/").
    if not topic or "/" in topic or topic in {".", ".."}:
        raise ValueError(f"not a usable topic name in a ZooKeeper path: {topic!r}")
    return topic


# -- brokers ---------------------------------------------------------------------------------------
def broker_id_path(broker_id: int) -> str:
    """``/brokers/ids/<id>``: the broker's ephemeral registration."""
    return f"{BROKER_IDS_PATH}/{int(broker_id)}"


# -- topics and partitions -------------------------------------------------------------------------
def topic_path(topic: str) -> str:
    """``/brokers/topics/<topic>``: the replica assignment (and topic id)."""
    return f"{TOPICS_PATH}/{_checked(topic)}"


def partitions_path(topic: str) -> str:
    """``/brokers/topics/<topic>/partitions``."""
    return f"{TOPICS_PATH}/{_checked(topic)}/partitions"


def partition_path(tp: TopicPartition) -> str:
    """``/brokers/topics/<topic>/partitions/<p>``."""
    return f"{TOPICS_PATH}/{_checked(tp.topic)}/partitions/{int(tp.partition)}"


def partition_state_path(tp: TopicPartition) -> str:
    """``/brokers/topics/<topic>/partitions/<p>/state``: leader, leader epoch, ISR, controller epoch."""
    topic = tp.topic
    if not topic or "/" in topic or topic[0] == ".":
        _checked(topic)
    return f"/brokers/topics/{topic}/partitions/{tp.partition}/state"


def parse_partition_state_path(path: str) -> TopicPartition | None:
    """The partition whose state znode ``path`` is, or None for any other path."""
    parts = path.split("/")
    # ['', 'brokers', 'topics', <topic>, 'partitions', <p>, 'state']
    if (
        len(parts) == 7
        and parts[1] == "brokers"
        and parts[2] == "topics"
        and parts[4] == "partitions"
        and parts[6] == "state"
        and parts[5].isdigit()
        and parts[3]
    ):
        return TopicPartition(parts[3], int(parts[5]))
    return None


# -- admin -----------------------------------------------------------------------------------------
def delete_topic_path(topic: str) -> str:
    """``/admin/delete_topics/<topic>``: a request to delete the topic."""
    return f"{DELETE_TOPICS_PATH}/{_checked(topic)}"


# -- notifications ---------------------------------------------------------------------------------
def isr_change_notification_path(name: str) -> str:
    """``/isr_change_notification/<name>`` for a child name such as ``isr_change_0000000007``."""
    return f"{ISR_CHANGE_NOTIFICATION_PATH}/{_checked(name)}"


def log_dir_event_notification_path(name: str) -> str:
    """``/log_dir_event_notification/<name>`` for a child name such as ``log_dir_event_0000000003``."""
    return f"{LOG_DIR_EVENT_NOTIFICATION_PATH}/{_checked(name)}"


def sequence_number(name: str, prefix: str) -> int:
    """The ZooKeeper sequence suffix of a sequential child (``isr_change_0000000012`` -> 12)."""
    if not name.startswith(prefix) or not name[len(prefix) :].isdigit():
        raise ValueError(f"{name!r} is not a {prefix}<sequence> node")
    return int(name[len(prefix) :])


# -- configs ---------------------------------------------------------------------------------------
def entity_config_path(entity_type: str, entity: str) -> str:
    """``/config/<type>/<entity>`` (type is one of ``CONFIG_TYPES``)."""
    if entity_type not in CONFIG_TYPES:
        raise ValueError(f"unknown config entity type {entity_type!r}; expected one of {CONFIG_TYPES}")
    return f"{CONFIG_PATH}/{entity_type}/{_checked(entity)}"


def topic_config_path(topic: str) -> str:
    """``/config/topics/<topic>``: the topic's config overrides."""
    return f"{CONFIG_PATH}/{CONFIG_TYPE_TOPIC}/{_checked(topic)}"


def broker_config_path(broker: int | str) -> str:
    """``/config/brokers/<id>`` or, for ``"<default>"``, the cluster-wide dynamic broker defaults."""
    return f"{CONFIG_PATH}/{CONFIG_TYPE_BROKER}/{_checked(str(broker))}"


def under_chroot(chroot: str | None) -> Callable[[str], str]:
    """Return the function mapping a client path to the server's path under ``chroot``.

    Requests this package encodes itself (multi-read, multi, SetWatches) bypass kazoo's own path
    handling and must add the chroot the way kazoo does: ``/`` is the chroot itself, not ``chroot/``.
    """
    if not chroot:
        return lambda path: path
    return lambda path: chroot if path == "/" else chroot + path
