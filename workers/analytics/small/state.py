"""Parquet in and out for the Python engine: the saved state it starts from, the tables and state it writes.

The files are laid out and typed as Spark's writes are (``<table>/cluster=<name>/*.parquet``, the
cluster in the directory name, the column types below), so ``load`` and the next run, whichever
engine it takes, read them the same way. Day columns are written as dates and minutes as
timestamps (``transforms.with_dates``/``minute_timestamps``). Spark's small runs write their
tables and state here too (``write_table``, from the Arrow tables ``collected`` fetches).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from workers.analytics.small.events import Record
from workers.analytics.transforms import MINUTE_MS

STATE_PARTS = ("partitions", "controller", "reassignments", "brokers")

_S, _I, _L, _D = pa.string(), pa.int32(), pa.int64(), pa.float64()
_DAY, _MINUTE = pa.date32(), pa.timestamp("us")
_INTS = pa.list_(pa.field("element", _I))

#: Each table's columns as Spark writes them (without ``cluster``, which is in the directory name).
TABLE_SCHEMAS: dict[str, list[tuple[str, pa.DataType]]] = {
    "unavailability_intervals": [
        ("topic", _S),
        ("partition", _I),
        ("start_ms", _D),
        ("end_ms", _D),
        ("duration_ms", _D),
        ("cause_broker", _I),
        ("end_reason", _S),
        ("estimated_start_ms", _D),
        ("outage_start_ms", _D),
        ("outage_ms", _D),
        ("start_date", _DAY),
    ],
    "partition_daily": [
        ("topic", _S),
        ("partition", _I),
        ("day", _DAY),
        ("outages", _L),
        ("recoveries", _L),
        ("leaderless_ms", _D),
        ("recovery_ms", _D),
        ("mttr_ms", _D),
    ],
    "broker_daily": [
        ("broker", _I),
        ("day", _DAY),
        ("outages", _L),
        ("recoveries", _L),
        ("leaderless_ms", _D),
        ("recovery_ms", _D),
        ("mttr_ms", _D),
    ],
    "topic_daily": [
        ("topic", _S),
        ("day", _DAY),
        ("partitions", _L),
        ("outages", _L),
        ("recoveries", _L),
        ("leaderless_ms", _D),
        ("recovery_ms", _D),
        ("covered_ms", _L),
        ("availability", _D),
        ("mttr_ms", _D),
    ],
    "elections_daily": [("day", _DAY), ("strategy", _S), ("cause", _S), ("elections", _L), ("unclean", _L)],
    "unclean_elections": [
        ("ts", _D),
        ("day", _DAY),
        ("epoch", _L),
        ("topic", _S),
        ("partition", _I),
        ("strategy", _S),
        ("cause", _S),
        ("leader_before", _I),
        ("leader_after", _I),
        ("isr_before", _INTS),
        ("isr_after", _INTS),
    ],
    "leader_counts": [("broker", _I), ("minute", _MINUTE), ("leaders", _L)],
    "leader_skew": [
        ("minute", _MINUTE),
        ("max_leaders", _L),
        ("min_leaders", _L),
        ("mean_leaders", _D),
        ("brokers", _L),
        ("skew", _D),
    ],
    "failovers": [
        ("controller_epoch", _L),
        ("controller_id", _I),
        ("previous_epoch", _L),
        ("previous_controller_id", _I),
        ("previous_last_ms", _D),
        ("first_ms", _D),
        ("gap_ms", _D),
        ("elected_at_ms", _D),
        ("completed_at_ms", _D),
        ("failover_ms", _D),
    ],
    "reassignments": [
        ("topic", _S),
        ("partition", _I),
        ("action_id", _S),
        ("started_ms", _D),
        ("status", _S),
        ("origin_replicas", _INTS),
        ("target_replicas", _INTS),
        ("ended_ms", _D),
        ("duration_ms", _D),
        ("audit_action_id", _L),
        ("requested_by", _S),
        ("requested_ms", _D),
        ("requested_partitions", _I),
        ("start_delay_ms", _D),
    ],
    "reassignment_actions": [
        ("action_id", _S),
        ("audit_action_id", _L),
        ("requested_by", _S),
        ("requested_ms", _D),
        ("requested_partitions", _I),
        ("partitions", _L),
        ("completed", _L),
        ("cancelled", _L),
        ("in_progress", _L),
        ("started_ms", _D),
        ("topics", pa.list_(pa.field("element", _S))),
        ("ended_ms", _D),
        ("duration_ms", _D),
        ("start_delay_ms", _D),
        ("request_to_end_ms", _D),
    ],
    "election_actions": [
        ("audit_action_id", _L),
        ("requested_by", _S),
        ("requested_ms", _D),
        ("requested_partitions", _L),
        ("elected", _L),
        ("first_election_ms", _D),
        ("last_election_ms", _D),
        ("first_delay_ms", _D),
        ("last_delay_ms", _D),
    ],
    "isr_flapping": [
        ("topic", _S),
        ("partition", _I),
        ("day", _DAY),
        ("shrinks", _L),
        ("expands", _L),
        ("flaps", _L),
        ("rank", _I),
    ],
}

#: The saved state's parts (``job.STATE_SCHEMAS``, which the next run reads them with).
STATE_SCHEMAS: dict[str, list[tuple[str, pa.DataType]]] = {
    "partitions": [
        ("topic", _S),
        ("partition", _I),
        ("state", _I),
        ("leader", _I),
        ("state_ms", _D),
        ("cause_broker", _I),
        ("estimated_ms", _D),
    ],
    "controller": [("epoch", _L), ("controller_id", _I), ("last_ms", _D)],
    "reassignments": [
        ("topic", _S),
        ("partition", _I),
        ("started_ms", _D),
        ("action_id", _S),
        ("origin_replicas", _INTS),
        ("target_replicas", _INTS),
    ],
    "brokers": [("broker", _I)],
}

_DAY_COLUMNS = {"day", "start_date"}


def _files(directory: Path) -> list[Path]:
    if not directory.is_dir():
        return []
    return sorted(p for p in directory.rglob("*.parquet") if not p.name.startswith((".", "_")))


def read_state(state_dir: Path | None, cluster: str) -> dict[str, list[Record]]:
    """A cluster's saved state (empty parts when there is none), each row with ``cluster`` added."""
    parts: dict[str, list[Record]] = {part: [] for part in STATE_PARTS}
    if state_dir is None:
        return parts
    for part in STATE_PARTS:
        names = [name for name, _ in STATE_SCHEMAS[part]]
        for path in _files(state_dir / part / f"cluster={cluster}"):
            table = pq.read_table(path)
            present = [n for n in names if n in table.column_names]
            for row in table.select(present).to_pylist():
                parts[part].append({**dict.fromkeys(names), **row, "cluster": cluster})
    return parts


