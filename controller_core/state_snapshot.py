"""The failover's state-snapshot record built straight from the partition table's columns as JSON.

Why: the record lists every partition and every replica by state (docs/contracts.md: ``{state:
[entity, ...]}``), ~4,000,000 entities at a million partitions, RF 3. Built as a dict of lists of
strings it held ~300 MB of ``str`` objects, plus each sink's JSON of them, at the top of the
failover's memory peak. Here the entities are made a slice of partitions at a time, encoded and let
go, so the record is held as its JSON alone (~20 bytes an entity, ``EncodedRecord``), which every
sink (the day's file, the Redis stream) writes as it is: exactly the bytes the dict of lists gave,
key order and list order included.

Order (the contract readers rely on only for content, but kept byte for byte): states in the order
their first partition (replica) appears, partitions by number, a partition's replicas in its
mapping's order.
"""

from __future__ import annotations

from collections.abc import Iterator

import orjson

from controller_core.partition_table import PartitionTable

SLICE = 32_768
"""Partitions whose entity strings exist at once (a few MB); larger slices were no faster."""


def _json_list_body(entities: list[str]) -> bytes:
    """``entities`` as JSON without the enclosing brackets."""
    return orjson.dumps(entities)[1:-1]


class _States:
    """Per state, the JSON of its entities so far (comma-separated items of a list body)."""

    __slots__ = ("bodies",)

    def __init__(self) -> None:
        self.bodies: dict[str, bytearray] = {}

    def add(self, state: str, entities: list[str]) -> None:
        body = self.bodies.get(state)
        if body is None:
            self.bodies[state] = bytearray(_json_list_body(entities))
        else:
            body += b","
            body += _json_list_body(entities)

    def json_parts(self) -> list[bytes | bytearray]:
        """``{state: [entity, ...], ...}`` as JSON, in parts to be joined once (the bodies are not copied)."""
        parts: list[bytes | bytearray] = []
        for state, body in self.bodies.items():
            parts += (b"," if parts else b"{", orjson.dumps(state), b":[", body, b"]")
        parts.append(b"}" if parts else b"{}")
        return parts


def _slices(count: int) -> Iterator[range]:
    for start in range(0, count, SLICE):
        yield range(start, min(start + SLICE, count))


def snapshot_json_fields(table: PartitionTable) -> dict[str, list[bytes | bytearray]]:
    """The snapshot record's ``partition_states`` and ``replica_states`` fields as JSON, each in parts
    (``StateChangeLogger.record_json`` joins them into the record's JSON once)."""
    tps, p_column, r_column = table.tps, table.state, table.replica_states
    partitions, replicas = _States(), _States()
    # Per shared replica-state mapping (a few per cluster, alive as long as the table, so their ids are
    # stable): its (state, "@broker") pairs, made once instead of once per partition (~40 % of the CPU).
    suffixes: dict[int, tuple[tuple[str, str], ...]] = {}
    for pids in _slices(len(tps)):
        p_lists: dict[str, list[str]] = {}
        r_lists: dict[str, list[str]] = {}
        for pid in pids:
            p_state = p_column[pid]
            r_states = r_column[pid]
            if p_state is None and not r_states:
                continue
            topic, partition = tps[pid]
            entity = f"{topic}-{partition}"
            if p_state is not None:
                # The state itself as the key (a ``StrEnum``: a str, encoded as its value), not
                # ``.value``: an enum property call per partition was ~15 % of the CPU.
                members = p_lists.get(p_state)
                if members is None:
                    members = p_lists[p_state] = []
                members.append(entity)
            if r_states:
                pairs = suffixes.get(id(r_states))
                if pairs is None:
                    pairs = suffixes[id(r_states)] = tuple((s.value, f"@{b}") for b, s in r_states.items())
                for value, suffix in pairs:
                    members = r_lists.get(value)
                    if members is None:
                        members = r_lists[value] = []
                    members.append(entity + suffix)
        for state, entities in p_lists.items():
            partitions.add(state, entities)
        for state, entities in r_lists.items():
            replicas.add(state, entities)
    return {"partition_states": partitions.json_parts(), "replica_states": replicas.json_parts()}
