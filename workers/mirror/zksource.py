"""Read a cluster's ZooKeeper tree in Kafka's layout, setting the watches the mirror relies on.

Which znodes are watched, and why (the choice at 100,000 - 1,000,000 partitions):

* ``/controller``, ``/controller_epoch``: data watches (exists watch when absent).
* ``/brokers/ids``: child watch, plus a data watch per broker (a handful of znodes).
* ``/brokers/topics``: child watch, plus a data watch per topic znode (assignments, reassignment
  progress through ``adding_replicas``/``removing_replicas``); thousands, not millions.
* ``/admin``: child watch, and watches on ``delete_topics`` (children), ``reassign_partitions`` and
  ``preferred_replica_election`` (data / existence).
* Partition **state** znodes are *not* watched: one watch per partition is a million watches and a
  storm of a million notifications, and Kafka's own controller does not watch them either. They are
  read in bulk (``controller_core.zk.multiread``: ZooKeeper's multi-read) on every membership or
  controller change, for new partitions, to
  confirm what the controller's stream reported, and by a periodic sweep (see ``mirror.py``).

Every function takes the client first (kazoo recipe style) and a ``watch`` callback that must only
enqueue; a fired watch is re-armed by reading the path again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError
from kazoo.protocol.states import WatchedEvent, ZnodeStat

from controller_core.model import BrokerRegistration, ReplicaAssignment, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.multiread import DataResult, MultiReader
from workers.mirror.model import UNREAD
from workers.mirror.state import StateRead

T = TypeVar("T")

logger = logging.getLogger(__name__)

Watch = Callable[[WatchedEvent], None]
MIN_ISR_CONFIG = "min.insync.replicas"


def get_watched(client: KazooClient, path: str, watch: Watch) -> tuple[bytes, ZnodeStat] | None:
    """Read ``path`` with a data watch; when it does not exist, leave an existence watch instead."""
    for _ in range(3):
        try:
            data, stat = client.get(path, watch=watch)
            return data, stat
        except NoNodeError:
            if client.exists(path, watch=watch) is None:
                return None
    return None


def children_watched(client: KazooClient, path: str, watch: Watch) -> list[str]:
    """Children of ``path`` with a child watch; an existence watch when the parent is missing."""
    for _ in range(3):
        try:
            return list(client.get_children(path, watch=watch))
        except NoNodeError:
            if client.exists(path, watch=watch) is None:
                return []
    return []


def read_controller(client: KazooClient, watch: Watch) -> tuple[int | None, int | None]:
    """(controller broker id, controller epoch); ``None`` for what is absent or unreadable."""
    controller_id: int | None = None
    epoch: int | None = None
    got = get_watched(client, paths.CONTROLLER_PATH, watch)
    if got is not None:
        try:
            controller_id = codecs.decode_controller(got[0]).broker_id
        except ValueError as exc:
            logger.warning("unreadable /controller: %s", exc)
    got = get_watched(client, paths.CONTROLLER_EPOCH_PATH, watch)
    if got is not None:
        try:
            epoch = codecs.decode_controller_epoch(got[0])
        except ValueError as exc:
            logger.warning("unreadable /controller_epoch: %s", exc)
    return controller_id, epoch


def broker_summary(reg: BrokerRegistration) -> dict[str, Any]:
    """The JSON kept in Redis for one registered broker."""
    return {
        "id": reg.id,
        "endpoints": [e.connection_string() for e in reg.endpoints],
        "host": reg.endpoints[0].host if reg.endpoints else None,
        "rack": reg.rack,
        "epoch": reg.epoch,
        "timestamp": reg.timestamp_ms,
        "jmx_port": reg.jmx_port,
        "version": reg.version,
    }


def read_brokers(client: KazooClient, watch: Watch) -> dict[int, dict[str, Any]]:
    """Every registered broker, each with a data watch on its registration."""
    ids = [c for c in children_watched(client, paths.BROKER_IDS_PATH, watch) if c.isdigit()]
    asyncs = [(int(b), client.get_async(paths.broker_id_path(int(b)), watch=watch)) for b in ids]
    brokers: dict[int, dict[str, Any]] = {}
    for broker_id, async_result in asyncs:
        try:
            data, stat = async_result.get(timeout=15)
        except NoNodeError:
            continue  # deregistered between the listing and the read: the child watch fires again
        try:
            reg = codecs.decode_broker_registration(broker_id, data, stat.czxid)
        except ValueError as exc:
            logger.warning("unreadable registration of broker %s: %s", broker_id, exc)
            brokers[broker_id] = {"id": broker_id, "endpoints": [], "error": str(exc), "epoch": stat.czxid}
            continue
        brokers[broker_id] = broker_summary(reg)
    return brokers


def read_topic_names(client: KazooClient, watch: Watch) -> list[str]:
    return children_watched(client, paths.TOPICS_PATH, watch)


def read_topics(
    client: KazooClient, topics: Sequence[str], watch: Watch
) -> dict[str, tuple[str | None, dict[int, ReplicaAssignment]] | None]:
    """Topic znodes (pipelined, each with a data watch); ``None`` for topics gone meanwhile."""
    out: dict[str, tuple[str | None, dict[int, ReplicaAssignment]] | None] = {}
    window = 2000
    for start in range(0, len(topics), window):
        batch = topics[start : start + window]
        asyncs = [(t, client.get_async(paths.topic_path(t), watch=watch)) for t in batch]
        for topic, async_result in asyncs:
            try:
                data, _stat = async_result.get(timeout=30)
            except NoNodeError:
                out[topic] = None
                continue
            try:
                decoded = codecs.decode_topic_assignment(topic, data)
            except ValueError as exc:
                logger.warning("unreadable topic znode %s: %s", topic, exc)
                out[topic] = (None, {})
                continue
            out[topic] = (decoded.topic_id, decoded.partitions)
    return out


def read_min_isr(reader: MultiReader, topics: Sequence[str]) -> dict[str, int | None]:
    """``min.insync.replicas`` overrides from ``/config/topics/<t>`` (None: no override)."""
    results = reader.get_data([paths.topic_config_path(t) for t in topics], size_hint=100)
    out: dict[str, int | None] = {}
    for topic, result in zip(topics, results, strict=True):
        value: int | None = None
        if result.ok:
            try:
                raw = codecs.decode_entity_config(result.data, paths.topic_config_path(topic)).get(MIN_ISR_CONFIG)
                value = int(raw) if raw is not None and raw.isdigit() else None
            except ValueError as exc:
                logger.warning("unreadable config of topic %s: %s", topic, exc)
        out[topic] = value
    return out


def read_states(reader: MultiReader, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, StateRead | None]:
    """Bulk-read state znodes; unreadable ones are logged and left out (not reported as missing)."""
    results = reader.get_data([paths.partition_state_path(tp) for tp in partitions], size_hint=80)
    reads = decode_states(partitions, results)
    return {tp: read for tp, read in zip(partitions, reads, strict=True) if read is not UNREAD}


def submit_states(reader: MultiReader, partitions: Sequence[TopicPartition]) -> Callable[[], list[DataResult]]:
    """Send the state reads of ``partitions`` now; the returned call waits for their results.

    For a caller that applies one read while ZooKeeper answers the next (``decode_states`` then).
    """
    return reader.submit_data([paths.partition_state_path(tp) for tp in partitions], size_hint=80)


def decode_states(
    partitions: Sequence[TopicPartition],
    results: Sequence[DataResult],
    known_mzxids: Sequence[int] | None = None,
) -> list[StateRead | None]:
    """The raw reads of ``partitions`` decoded, in the same order: ``None`` where the znode is
    missing, ``UNREAD`` where it could not be read or decoded (logged) and, with ``known_mzxids``
    (the modification zxid held for each), where it did not change since: a sweep of 100,000
    unchanged states then costs the reads, not 100,000 JSON parses."""
    out: list[StateRead | None] = []
    append = out.append
    decode = codecs.decode_partition_state
    known = known_mzxids if known_mzxids is not None else [-2] * len(partitions)
    for tp, result, held in zip(partitions, results, known, strict=True):
        if result.error is not None:
            if result.missing:
                append(None)
            else:
                logger.warning("cannot read the state of %s: %s", tp, result.error)
                append(UNREAD)
            continue
        data, stat = result.data, result.stat
        if stat.mzxid == held:
            append(UNREAD)
            continue
        try:
            st = decode(data, stat.version)
        except ValueError as exc:
            logger.warning("unreadable state of %s: %s", tp, exc)
            append(UNREAD)
            continue
        lai = st.leader_and_isr
        append(StateRead(lai.leader, lai.leader_epoch, lai.isr, st.controller_epoch, stat.version, stat.mzxid))
    return out


def read_admin(client: KazooClient, watch: Watch) -> dict[str, Any]:
    """Pending admin requests: topics to delete, a legacy reassignment, a preferred election."""
    out: dict[str, Any] = {}
    children_watched(client, paths.ADMIN_PATH, watch)
    out["delete_topics"] = sorted(children_watched(client, paths.DELETE_TOPICS_PATH, watch))
    no_reassignment: dict[TopicPartition, tuple[int, ...]] = {}
    out["reassign_partitions"] = _decoded(
        get_watched(client, paths.REASSIGN_PARTITIONS_PATH, watch),
        codecs.decode_reassignment,
        paths.REASSIGN_PARTITIONS_PATH,
        no_reassignment,
    )
    no_election: set[TopicPartition] = set()
    out["preferred_replica_election"] = _decoded(
        get_watched(client, paths.PREFERRED_REPLICA_ELECTION_PATH, watch),
        codecs.decode_preferred_replica_election,
        paths.PREFERRED_REPLICA_ELECTION_PATH,
        no_election,
    )
    return out


def _decoded(got: tuple[bytes, ZnodeStat] | None, decode: Callable[[bytes | None], T], path: str, empty: T) -> T:
    """``decode`` an admin znode's data; ``empty`` when it is absent or unreadable (logged: the pages
    show no pending request rather than the mirror stopping on one malformed znode)."""
    if got is None:
        return empty
    try:
        return decode(got[0])
    except ValueError as exc:
        logger.warning("unreadable %s: %s", path, exc)
        return empty
