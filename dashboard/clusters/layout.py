"""The Redis layout of a cluster's mirror: key names, member names, counter names and row codecs.

Why one module: the mirror (``workers/mirror``) writes these keys and the pages and WebSocket
consumers (``dashboard``) read them. ``dashboard`` may not import ``workers``, so the contract lives
here and the mirror imports it. Nothing here touches Django or Redis; it is plain data and strings.

Keys (``{c}`` is the cluster name; ``m`` keeps the mirror's keys apart from the controller's)::

    kcp:{c}:m:meta                 hash   gen, seq, mode, zk_state, synced_at, heartbeat_at, lag_ms,
                                          controller_id, controller_epoch, stream_id, resyncs, owner
    kcp:{c}:m:counts               hash   cluster counters (see "Counters" below) -> int
    kcp:{c}:m:topics               hash   topic -> JSON summary {"n","rf","id","del","mi","c":{counters}}
    kcp:{c}:m:partitions           hash   member ("orders/000003") -> JSON partition row (``encode_row``)
    kcp:{c}:m:brokers              hash   broker id -> JSON registration summary
    kcp:{c}:m:admin                hash   admin request name -> JSON (pending /admin/* requests)
    kcp:{c}:m:pz:{State}           zset   partitions in a partition state (score 0, lexical order)
    kcp:{c}:m:rz:{State}           zset   replicas in a replica state ("orders/000003@5")
    kcp:{c}:m:pzb:{broker}:{State} zset   partitions hosted by ``broker`` in a partition state
    kcp:{c}:m:rzb:{broker}:{State} zset   partitions whose replica on ``broker`` is in a replica state
    kcp:{c}:m:bz:{broker}          zset   partitions hosted by ``broker``
    kcp:{c}:m:interest             zset   "scope|channel" -> expiry (ms): which live scopes have viewers
    kcp:{c}:m:lock                 string the active mirror's token (TTL, renewed)
    kcp:{c}:m:staging:{gen}:...    any    a full rewrite's keys before they are renamed into place

Sorted sets with one score give O(log n) pagination by rank (``ZRANGE key start stop``) and a
topic's members by lexical range (``ZRANGE key [t/ (t0 BYLEX``): ``/`` cannot appear in a topic name
and ``0`` is the character right after it, so the range holds exactly that topic's partitions.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from controller_core.states import PartitionState, ReplicaState
from dashboard.lib.redis_keys import PREFIX

PARTITION_STATES: Final = tuple(str(s) for s in PartitionState)
REPLICA_STATES: Final = tuple(str(s) for s in ReplicaState)
_PARTITION_DIGITS: Final = 6


def _base(cluster: str) -> str:
    return f"{PREFIX}:{cluster}:m"


def _cluster_key(name: str) -> Callable[[str], str]:
    """The builder of one per-cluster mirror key, ``kcp:{cluster}:m:{name}`` (the table above)."""
    suffix = f":m:{name}"

    def key(cluster: str) -> str:
        return f"{PREFIX}:{cluster}{suffix}"

    key.__name__ = key.__qualname__ = f"{name}_key"
    return key


meta_key: Final = _cluster_key("meta")
counts_key: Final = _cluster_key("counts")
topics_key: Final = _cluster_key("topics")
partitions_key: Final = _cluster_key("partitions")
brokers_key: Final = _cluster_key("brokers")
admin_key: Final = _cluster_key("admin")
interest_key: Final = _cluster_key("interest")
lock_key: Final = _cluster_key("lock")


def partition_state_set(cluster: str, state: str, broker: int | None = None) -> str:
    """The zset of partitions in ``state`` (hosted by ``broker`` when given)."""
    if broker is None:
        return f"{_base(cluster)}:pz:{state}"
    return f"{_base(cluster)}:pzb:{broker}:{state}"


def replica_state_set(cluster: str, state: str, broker: int | None = None) -> str:
    """The zset of replicas in ``state``; per broker its members are partitions, else replicas."""
    if broker is None:
        return f"{_base(cluster)}:rz:{state}"
    return f"{_base(cluster)}:rzb:{broker}:{state}"


def hosted_set(cluster: str, broker: int) -> str:
    return f"{_base(cluster)}:bz:{broker}"


def staging_prefix(cluster: str, gen: str) -> str:
    """Where a full rewrite of generation ``gen`` stages its keys before swapping them in: under the
    cluster's mirror prefix, so ``all_mirror_keys_pattern`` finds the leftovers of one that died."""
    return f"{_base(cluster)}:staging:{gen}:"


def staging_key(cluster: str, key: str, gen: str) -> str:
    """The staging name of ``key``, one of ``cluster``'s mirror keys."""
    base = _base(cluster) + ":"
    if not key.startswith(base):
        raise ValueError(f"{key!r} is not a mirror key of {cluster!r}")
    return staging_prefix(cluster, gen) + key[len(base) :]


def all_mirror_keys_pattern(cluster: str) -> str:
    """A SCAN pattern for every key the mirror owns (lock and interest excluded by the caller)."""
    return f"{_base(cluster)}:*"


