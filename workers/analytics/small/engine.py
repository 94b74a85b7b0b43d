"""The Python engine's run: ``job.run``'s steps for a tiny input, with no Spark at all.

``eligible`` says whether a run may take this engine (every day it reads is JSON, and there are at
most ``JobConfig.python_max_records`` lines); ``run`` computes every table and the saved state and
writes them with the manifests, exactly where ``job.run`` would.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from workers.analytics.inputs import ClusterInput, JobConfig, discover, state_root
from workers.analytics.small import events as E
from workers.analytics.small import reassignment_tables as RT
from workers.analytics.small import tables as T
from workers.analytics.small import walk as W
from workers.analytics.small.events import Record
from workers.analytics.small.state import STATE_PARTS, TABLE_SCHEMAS, read_state, write_rows, write_state
from workers.analytics.transforms import LEADERLESS

if TYPE_CHECKING:
    from workers.analytics.job import JobResult

logger = logging.getLogger(__name__)

ProgressCallback = Callable[[float, str], None]


def _sources(cluster: ClusterInput) -> list[Path] | None:
    """The JSON files a cluster's run reads, or None when any day is compacted Parquet."""
    paths = []
    for day in cluster.read_days:
        kind, path = cluster.source(day)
        if kind != "json":
            return None
        paths.append(path)
    return paths


def _lines(path: Path, limit: int) -> int:
    count = 0
    with open(path, "rb") as src:
        while chunk := src.read(1 << 20):
            count += chunk.count(b"\n")
            if count > limit:
                break
    return count


def eligible(config: JobConfig, clusters: Sequence[ClusterInput]) -> bool:
    """Whether this run is small enough for the Python engine (and reads JSON only)."""
    limit = config.python_max_records
    if limit <= 0:
        return False
    total = 0
    for cluster in clusters:
        paths = _sources(cluster)
        if paths is None:
            return False
        for path in paths:
            if path.stat().st_size > limit * 64 * 1024:  # no need to count: far too big
                return False
            total += _lines(path, limit - total)
            if total > limit:
                return False
    return True


# --- the saved state ------------------------------------------------------------------------------------


def checkpoint_partitions(
    walked: Sequence[Record], intervals: Sequence[Record], inventory: Sequence[W.Key]
) -> list[Record]:
    """``transforms.checkpoint_partitions``."""
    last = {W.key_of(w): w for w in walked if w["last"]}
    open_intervals = {W.key_of(i): i for i in intervals if i["end_ms"] is None}
    out = []
    for key in inventory:
        row = last.get(key) if None not in key else None
        interval = open_intervals.get(key) if None not in key else None
        state = None if row is None else row["state"]
        leaderless = state == LEADERLESS
        last_ms = None if row is None else row["ts"]
        out.append(
            {
                "cluster": key[0],
                "topic": key[1],
                "partition": key[2],
                "state": state,
                "leader": -1 if leaderless else (None if row is None else row["leader"]),
                "state_ms": W.coalesce(None if interval is None else interval["start_ms"], last_ms)
                if leaderless
                else last_ms,
                "cause_broker": (None if interval is None else interval["cause_broker"]) if leaderless else None,
                "estimated_ms": (None if interval is None else interval["estimated_start_ms"]) if leaderless else None,
            }
        )
    return out


def checkpoint_controller(epochs: Sequence[Record]) -> list[Record]:
    """``transforms.checkpoint_controller``: each cluster's highest epoch with a last record."""
    best: dict[str, Record] = {}
    for e in epochs:
        if e["last_ms"] is None:
            continue
        if e["cluster"] not in best or e["epoch"] > best[e["cluster"]]["epoch"]:
            best[e["cluster"]] = e
    return [{k: e[k] for k in ("cluster", "epoch", "controller_id", "last_ms")} for e in best.values()]


def checkpoint_reassignments(pairs: Sequence[Record]) -> list[Record]:
    return [
        {
            k: p[k]
            for k in ("cluster", "topic", "partition", "started_ms", "action_id", "origin_replicas", "target_replicas")
        }
        for p in pairs
        if p["status"] == "in_progress"
    ]


# --- the run ------------------------------------------------------------------------------------------------


