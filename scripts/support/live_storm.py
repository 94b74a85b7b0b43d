"""Where a storm's latency goes: join the mirror's spans (``live_sampler``) with the benchmark's timeline.

Why: ``bench_live.py`` measures ZooKeeper commit to page; this splits that into commit -> watch
fired -> row applied (read or re-derived) -> flush taken -> published -> page, per partition, so the
step that holds the page back is named by a figure rather than guessed.
"""

from __future__ import annotations

import bisect
import statistics
from collections.abc import Sequence
from typing import Any

STEPS = ("watch", "applied", "flush_taken", "published")


def _first_at_or_after(times: Sequence[float] | None, t: float) -> float | None:
    if not times:
        return None
    ordered = sorted(times)
    i = bisect.bisect_left(ordered, t)
    return ordered[i] if i < len(ordered) else None


def _summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "median_ms": round(statistics.median(ordered), 1),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1),
        "max_ms": round(ordered[-1], 1),
    }


def chain(
    spans: dict[str, dict[str, list[float]]],
    batches: Sequence[Sequence[str]],
    commits: Sequence[float],
    page_seen: Sequence[float | None],
    phase_start: float,
) -> dict[str, Any]:
    """Per step, time from each partition's commit (median, p99, max over partitions), for one phase.

    ``batches`` are member names per ZooKeeper multi, ``commits`` their commit times (epoch ms),
    ``page_seen`` when the page first showed each batch. A step is the first one at or after the
    phase started (after ``applied`` for the flush steps): the failover's rows are re-derived from
    the broker's deregistration, before their batch commits, so those figures can be negative.
    """
    watch, applied, taken, published, page = [], [], [], [], []
    reads, rederived = 0, 0
    for batch, commit, seen in zip(batches, commits, page_seen, strict=True):
        for m in batch:
            w = _first_at_or_after(spans.get("watch", {}).get(m), phase_start)
            r = _first_at_or_after(spans.get("read_applied", {}).get(m), max(phase_start, w or phase_start))
            d = _first_at_or_after(spans.get("rederived", {}).get(m), phase_start)
            a = min((x for x in (r, d) if x is not None), default=None)
            if a is None:
                continue
            if a == r:
                reads += 1
            else:
                rederived += 1
            t = _first_at_or_after(spans.get("flush_taken", {}).get(m), a)
            p = _first_at_or_after(spans.get("published", {}).get(m), t if t is not None else a)
            if w is not None:
                watch.append(w - commit)
            applied.append(a - commit)
            if t is not None:
                taken.append(t - commit)
            if p is not None:
                published.append(p - commit)
            if seen is not None:
                page.append(seen - commit)
    return {
        "rows_applied_by_read": reads,
        "rows_rederived": rederived,
        "from_commit": {
            "watch_fired": _summary(watch),
            "row_applied": _summary(applied),
            "flush_taken": _summary(taken),
            "published": _summary(published),
            "page": _summary(page),
        },
    }


def flush_summary(flushes: list[dict[str, Any]]) -> dict[str, Any]:
    """The writer thread's flushes during the profile: how many, rows, time to publish."""
    if not flushes:
        return {"count": 0}
    to_publish = [f["published"] - f["write_started"] for f in flushes]
    return {
        "count": len(flushes),
        "rows": sum(f["rows"] for f in flushes),
        "largest_rows": max(f["rows"] for f in flushes),
        "write_to_publish_ms": _summary(to_publish),
    }
