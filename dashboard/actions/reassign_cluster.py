"""What reassignment needs to read from a cluster: ZooKeeper (assignments, brokers and racks,
deletions, the pending request, partition states) and the broker agents' ``GET /v1/state``.

Shared by the web process (generate, validate, progress) and the worker (execute, monitor, cancel),
so both see the cluster the same way. Agents are optional: an observed Kafka cluster has none, and
then sizes and catch-up are reported as unknown rather than guessed.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from django.conf import settings

from controller_core.model import LeaderAndIsr, ReplicaAssignment, TopicPartition
from controller_core.protocol.client import controller_endpoint
from controller_core.reassign_plan import ClusterView, PartitionSize
from controller_core.zk.store import ZkStore
from dashboard.clusters.views.agent import agent_url

AGENT_MAX_BYTES = 8_000_000


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    id: int
    rack: str | None
    endpoints: tuple[str, ...]

    @property
    def agent_url(self) -> str | None:
        return agent_url(list(self.endpoints))


def read_brokers(store: ZkStore) -> dict[int, BrokerInfo]:
    out: dict[int, BrokerInfo] = {}
    for broker_id, reg in store.get_all_broker_registrations().items():
        out[broker_id] = BrokerInfo(broker_id, reg.rack, tuple(e.connection_string() for e in reg.endpoints))
    return out


def read_assignments(store: ZkStore, topics: Collection[str] | None = None) -> dict[TopicPartition, ReplicaAssignment]:
    names = sorted(store.get_all_topics()) if topics is None else sorted(set(topics))
    return {
        TopicPartition(t, p): a
        for t, ta in store.get_replica_assignments(names).items()
        for p, a in ta.partitions.items()
    }


def read_cluster_view(store: ZkStore, topics: Collection[str] | None = None) -> ClusterView:
    """The cluster as validation sees it; ``topics`` limits the assignments read (None: all)."""
    return ClusterView(
        assignments=read_assignments(store, topics),
        brokers=frozenset(store.get_broker_ids()),
        topics_being_deleted=frozenset(store.get_topic_deletions()),
        pending_request=store.get_partition_reassignment(),
    )


def read_leaders(store: ZkStore, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, LeaderAndIsr]:
    states = store.get_partition_states(list(partitions))
    return {tp: r.state.leader_and_isr for tp, r in states.items() if r.state is not None}


def read_controller_endpoint(store: ZkStore) -> str | None:
    """The controller API URL from ``/controller`` (None: no controller, or not ours)."""
    try:
        info = store.get_controller()
    except ValueError:
        return None
    return None if info is None else controller_endpoint(info.extra)


def fetch_agent_state(url: str, topics: Collection[str], timeout: float) -> dict[str, Any] | None:
    """One agent's ``/v1/state`` (filtered to one topic when only one is asked for); None when it
    does not answer or answers something else than a JSON object."""
    query = f"?topic={quote(next(iter(topics)))}" if len(topics) == 1 else ""
    try:
        with urllib.request.urlopen(url + query, timeout=timeout) as response:
            state = json.loads(response.read(AGENT_MAX_BYTES))
    except (urllib.error.URLError, TimeoutError, OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


def agent_replicas(
    brokers: Mapping[int, BrokerInfo], wanted: Collection[int], topics: Collection[str]
) -> dict[int, dict[TopicPartition, dict[str, Any]] | None]:
    """For each wanted broker, its replicas' entries from its agent by partition (None: no agent)."""
    timeout = float(settings.BROKER_AGENT_TIMEOUT_S)
    urls = {b: brokers[b].agent_url if b in brokers else None for b in wanted}
    out: dict[int, dict[TopicPartition, dict[str, Any]] | None] = {b: None for b in wanted}
    asked = {b: u for b, u in urls.items() if u}
    if not asked:
        return out
    topic_set = set(topics)
    with ThreadPoolExecutor(max_workers=min(8, len(asked))) as pool:
        futures = {b: pool.submit(fetch_agent_state, u, topic_set, timeout) for b, u in asked.items()}
        for b, future in futures.items():
            state = future.result()
            if state is None or not isinstance(state.get("replicas"), list):
                continue
            entries: dict[TopicPartition, dict[str, Any]] = {}
            for entry in state["replicas"]:
                if not isinstance(entry, dict):
                    continue
                topic, partition = entry.get("topic"), entry.get("partition")
                if isinstance(topic, str) and isinstance(partition, int) and topic in topic_set:
                    entries[TopicPartition(topic, partition)] = entry
            size = (state.get("config") or {}).get("message_size_bytes")
            if isinstance(size, int):
                for entry in entries.values():
                    entry.setdefault("message_size_bytes", size)
            out[b] = entries
    return out


def partition_sizes(
    store: ZkStore, brokers: Mapping[int, BrokerInfo], partitions: Collection[TopicPartition]
) -> dict[TopicPartition, PartitionSize]:
    """Each partition's log size as its leader's agent reports it (messages between log start and
    log end; bytes when the agent says its message size). Partitions without an answer are left out."""
    leaders = read_leaders(store, partitions)
    by_leader: dict[int, list[TopicPartition]] = {}
    for tp, lai in leaders.items():
        if lai.leader >= 0:
            by_leader.setdefault(lai.leader, []).append(tp)
    replicas = agent_replicas(brokers, list(by_leader), {tp.topic for tp in partitions})
    out: dict[TopicPartition, PartitionSize] = {}
    for leader, tps in by_leader.items():
        entries = replicas.get(leader)
        if entries is None:
            continue
        for tp in tps:
            entry = entries.get(tp)
            if entry is None:
                continue
            leo, start = entry.get("log_end_offset"), entry.get("log_start_offset")
            if not isinstance(leo, int) or leo < 0:
                continue
            messages = leo - (start if isinstance(start, int) and start >= 0 else 0)
            size = entry.get("message_size_bytes")
            out[tp] = PartitionSize(messages, messages * size if isinstance(size, int) else None)
    return out
