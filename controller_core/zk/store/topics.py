"""Topics and their partition states (reference §1.2.3, §1.2.4, §8.7, §10).

Topic assignment znodes (``/brokers/topics/<t>``) and the per-partition ``state`` znodes the
controller reads and conditionally rewrites (``ports.PartitionStateStore``). Why together: a
partition state's parents are the topic's znodes, so creating states and deleting topics walk the
same tree, in phases (parents before children, children before parents).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from operator import attrgetter, itemgetter
from typing import Any, Final, NamedTuple, cast, overload

from kazoo.exceptions import NodeExistsError, ZookeeperError

from controller_core.errors import ZkOperationError
from controller_core.model import LeaderAndIsr, LeaderIsrAndControllerEpoch, ReplicaAssignment, TopicPartition
from controller_core.ports import LeaderAndIsrWrite, PartitionStateRead, UpdateLeaderAndIsrResult, ZkCode
from controller_core.zk import codecs, paths
from controller_core.zk.codecs import TopicAssignment
from controller_core.zk.jute import INT
from controller_core.zk.multiread import LazyPaths
from controller_core.zk.store.engine import FencedMultiEngine, write_stream_switch
from controller_core.zk.store.wire import CREATE, PATH_HEADERS, REPLY_BYTES, SET, TXN_SLACK, Op, zk_code

logger = logging.getLogger(__name__)


class LeadershipBatch(NamedTuple):
    """One batch of ``TopicZnodes.iter_partition_leadership``."""

    partitions: list[TopicPartition]
    states: list[LeaderIsrAndControllerEpoch | None]
    """Each partition's decoded state; None where its znode is missing or unreadable."""
    complete: bool
    """Every state is there (no None)."""


_StateBatch = tuple[
    list[TopicPartition],
    dict[int, ZookeeperError],
    list[LeaderIsrAndControllerEpoch | None],
    dict[int, ValueError],
]


class _StatePaths(LazyPaths):
    """The state znode paths of partitions, made a request at a time, and encoded for the request in
    one step with a prefix per topic (``MultiReader``'s ``EncodedPaths``): a cold failover's million
    paths, a third of a microsecond each made as ``str`` then encoded."""

    __slots__ = ("_partitions", "_prefixes")

    def __init__(self, partitions: Sequence[TopicPartition]) -> None:
        super().__init__(partitions, paths.partition_state_path)
        self._partitions = partitions
        self._prefixes: dict[str, bytes] = {}

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return _StatePaths(self._partitions[index])
        return paths.partition_state_path(self._partitions[index])

    def encoded(self, start: int, stop: int, full: Callable[[str], str]) -> list[bytes]:
        prefixes = self._prefixes
        out: list[bytes] = []
        append = out.append
        for topic, partition in self._partitions[start:stop]:
            prefix = prefixes.get(topic)
            if prefix is None:
                prefix = prefixes[topic] = _partitions_prefix(topic, full)
            append(b"%s%d/state" % (prefix, partition))
        return out


def _partitions_prefix(topic: str, full: Callable[[str], str]) -> bytes:
    """The chrooted ``/brokers/topics/<topic>/partitions/`` of a state znode path, encoded: the part
    shared by a topic's state paths (``paths.partitions_path`` checks the name, as
    ``partition_state_path`` does)."""
    return full(paths.partitions_path(topic) + "/").encode()