# -- member names -----------------------------------------------------------------------------------
def member(topic: str, partition: int) -> str:
    """``orders/000003``: sorts by topic, then numerically by partition."""
    return f"{topic}/{partition:0{_PARTITION_DIGITS}d}"


def replica_member(topic: str, partition: int, broker: int) -> str:
    return f"{topic}/{partition:0{_PARTITION_DIGITS}d}@{broker}"


def parse_member(text: str) -> tuple[str, int, int | None]:
    """Split ``orders/000003`` or ``orders/000003@5`` into (topic, partition, broker or None)."""
    body, _, broker = text.partition("@")
    topic, _, partition = body.rpartition("/")
    if not topic or not partition.isdigit():
        raise ValueError(f"not a mirror member name: {text!r}")
    return topic, int(partition), int(broker) if broker else None


def topic_lex_range(topic: str) -> tuple[str, str]:
    """The ``BYLEX`` bounds selecting exactly ``topic``'s members."""
    return f"[{topic}/", f"({topic}0"


def display_name(topic: str, partition: int) -> str:
    """Kafka's usual spelling of a partition: ``orders-3``."""
    return f"{topic}-{partition}"


# -- counters ---------------------------------------------------------------------------------------
# Plain counters, kept for the cluster and for every topic:
PARTITIONS: Final = "partitions"
REPLICAS: Final = "replicas"
OFFLINE: Final = "offline"  # no live leader (leader -1 or not registered)
UNDER_REPLICATED: Final = "urp"  # ISR smaller than the replica list
UNDER_MIN_ISR: Final = "umi"  # ISR smaller than min.insync.replicas
NON_PREFERRED: Final = "nonpref"  # leader is not the first replica (Kafka's preferred-replica imbalance)
REASSIGNING: Final = "reassigning"  # adding or removing replicas (KIP-455) or named in /admin
# Cluster-only gauges set directly by the mirror:
LIVE_BROKERS: Final = "brokers"
TOPICS: Final = "topics"


def pstate_counter(state: str) -> str:
    return f"p:{state}"


def rstate_counter(state: str) -> str:
    return f"r:{state}"


def broker_counter(broker: int, name: str) -> str:
    """Per-broker counters: ``leaders``, ``replicas``, ``p:<State>`` (hosted partitions), ``r:<State>``."""
    return f"b:{broker}:{name}"


def broker_scope_counts(counts: Mapping[str, int], broker: int) -> dict[str, int]:
    """The cluster counters of one broker, renamed to scope-neutral names (``p:..``, ``leaders``)."""
    prefix = f"b:{broker}:"
    return {key[len(prefix) :]: value for key, value in counts.items() if key.startswith(prefix)}


def per_broker(counts: Mapping[str, int], name: str) -> dict[int, int]:
    """``{broker: value}`` of one per-broker counter (``leaders`` or ``replicas``)."""
    out: dict[int, int] = {}
    suffix = f":{name}"
    for key, value in counts.items():
        if key.startswith("b:") and key.endswith(suffix):
            middle = key[2 : -len(suffix)]
            if middle.lstrip("-").isdigit():
                out[int(middle)] = value
    return out


# -- partition rows ---------------------------------------------------------------------------------
@dataclass(slots=True)
class PartitionRow:
    """Everything the dashboard shows about one partition, as the mirror last saw it.

    ``zk_version``/``mzxid`` are the state znode's (-1 when it has none yet); ``derived`` says the
    partition state was derived from ZooKeeper (observed mode, or no controller record yet) and
    ``replica_derived`` the same for the replica states.
    """

    topic: str
    partition: int
    replicas: tuple[int, ...] = ()
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()
    leader: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    controller_epoch: int = -1
    zk_version: int = -1
    mzxid: int = -1
    state: str = PartitionState.NEW
    replica_states: dict[int, str] = field(default_factory=dict)
    derived: bool = True
    replica_derived: bool = True
    admin_reassign: bool = False
    # The signature this row was counted with (the mirror's bookkeeping, ``workers.mirror.contributions``;
    # never encoded): uncounting exactly that keeps counters exact even after the broker set moved.
    counted: tuple[Any, ...] | None = field(default=None, compare=False, repr=False)

    @property
    def name(self) -> str:
        return display_name(self.topic, self.partition)

    @property
    def member(self) -> str:
        return member(self.topic, self.partition)

    @property
    def preferred(self) -> int | None:
        return self.replicas[0] if self.replicas else None

    @property
    def reassigning(self) -> bool:
        return bool(self.adding or self.removing or self.admin_reassign)

    def clone(self) -> PartitionRow:
        """A copy with its own ``replica_states`` (much cheaper than ``dataclasses.replace``)."""
        return PartitionRow(
            self.topic,
            self.partition,
            self.replicas,
            self.adding,
            self.removing,
            self.leader,
            self.leader_epoch,
            self.isr,
            self.controller_epoch,
            self.zk_version,
            self.mzxid,
            self.state,
            dict(self.replica_states),
            self.derived,
            self.replica_derived,
            self.admin_reassign,
        )