def compute(
    config: JobConfig, clusters: Sequence[ClusterInput]
) -> tuple[dict[str, list[Record]], dict[str, list[Record]], dict[str, int]]:
    """Every table and state part of the run (rows with ``cluster``), and the records read per cluster."""
    window = config.window
    events: list[Record] = []
    seeds: dict[str, list[Record]] = {part: [] for part in STATE_PARTS}
    per_cluster: dict[str, int] = {}
    for cluster in clusters:
        paths = _sources(cluster)
        assert paths is not None  # eligible()
        mine = [
            e
            for e in (E.prepare(r, cluster.name) for r in E.read_lines(paths))
            if e is not None and e["ts"] < window.end_ms
        ]
        per_cluster[cluster.name] = len(mine)
        events += mine
        for part, rows in read_state(cluster.state_dir, cluster.name).items():
            seeds[part] += rows

    special = [e for e in events if e["extra"] is not None]
    days = W.partition_days(events)
    epochs = T.controller_epochs(events, seeds["controller"])
    inventory = W.partition_inventory(special, days, seeds["partitions"])
    walked = W.walk_partitions(W.leadership_stream(events, days, seeds["partitions"]))
    intervals = W.with_estimated_starts(
        W.unavailability_intervals(walked), W.session_losses(special), seeds["partitions"]
    )
    deltas = T.leader_deltas(walked, window)
    pairs = RT.reassignments(RT.reassignment_rows(special, seeds["reassignments"]))
    in_window = W.overlapping(intervals, window)
    facts = T.outage_facts(in_window, window)
    brokers = T.known_brokers(special, deltas, seeds["brokers"])
    counts = T.leader_counts(deltas, brokers, window)
    exported = RT.read_actions(config.actions_dir, [c.name for c in clusters])
    moved = RT.attribute_reassignments(W.overlapping(pairs, window, "started_ms", "ended_ms"), exported)
    tables = {
        "unavailability_intervals": [{**i, "start_date": E.day_of(i["start_ms"])} for i in in_window],
        "partition_daily": T.partition_daily(facts),
        "broker_daily": T.broker_daily(facts),
        "topic_daily": T.topic_daily(facts, inventory, window),
        "elections_daily": T.elections_daily(special, window),
        "unclean_elections": T.unclean_elections(special, window),
        "leader_counts": counts,
        "leader_skew": T.leader_skew(counts),
        "failovers": T.failovers(special, epochs, window),
        "reassignments": moved,
        "reassignment_actions": RT.reassignment_actions(moved),
        "election_actions": RT.election_actions(special, exported, window),
        "isr_flapping": T.isr_flapping(days, window, 2**31 - 1 if config.save_state else config.flapping_top),
    }
    state = {
        "partitions": checkpoint_partitions(walked, intervals, inventory),
        "controller": checkpoint_controller(epochs),
        "reassignments": checkpoint_reassignments(pairs),
        "brokers": brokers,
    }
    return tables, state, per_cluster


def run(config: JobConfig, progress: ProgressCallback | None = None) -> JobResult:
    """``job.run`` for a tiny input; returns the same ``JobResult``."""
    from workers.analytics.job import TABLES, JobResult, _Writer  # the manifest writer: Parquet footers, no Spark

    started = time.perf_counter()
    clusters = discover(config)
    names = [c.name for c in clusters]

    def report(fraction: float, message: str) -> None:
        logger.info("analytics (python): %s", message)
        if progress is not None:
            progress(fraction, message)

    report(0.1, f"found input for {len(clusters)} cluster(s): {', '.join(names)}; computing in Python (small run)")
    tables, state, per_cluster = compute(config, clusters)
    report(0.6, f"computed {sum(len(rows) for rows in tables.values()):,} result rows")
    for name in TABLES:
        write_rows(config.run_dir / name, names, tables[name], TABLE_SCHEMAS[name])
    writer = _Writer(config, names)
    rows = writer.finish(config, per_cluster)
    report(0.9, f"wrote {sum(rows.values()):,} result rows to {config.run_dir}")
    window = config.window
    roots = []
    if config.closed:
        roots.append(state_root(config.output_dir, as_of=config.until))
    if config.save_state:
        roots.append(state_root(config.output_dir, at_ms=window.effective_end_ms))
    for root in roots:
        write_state(root, names, state)
    result = JobResult(
        since=config.since.isoformat(),
        until=config.until.isoformat(),
        clusters=names,
        output=str(config.run_dir),
        records=sum(per_cluster.values()),
        rows=rows,
        seconds=round(time.perf_counter() - started, 2),
        checkpoint=config.closed,
        warm_up_days={c.name: len(c.read_days) - len(c.window_days) for c in clusters},
        state_ms=window.effective_end_ms if config.save_state else None,
        engine="python",
    )
    report(1.0, f"done in {result.seconds:.2f} s (python)")
    return result