class TopicZnodes(FencedMultiEngine):
    """Topic assignments and partition states (implements ``ports.PartitionStateStore``)."""

    # ==============================================================================================
    # topics (reference §1.2.3, §8.7, §10)
    # ==============================================================================================
    def get_all_topics(self) -> set[str]:
        """Names of all topics (children of ``/brokers/topics``; empty when the path is missing)."""
        return set(self._children(paths.TOPICS_PATH))

    def get_replica_assignments(self, topics: Collection[str]) -> dict[str, TopicAssignment]:
        """Each existing topic's ``(topic_id, {partition: ReplicaAssignment})``, read in bulk.

        Topics without a znode are left out. A topic znode that is not Kafka's JSON is logged as an
        error and returned as an empty assignment (no partitions), rather than failing a failover.
        """
        out: dict[str, TopicAssignment] = {}
        for chunk in self.iter_replica_assignments(topics):
            out.update(chunk)
        return out

    def iter_replica_assignments(self, topics: Collection[str]) -> Iterator[dict[str, TopicAssignment]]:
        """``get_replica_assignments`` a multi-read at a time, in the order of ``topics``, as ZooKeeper
        answers (the next reads in flight): a cold failover loads each chunk while the next is read."""
        names = list(dict.fromkeys(topics))
        shared: dict[tuple[int, ...], ReplicaAssignment] = {}  # one object per distinct replica list
        start = 0
        for results in self._iter_data(LazyPaths(names, paths.topic_path), size_hint=2048):
            out: dict[str, TopicAssignment] = {}
            for topic, r in zip(names[start : start + len(results)], results, strict=True):
                if r.error is not None:
                    continue
                try:
                    out[topic] = codecs.decode_topic_assignment(topic, r.data, shared)
                except ValueError as exc:
                    logger.error("unreadable assignment of topic %s: %s", topic, exc)
                    out[topic] = TopicAssignment(None, {})
            start += len(results)
            yield out

    def get_partition_znode_ids(self, topics: Collection[str]) -> dict[str, set[int]]:
        """For each topic, the partitions that have a ``/partitions/<p>`` znode (empty when none)."""
        names = list(dict.fromkeys(topics))
        results = self.reader.get_children([paths.partitions_path(t) for t in names], size_hint=1024)
        return {t: {int(c) for c in (r.children or ()) if c.isdigit()} for t, r in zip(names, results, strict=True)}

    def create_topic(
        self,
        topic: str,
        assignment: Mapping[int, Sequence[int] | ReplicaAssignment],
        config: Mapping[str, str] | None = None,
        topic_id: str | None = None,
    ) -> None:
        """Create a topic as ``kafka-topics`` does (unfenced admin write).

        Validates the name and the assignment (partitions 0..n-1, non-empty distinct replica lists of
        one size), writes ``/config/topics/<t>`` first, then creates ``/brokers/topics/<t>``. Raises
        ``ValueError`` on invalid input and ``ZkOperationError`` (NODEEXISTS) when the topic exists.
        """
        paths.validate_topic_name(topic)
        replicas = {
            int(p): (a if isinstance(a, ReplicaAssignment) else ReplicaAssignment.of(a)) for p, a in assignment.items()
        }
        _validate_assignment(topic, replicas)
        if self._client.exists(paths.topic_path(topic)) is not None:
            raise ZkOperationError(ZkCode.NODE_EXISTS, paths.topic_path(topic), f"topic '{topic}' already exists")
        self._set_or_create(paths.topic_config_path(topic), codecs.encode_entity_config(config or {}))
        try:
            self._client.create(
                paths.topic_path(topic), codecs.encode_topic_assignment(replicas, topic_id), makepath=True
            )
        except NodeExistsError:
            raise ZkOperationError(
                ZkCode.NODE_EXISTS, paths.topic_path(topic), f"topic '{topic}' already exists"
            ) from None

    def set_topic_assignment(
        self,
        topic: str,
        topic_id: str | None,
        assignment: Mapping[int, ReplicaAssignment],
        expected_controller_epoch_zk_version: int,
    ) -> None:
        """Rewrite ``/brokers/topics/<t>`` (reassignment steps, topic ids, restoring partitions); fenced.

        Raises ``ZkOperationError`` (NONODE) when the topic znode does not exist.
        """
        codes = self.set_topic_assignments(
            {topic: TopicAssignment(topic_id, dict(assignment))}, expected_controller_epoch_zk_version
        )
        if codes[topic] != ZkCode.OK:
            raise ZkOperationError(codes[topic], paths.topic_path(topic), "setting the topic assignment failed")

    def set_topic_assignments(
        self, assignments: Mapping[str, TopicAssignment], expected_controller_epoch_zk_version: int
    ) -> dict[str, ZkCode]:
        """Rewrite many topic znodes in batched fenced multis; per-topic result code."""
        topics = list(assignments)
        ops = [
            Op(
                SET,
                paths.topic_path(t),
                codecs.encode_topic_assignment(assignments[t].partitions, assignments[t].topic_id),
            )
            for t in topics
        ]
        outcomes = self._fenced_write(ops, expected_controller_epoch_zk_version)
        return {t: o.code for t, o in zip(topics, outcomes, strict=True)}

    def delete_topic_recursively(self, topic: str, expected_controller_epoch_zk_version: int) -> None:
        """Delete ``/brokers/topics/<t>`` and everything under it, children first; each delete fenced."""
        self.delete_topics_recursively([topic], expected_controller_epoch_zk_version)

    def delete_topics_recursively(self, topics: Collection[str], expected_controller_epoch_zk_version: int) -> None:
        """Delete the topic znodes of ``topics`` with their subtrees (see ``_delete_recursively``)."""
        self._delete_recursively([paths.topic_path(t) for t in topics], expected_controller_epoch_zk_version)

    # ==============================================================================================
    # partition states (ports.PartitionStateStore, reference §1.2.4)
    # ==============================================================================================
    def get_partition_states(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, PartitionStateRead]:
        """Read state znodes in bulk (multi-read). Per partition: OK with the decoded state (its
        ``zk_version`` = the znode's data version), NONODE, or OTHER (unreadable JSON, logged)."""
        ok = ZkCode.OK
        out: dict[TopicPartition, PartitionStateRead] = {}
        for tp, state, code in self._read_partition_states(partitions):
            out[tp] = PartitionStateRead(ok, state) if state is not None else PartitionStateRead(code)
        return out

    def get_partition_leadership(
        self, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, LeaderIsrAndControllerEpoch]:
        """The decoded state of every partition whose state znode exists and is readable (the others,
        missing or unreadable, are left out; unreadable ones are logged).

        What a failover loads into its leadership cache: ``get_partition_states`` without a
        ``PartitionStateRead`` per partition, built a batch at a time (a million partitions).
        """
        out: dict[TopicPartition, LeaderIsrAndControllerEpoch] = {}
        for tps, states, complete in self.iter_partition_leadership(partitions):
            if complete:
                out.update(zip(tps, cast("list[LeaderIsrAndControllerEpoch]", states), strict=True))
            else:
                out.update((tp, state) for tp, state in zip(tps, states, strict=True) if state is not None)
        return out

    def iter_partition_leadership(
        self, partitions: Sequence[TopicPartition], *, distinct: bool = False
    ) -> Iterator[LeadershipBatch]:
        """``get_partition_leadership`` a batch at a time, as ZooKeeper answers, with the next reads in
        flight: each batch's distinct partitions (in input order) and their decoded states, None where
        the znode is missing or unreadable (unreadable ones are logged). For a caller that works on each
        batch while ZooKeeper reads the next (a cold failover: ``controller_core.failover_read``).
        ``distinct``: the caller's partitions are distinct already (the batches are then consecutive
        slices of them; no million-key dict to drop repeats)."""
        for tps, errors, states, failed in self._read_state_batches(partitions, distinct):
            for i, exc in failed.items():
                if i not in errors:
                    logger.error("unreadable state of partition %s: %s", tps[i], exc)
            yield LeadershipBatch(tps, states, not failed)

    def _read_partition_states(
        self, partitions: Sequence[TopicPartition]
    ) -> Iterator[tuple[TopicPartition, LeaderIsrAndControllerEpoch | None, ZkCode]]:
        """(partition, decoded state or None, code) for each distinct partition, in input order."""
        ok, other = ZkCode.OK, ZkCode.OTHER
        for tps, errors, states, failed in self._read_state_batches(partitions):
            for i, (tp, state) in enumerate(zip(tps, states, strict=True)):
                if state is not None:
                    yield tp, state, ok
                elif (error := errors.get(i)) is not None:
                    yield tp, None, zk_code(error)
                else:
                    logger.error("unreadable state of partition %s: %s", tp, failed[i])
                    yield tp, None, other

    def _read_state_batches(
        self, partitions: Sequence[TopicPartition], distinct: bool = False
    ) -> Iterator[_StateBatch]:
        """The distinct partitions' state znodes read and decoded a multi-read at a time: (partitions,
        the read errors by index, states with None where missing or unreadable, the decoding errors by
        index). Streamed: each batch is decoded while ZooKeeper answers the next reads; the reply bytes
        of a batch are dropped once it is decoded."""
        unique: list[TopicPartition]
        if not distinct:
            unique = list(dict.fromkeys(partitions))
        else:
            unique = partitions if isinstance(partitions, list) else list(partitions)
        decode = codecs.decode_partition_states
        isrs: dict[tuple[int, ...], tuple[int, ...]] = {}  # one tuple per distinct ISR
        start = 0
        # The paths made a request at a time: a list of a million paths held ~100 MB for the whole read.
        for datas, versions, errors in self._iter_version_columns(_StatePaths(unique), size_hint=96):
            states, failed = decode(datas, versions, isrs)
            end = start + len(datas)
            yield unique[start:end], errors, states, failed
            start = end

    def create_partition_states(
        self,
        states: Mapping[TopicPartition, LeaderIsrAndControllerEpoch],
        expected_controller_epoch_zk_version: int,
    ) -> dict[TopicPartition, ZkCode]:
        """Create the state znodes of new partitions; fenced; per-partition code of the state create.

        Phases (each a batch of fenced multis, so a parent always exists before its child):
        1. list ``/brokers/topics/<t>/partitions`` of each topic (one multi-read);
        2. create the missing ``.../partitions`` znodes, then the missing ``.../partitions/<p>`` znodes
           (NODEEXISTS from a race is fine);
        3. create the ``state`` znodes. NONODE there means the topic znode is gone.
        """
        if not states:
            return {}
        tps = list(states)
        topics = list(dict.fromkeys(tp.topic for tp in tps))
        existing = self.reader.get_children([paths.partitions_path(t) for t in topics], size_hint=1024)
        have_dir = {t: r.children is not None for t, r in zip(topics, existing, strict=True)}
        have_partition = {t: set(r.children or ()) for t, r in zip(topics, existing, strict=True)}
        expected = expected_controller_epoch_zk_version
        missing_dirs = [Op(CREATE, paths.partitions_path(t)) for t in topics if not have_dir[t]]
        if missing_dirs:
            self._fenced_write(missing_dirs, expected)
        missing_partitions = [
            Op(CREATE, paths.partition_path(tp)) for tp in tps if str(tp.partition) not in have_partition[tp.topic]
        ]
        if missing_partitions:
            self._fenced_write(missing_partitions, expected)
        ops = [Op(CREATE, paths.partition_state_path(tp), codecs.encode_partition_state(states[tp])) for tp in tps]
        outcomes = self._fenced_write(ops, expected)
        return {tp: o.code for tp, o in zip(tps, outcomes, strict=True)}

    def update_leader_and_isr(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> UpdateLeaderAndIsrResult:
        """Conditionally write each state znode (expected version = ``LeaderAndIsr.zk_version``) with
        ``controller_epoch`` in the JSON; fenced; batched.

        OK -> ``finished[tp]`` = the state with the new zk version; BADVERSION -> ``needs_retry``;
        anything else -> ``finished[tp]`` = ``ZkOperationError``. Raises ``ControllerMovedError``.
        """
        result = UpdateLeaderAndIsrResult()
        outcomes = self.update_leader_and_isr_iter(states, controller_epoch, expected_controller_epoch_zk_version)
        for tp, outcome in outcomes:
            if outcome is None:
                result.needs_retry.append(tp)
            else:
                result.finished[tp] = outcome
        return result

    def update_leader_and_isr_iter(
        self,
        states: Mapping[TopicPartition, LeaderAndIsr],
        controller_epoch: int,
        expected_controller_epoch_zk_version: int,
    ) -> Iterator[LeaderAndIsrWrite]:
        """``update_leader_and_isr`` as the multis come back: ``(tp, outcome)`` per partition in the
        order of ``states``, outcome as in ``ports.LeaderAndIsrWrite`` (None: BADVERSION, retry)."""
        items = list(states.items())
        datas: list[bytes] = []
        blobs: list[bytes] = []
        ops = _StateSets(items, datas)
        prefixes = self._state_set_prefixes(items)

        def encode(start: int, stop: int) -> bool:
            """Encode ``items[start:stop]`` onto ``datas`` and ``blobs``."""
            block = items[start:stop]
            data = codecs.encode_leader_and_isr_many(map(_VALUE, block), controller_epoch)
            datas.extend(data)
            blobs.extend(self._state_set_blobs(block, data, prefixes))
            return True

        more: Iterator[bool] | None = None
        if self._streams_results() and self._state_sets_fit(items, prefixes):
            # The first block goes out while the rest is encoded (ZooKeeper applies a multi in a few
            # ms; 20,000 states take ~15 ms to encode here). Not in fault-injection runs, which
            # take no result before the batch is complete (``_streams_results``): nothing to overlap.
            first = _FIRST_ENCODED
            encode(0, first)
            more = (encode(i, i + _ENCODED_BLOCK) for i in range(first, len(items), _ENCODED_BLOCK))
        else:
            encode(0, len(items))
            if max(map(len, blobs), default=0) + TXN_SLACK > self._multi_budget():
                self._check_sizes(ops)  # raises for the op that cannot fit, before any multi leaves
        prepared = (blobs, REPLY_BYTES[SET])
        ok, bad_version = ZkCode.OK, ZkCode.BAD_VERSION
        with write_stream_switch():
            for i, outcome in self._fenced_write_iter(ops, expected_controller_epoch_zk_version, prepared, more):
                tp, lai = items[i]
                if outcome.code is ok:
                    yield tp, lai.with_zk_version(outcome.result.version)
                elif outcome.code is bad_version:
                    yield tp, None
                else:
                    yield tp, ZkOperationError(outcome.code, ops[i].path, repr(outcome.error))

    def _state_set_prefixes(self, items: Sequence[tuple[TopicPartition, LeaderAndIsr]]) -> dict[str, bytes]:
        """The chrooted ``.../partitions/`` prefix of each topic of ``items``, each topic's path checked
        (``paths.partition_state_path`` raises for a bad name) before any multi leaves."""
        server_path = self._server_path
        # The topics in C; a path per topic.
        return {topic: _partitions_prefix(topic, server_path) for topic in set(map(_TOPIC, map(_KEY, items)))}

    def _state_sets_fit(self, items: Sequence[tuple[TopicPartition, LeaderAndIsr]], prefixes: dict[str, bytes]) -> bool:
        """True when no state write of ``items`` can be too big for one multi, by an upper bound of its
        size (the longest prefix and ISR): then they need no encoding before the first multi leaves to
        be checked. Otherwise (a bound over the budget, in practice never) the caller encodes and checks
        them all first, so an op that cannot fit changes nothing."""
        if not items:
            return True
        longest_isr = max(map(len, map(_ISR, map(_VALUE, items))))
        # The op's header and three lengths, the path (a partition number of 20 digits at most), the
        # state JSON's fixed part, three numbers and the ISR members of 20 characters at most each.
        bound = 64 + max(map(len, prefixes.values())) + 20 + len("/state") + 128 + 21 * (3 + longest_isr)
        return bound + TXN_SLACK <= self._multi_budget()

    def _state_set_blobs(
        self,
        items: Sequence[tuple[TopicPartition, LeaderAndIsr]],
        datas: Sequence[bytes],
        prefixes: Mapping[str, bytes],
    ) -> list[bytes]:
        """Each state write as a multi's set op on the wire (``_encode(Op(SET, path, data, zk_version))``,
        the same bytes), in one pass: the chrooted ``.../partitions/`` prefix of each topic comes from
        ``prefixes`` (``_state_set_prefixes``, every name checked before any multi leaves), not a path
        string and an ``Op`` per partition."""
        pack = INT.pack
        head = PATH_HEADERS[SET]
        blobs: list[bytes] = []
        append = blobs.append
        for (tp, lai), data in zip(items, datas, strict=True):
            path_bytes = b"%b%d/state" % (prefixes[tp.topic], tp.partition)
            append(b"".join((head, pack(len(path_bytes)), path_bytes, pack(len(data)), data, pack(lai.zk_version))))
        return blobs


def _validate_assignment(topic: str, assignment: Mapping[int, ReplicaAssignment]) -> None:
    if not assignment:
        raise ValueError(f"topic '{topic}': an assignment needs at least one partition")
    if sorted(assignment) != list(range(len(assignment))):
        raise ValueError(
            f"topic '{topic}': partitions must be numbered 0..{len(assignment) - 1}, got {sorted(assignment)}"
        )
    sizes = set()
    for partition, a in assignment.items():
        if not a.replicas:
            raise ValueError(f"topic '{topic}' partition {partition}: the replica list is empty")
        if len(set(a.replicas)) != len(a.replicas):
            raise ValueError(f"topic '{topic}' partition {partition}: duplicate replicas {list(a.replicas)}")
        if any(r < 0 for r in a.replicas):
            raise ValueError(f"topic '{topic}' partition {partition}: negative broker id in {list(a.replicas)}")
        sizes.add(len(a.replicas))
    if len(sizes) > 1:
        raise ValueError(f"topic '{topic}': all partitions must have the same number of replicas, got {sorted(sizes)}")


_KEY: Final = itemgetter(0)
_VALUE: Final = itemgetter(1)
_TOPIC: Final = attrgetter("topic")
_ISR: Final = attrgetter("isr")

_FIRST_ENCODED: Final = 1024
"""State writes encoded before the first multi leaves (more than one multi's ~750)."""
_ENCODED_BLOCK: Final = 2048
"""Then this many at a time, as the engine asks for its next multi."""


class _StateSets(Sequence[Op]):
    """The ops of ``update_leader_and_isr_iter``'s writes, each built only when asked for: the engine
    sends the bulk-encoded bytes and needs an op's path only for an error, a replayed multi's
    confirmation or the reliability history."""

    __slots__ = ("_datas", "_items")

    def __init__(self, items: Sequence[tuple[TopicPartition, LeaderAndIsr]], datas: Sequence[bytes]) -> None:
        self._items = items
        self._datas = datas

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> Op: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Op]: ...

    def __getitem__(self, index: int | slice) -> Op | Sequence[Op]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        tp, lai = self._items[index]
        return Op(SET, paths.partition_state_path(tp), self._datas[index], lai.zk_version)