def _arrow(rows: Sequence[Record], columns: list[tuple[str, pa.DataType]]) -> pa.Table:
    arrays = []
    for name, kind in columns:
        values = [row.get(name) for row in rows]
        if kind == _MINUTE:
            values = [None if v is None else v * MINUTE_MS * 1000 for v in values]
            arrays.append(pa.array(values, type=pa.int64()).cast(kind))
        elif name in _DAY_COLUMNS:
            arrays.append(pa.array(values, type=pa.int32()).cast(kind))
        else:
            arrays.append(pa.array(values, type=kind))
    return pa.Table.from_arrays(arrays, names=[name for name, _ in columns])


def write_rows(
    path: Path, clusters: Sequence[str], rows: Sequence[Record], columns: list[tuple[str, pa.DataType]]
) -> None:
    """Replace ``clusters``' files under ``path`` with ``rows`` (a cluster without rows gets no directory)."""
    write_table(path, clusters, _arrow(rows, [("cluster", _S), *columns]), columns)


def write_table(
    path: Path, clusters: Sequence[str], table: pa.Table, columns: Sequence[tuple[str, pa.DataType]]
) -> None:
    """Replace ``clusters``' files under ``path`` with ``table``'s rows of each (split by its ``cluster``
    column, cast to ``columns``); a cluster without rows gets no directory, as with Spark's writes."""
    for cluster in clusters:
        shutil.rmtree(path / f"cluster={cluster}", ignore_errors=True)
    for cluster in clusters:
        mine = table.filter(pc.equal(table.column("cluster"), cluster))
        if mine.num_rows == 0:
            continue
        typed = pa.Table.from_arrays(
            [mine.column(name).cast(kind) for name, kind in columns], names=[name for name, _ in columns]
        )
        directory = path / f"cluster={cluster}"
        directory.mkdir(parents=True, exist_ok=True)
        pq.write_table(typed, directory / "part-00000-python.snappy.parquet", compression="snappy")


def write_state(root: Path, clusters: Sequence[str], parts: Mapping[str, Sequence[Record] | pa.Table]) -> None:
    """Write a saved state's parts (rows, or Arrow tables with ``cluster``); the ``_complete-<cluster>``
    marker last, as ``job._Checkpoint`` does."""
    for cluster in clusters:
        (root / f"_complete-{cluster}").unlink(missing_ok=True)
    for part in STATE_PARTS:
        rows, columns = parts[part], STATE_SCHEMAS[part]
        table = rows if isinstance(rows, pa.Table) else _arrow(rows, [("cluster", _S), *columns])
        write_table(root / part, clusters, table, columns)
    for cluster in clusters:
        for part in STATE_PARTS:
            (root / part / f"cluster={cluster}").mkdir(parents=True, exist_ok=True)
        (root / f"_complete-{cluster}").write_text(datetime.now(UTC).isoformat() + "\n")