# Replica lists, ISRs and replica-state maps repeat across a cluster's partitions: their JSON is
# cached (a storm's flushes encode tens of thousands of rows with a few hundred distinct ones).
@functools.lru_cache(maxsize=8192)
def _ints(values: tuple[int, ...]) -> str:
    return "[" + ",".join(map(str, values)) + "]"


@functools.lru_cache(maxsize=8192)
def _replica_states(items: tuple[tuple[int, str], ...]) -> str:
    return "{" + ",".join(f'"{b}":"{s}"' for b, s in items) + "}"


def encode_row(row: PartitionRow) -> str:
    """Compact JSON for the ``partitions`` hash (about 120 bytes for RF 3).

    Built by hand because it runs for every changed partition of a flush (tens of thousands in a
    failover); every string in it is a state name from a fixed set, so nothing needs escaping.
    """
    rs = _replica_states(tuple(row.replica_states.items()))
    text = (
        f'{{"r":{_ints(row.replicas)},"l":{row.leader},"e":{row.leader_epoch},"i":{_ints(row.isr)},'
        f'"c":{row.controller_epoch},"v":{row.zk_version},"z":{row.mzxid},"s":"{row.state}","rs":{rs}'
    )
    if row.adding:
        text += f',"a":{_ints(row.adding)}'
    if row.removing:
        text += f',"x":{_ints(row.removing)}'
    if row.derived:
        text += ',"d":1'
    if row.replica_derived:
        text += ',"rd":1'
    if row.admin_reassign:
        text += ',"ar":1'
    return text + "}"


def decode_row(member_name: str, text: str | bytes) -> PartitionRow:
    """Inverse of ``encode_row`` for the member ``member_name``."""
    topic, partition, _ = parse_member(member_name)
    obj = json.loads(text)
    return PartitionRow(
        topic=topic,
        partition=partition,
        replicas=tuple(obj.get("r", ())),
        adding=tuple(obj.get("a", ())),
        removing=tuple(obj.get("x", ())),
        leader=int(obj.get("l", -1)),
        leader_epoch=int(obj.get("e", -1)),
        isr=tuple(obj.get("i", ())),
        controller_epoch=int(obj.get("c", -1)),
        zk_version=int(obj.get("v", -1)),
        mzxid=int(obj.get("z", -1)),
        state=str(obj.get("s", PartitionState.NEW)),
        replica_states={int(b): str(s) for b, s in obj.get("rs", {}).items()},
        derived=bool(obj.get("d")),
        replica_derived=bool(obj.get("rd")),
        admin_reassign=bool(obj.get("ar")),
    )


def row_view(row: PartitionRow) -> dict[str, Any]:
    """The JSON a browser gets for one partition (pages and deltas use the same shape)."""
    isr = set(row.isr)
    return {
        "topic": row.topic,
        "partition": row.partition,
        "name": row.name,
        "leader": row.leader,
        "leader_epoch": row.leader_epoch,
        "controller_epoch": row.controller_epoch,
        "replicas": [{"id": r, "in_isr": r in isr, "state": row.replica_states.get(r, "")} for r in row.replicas],
        "isr": list(row.isr),
        "preferred": row.preferred,
        "preferred_leader": row.leader >= 0 and row.leader == row.preferred,
        "state": row.state,
        "derived": row.derived,
        "replica_derived": row.replica_derived,
        "reassigning": row.reassigning,
        "adding": list(row.adding),
        "removing": list(row.removing),
        "zk_version": row.zk_version,
    }


def topic_summary(
    partitions: int,
    replication_factor: int,
    counters: Mapping[str, int],
    topic_id: str | None,
    marked_for_deletion: bool,
    min_isr: int,
) -> str:
    """The JSON value of one ``topics`` hash field (compact, as ``json.dumps`` with tight separators).

    msgspec, not ``json.dumps``: a storm rewrites every touched topic's summary in each flush (1,000
    topics a flush at 100,000 partitions), and msgspec encodes one in ~1 µs instead of ~9 µs.
    """
    return _JSON.encode(
        {
            "n": partitions,
            "rf": replication_factor,
            "id": topic_id,
            "del": marked_for_deletion,
            "mi": min_isr,
            "c": {k: v for k, v in counters.items() if v},
        }
    ).decode()


_JSON: Final = msgspec.json.Encoder()


def decode_topic_summary(text: str | bytes) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads(text)
    return obj


def topic_counter_names() -> Iterable[str]:
    """Every counter a topic summary may carry (missing ones are zero)."""
    yield from (PARTITIONS, REPLICAS, OFFLINE, UNDER_REPLICATED, UNDER_MIN_ISR, NON_PREFERRED, REASSIGNING)
    yield from (pstate_counter(s) for s in PARTITION_STATES)
    yield from (rstate_counter(s) for s in REPLICA_STATES)
