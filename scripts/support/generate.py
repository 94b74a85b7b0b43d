"""Write synthetic state-change histories that look like a troubled month of a large cluster.

Why a simulator and not random records: the job's answers (outage intervals, MTTR, leader counts)
only mean something if the records obey the controller's rules: a partition goes Offline before it
is re-elected, an ISR shrinks before it expands, a reassignment starts before it completes. So this
module runs a small discrete-event model of the ZooKeeper-era controller (Kafka's broker failure,
controlled shutdown, preferred rebalance, AlterIsr, reassignment and failover sequences) and renders
every record in the exact shape ``controller_core.state_change_log`` writes.

Speed (10 million records, two cores): days are simulated independently, several processes at a
time. Each day starts from the cluster's settled state (every broker up, every leader preferred,
every ISR full), which the previous day also ends in, so no day needs another's result. Assignments
changed by reassignments are planned up front. Per-epoch sequence numbers are the one thing that
crosses days, so a count-only pass runs first and gives every day its starting ``seq``. Records are
formatted with ``%`` templates (faster than ``json.dumps`` for a fixed shape) and written in bulk.

Deterministic: the same spec (including ``seed``) writes byte-identical files, whatever the number
of processes. Leader epochs restart at ``1000 * day`` each day (still increasing); nothing else
reads them.

Usage::

    python -m scripts.support.generate --out var/bench --quick
    summary = generate(HistorySpec(cluster="bench"), Path("var/bench"))
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import date, timedelta
from pathlib import Path

from scripts.support.history_day import run_day
from scripts.support.history_spec import (
    MARKER_FILE,
    DayPlan,
    DayResult,
    GenerationSummary,
    HistorySpec,
    plan_days,
)

__all__ = ["GenerationSummary", "HistorySpec", "existing_summary", "generate", "main"]


# --- driver ---------------------------------------------------------------------------------------------


def _map_days(spec: HistorySpec, plans: Sequence[DayPlan], directory: Path | None, processes: int) -> list[DayResult]:
    tasks = [
        (spec, plan, None if directory is None else str(directory / _file_name(spec, plan.index))) for plan in plans
    ]
    if processes <= 1 or len(tasks) == 1:
        return [run_day(t) for t in tasks]
    # spawn, never fork: callers (tests, Celery workers, the benchmark) hold threads (kazoo, py4j,
    # logging) whose locks a forked child would inherit held, and such a child can hang forever.
    with multiprocessing.get_context("spawn").Pool(processes) as pool:
        return list(pool.imap(run_day, tasks, chunksize=1))


def _file_name(spec: HistorySpec, index: int) -> str:
    return f"state-change-{(spec.start + timedelta(days=index)).isoformat()}.jsonl"


def generate(spec: HistorySpec, base_dir: Path, processes: int | None = None) -> GenerationSummary:
    """Write ``spec``'s history under ``base_dir/<cluster>/`` and return what was written.

    Steps:
    1. plan every day's incidents;
    2. simulate every day without writing, to learn how many records the incidents make and so how
       many ISR flaps fill up to ``target_records``;
    3. simulate again with the flaps, still without writing, to count records per controller epoch
       and so give each day its first sequence number;
    4. simulate and write every day, in parallel.
    """
    spec.validate()
    started = time.perf_counter()
    processes = processes or min(os.cpu_count() or 1, spec.days)
    directory = base_dir / spec.cluster
    directory.mkdir(parents=True, exist_ok=True)

    plans = plan_days(spec)
    base = _map_days(spec, plans, None, processes)
    remaining = max(0, spec.target_records - sum(r.records for r in base))
    per_day, extra = divmod(remaining // 2, spec.days)
    plans = [replace(p, flaps=per_day + (1 if p.index < extra else 0)) for p in plans]
    counted = _map_days(spec, plans, None, processes)
    seq = 0
    numbered: list[DayPlan] = []
    for plan, result in zip(plans, counted, strict=True):
        numbered.append(replace(plan, seq_start=seq))
        seq = result.records_after_failover if plan.failover is not None else seq + result.records
    results = _map_days(spec, numbered, directory, processes)

    kinds: dict[str, int] = {}
    for r in results:
        for kind, n in r.kinds.items():
            kinds[kind] = kinds.get(kind, 0) + n
    summary = GenerationSummary(
        cluster=spec.cluster,
        directory=str(directory),
        records=sum(r.records for r in results),
        files=len(results),
        bytes=sum(r.bytes for r in results),
        seconds=round(time.perf_counter() - started, 2),
        kinds=dict(sorted(kinds.items())),
    )
    marker = {"spec": {**asdict(spec), "start": spec.start.isoformat()}, "summary": asdict(summary)}
    (directory / MARKER_FILE).write_text(json.dumps(marker, indent=2) + "\n")
    return summary


def existing_summary(spec: HistorySpec, base_dir: Path) -> GenerationSummary | None:
    """Return the summary of an earlier ``generate`` of the same spec into ``base_dir``, if complete."""
    marker = base_dir / spec.cluster / MARKER_FILE
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    if data.get("spec") != {**asdict(spec), "start": spec.start.isoformat()}:
        return None
    for index in range(spec.days):
        if not (base_dir / spec.cluster / _file_name(spec, index)).is_file():
            return None
    return GenerationSummary(**data["summary"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, required=True, help="base directory (one sub-directory per cluster)")
    parser.add_argument("--quick", action="store_true", help="a small history (3 days, 2,000 partitions)")
    parser.add_argument("--cluster", default="bench")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--records", type=int, help="target number of records")
    parser.add_argument("--days", type=int)
    parser.add_argument("--start", type=date.fromisoformat, help="first day, YYYY-MM-DD")
    parser.add_argument("--processes", type=int)
    args = parser.parse_args(argv)
    spec = (
        HistorySpec.quick(cluster=args.cluster, seed=args.seed)
        if args.quick
        else HistorySpec(cluster=args.cluster, seed=args.seed)
    )
    if args.records is not None:
        spec = replace(spec, target_records=args.records)
    if args.days is not None:
        spec = replace(spec, days=args.days)
    if args.start is not None:
        spec = replace(spec, start=args.start)
    summary = generate(spec, args.out, args.processes)
    json.dump(asdict(summary), sys.stdout, indent=2)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
