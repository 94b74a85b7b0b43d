"""The analytics pages as data: each page's table, columns and chart, built from the result tables.

Why a registry: every page is the same shape (a chart, its table paginated, a CSV of the table),
so the view, the template and the CSV writer are written once and a page is one entry here. Chart
data is computed on the server from aggregates and sent as a Chart.js config (category axes, so no
date adapter); no page ships a whole table to the browser.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from django.db.models import Avg, Count, F, Max, Min, Q, QuerySet, Sum

from dashboard.analytics import models as M

ChartConfig = dict[str, Any]
WORST_TOPICS = 8
MAX_POINTS = 720


@dataclass(frozen=True, slots=True)
class Filters:
    """The cluster and inclusive day range a page shows."""

    cluster: str
    since: date
    until: date

    @property
    def start(self) -> datetime:
        return datetime.combine(self.since, time.min, tzinfo=UTC)

    @property
    def end(self) -> datetime:
        return datetime.combine(self.until + timedelta(days=1), time.min, tzinfo=UTC)

    @property
    def days(self) -> list[date]:
        return [self.since + timedelta(days=i) for i in range((self.until - self.since).days + 1)]

    def by_day(self, qs: QuerySet[Any]) -> QuerySet[Any]:
        return qs.filter(cluster=self.cluster, day__gte=self.since, day__lte=self.until)

    def by_time(self, qs: QuerySet[Any], field: str) -> QuerySet[Any]:
        return qs.filter(cluster=self.cluster, **{f"{field}__gte": self.start, f"{field}__lt": self.end})

    def by_minute(self, qs: QuerySet[Any]) -> QuerySet[Any]:
        first = int(self.start.timestamp() // 60)
        return qs.filter(
            cluster=self.cluster, epoch_minute__gte=first, epoch_minute__lt=int(self.end.timestamp() // 60)
        )


@dataclass(frozen=True, slots=True)
class Column:
    """One table column: header, the row attribute, how to show it."""

    header: str
    value: str
    kind: str = "text"  # text | num | pct (a 0-1 share, shown and exported x100) | s (seconds) | time

    def of(self, row: Any) -> Any:
        value = getattr(row, self.value)
        return value * 100 if self.kind == "pct" and value is not None else value


COLUMNS: dict[str, Column] = {
    c.value: c
    for c in (
        Column("Day", "day"),
        Column("Minute", "minute", "time"),
        Column("At", "at", "time"),
        Column("Topic", "topic"),
        Column("Partition", "partition", "num"),
        Column("Partitions", "partitions", "num"),
        Column("Broker", "broker", "num"),
        Column("Availability", "availability", "pct"),
        Column("Leaderless", "leaderless_s", "s"),
        Column("Outages", "outages", "num"),
        Column("Recovered", "recoveries", "num"),
        Column("MTTR", "mttr_s", "s"),
        Column("Started", "started_at", "time"),
        Column("Estimated start", "estimated_started_at", "time"),
        Column("Ended", "ended_at", "time"),
        Column("Duration", "duration_s", "s"),
        Column("Outage", "outage_s", "s"),
        Column("Broker lost", "cause_broker", "num"),
        Column("Ended by", "end_reason"),
        Column("Strategy", "strategy"),
        Column("Cause", "cause"),
        Column("Elections", "elections", "num"),
        Column("Unclean", "unclean", "num"),
        Column("Leader before", "leader_before", "num"),
        Column("Leader after", "leader_after", "num"),
        Column("ISR before", "isr_before"),
        Column("ISR after", "isr_after"),
        Column("Epoch", "controller_epoch", "num"),
        Column("Leaders", "leaders", "num"),
        Column("Skew", "skew", "num"),
        Column("Max", "max_leaders", "num"),
        Column("Min", "min_leaders", "num"),
        Column("Mean", "mean_leaders", "num"),
        Column("Brokers", "brokers", "num"),
        Column("Started", "first_at", "time"),
        Column("Controller", "controller_id", "num"),
        Column("Previous", "previous_controller_id", "num"),
        Column("Nobody acting", "gap_s", "s"),
        Column("Failover work", "failover_s", "s"),
        Column("Status", "status"),
        Column("From", "origin_replicas"),
        Column("To", "target_replicas"),
        Column("Action", "action_id"),
        Column("Rank", "rank", "num"),
        Column("Flaps", "flaps", "num"),
        Column("Shrinks", "shrinks", "num"),
        Column("Expands", "expands", "num"),
    )
}
"""How each result attribute is shown, declared once for every page's table and CSV (a page that
reads one differently names its own ``Column``)."""


def columns(*shown: str | Column) -> tuple[Column, ...]:
    """A page's table: attributes as ``COLUMNS`` shows them, or a page's own ``Column``."""
    return tuple(c if isinstance(c, Column) else COLUMNS[c] for c in shown)


@dataclass(frozen=True, slots=True)
class Page:
    slug: str
    title: str
    about: str
    rows: Callable[[Filters], QuerySet[Any]]
    columns: Sequence[Column]
    chart: Callable[[Filters], ChartConfig]


def _line(labels: Sequence[str], datasets: list[dict[str, Any]], y_title: str, **scales: Any) -> ChartConfig:
    return {
        "type": "line",
        "data": {"labels": list(labels), "datasets": datasets},
        "options": {"scales": {"y": {"title": {"display": True, "text": y_title}}, **scales}},
    }


def _bar(
    labels: Sequence[str], datasets: list[dict[str, Any]], y_title: str, stacked: bool = False, horizontal: bool = False
) -> ChartConfig:
    axis = "x" if horizontal else "y"
    options: dict[str, Any] = {"scales": {axis: {"title": {"display": True, "text": y_title}}}}
    if stacked:
        options["scales"]["x"] = {**options["scales"].get("x", {}), "stacked": True}
        options["scales"]["y"] = {**options["scales"].get("y", {}), "stacked": True}
    if horizontal:
        options["indexAxis"] = "y"
    return {"type": "bar", "data": {"labels": list(labels), "datasets": datasets}, "options": options}


def _right_axis(config: ChartConfig, title: str) -> ChartConfig:
    """``config`` with the second y axis (``yAxisID: "y2"``) on the right, without its own grid."""
    config["options"]["scales"]["y2"] = {
        "position": "right",
        "title": {"display": True, "text": title},
        "grid": {"drawOnChartArea": False},
    }
    return config


def _day_labels(f: Filters) -> list[str]:
    return [d.isoformat() for d in f.days]


def _covered_days(f: Filters) -> set[date]:
    """Days the results cover for this cluster (every run writes each known topic's row for each of
    its days). Outside them a chart shows a gap, not a zero: before a cluster's first record, or a
    day no run has reached yet, nothing is known."""
    return set(f.by_day(M.TopicAvailability.objects.all()).values_list("day", flat=True).distinct())


def _counts(f: Filters, per_day: dict[date, int]) -> list[int | None]:
    covered = _covered_days(f)
    return [per_day.get(d, 0) if d in covered else None for d in f.days]


# --- availability ----------------------------------------------------------------------------------


def _availability_chart(f: Filters) -> ChartConfig:
    rows = f.by_day(M.TopicAvailability.objects.all())
    worst = list(
        rows.values("topic")
        .annotate(mean=Avg("availability"))
        .order_by("mean", "topic")
        .values_list("topic", flat=True)[:WORST_TOPICS]
    )
    per_topic: dict[str, dict[date, float | None]] = defaultdict(dict)
    for topic, day, availability in rows.filter(topic__in=worst).values_list("topic", "day", "availability"):
        per_topic[topic][day] = None if availability is None else round(availability * 100, 5)
    weighted = {
        r["day"]: r["w"] / r["p"] * 100 if r["p"] else None
        for r in rows.values("day").annotate(w=Sum(F("availability") * F("partitions")), p=Sum("partitions"))
    }
    datasets = [{"label": "whole cluster", "data": [weighted.get(d) for d in f.days], "borderWidth": 3}]
    datasets += [{"label": t, "data": [per_topic[t].get(d) for d in f.days]} for t in worst]
    return _line(_day_labels(f), datasets, "availability %")


# --- MTTR and outages ---------------------------------------------------------------------------


def _mttr_chart(f: Filters) -> ChartConfig:
    per_day = {
        r["day"]: r
        for r in f.by_day(M.BrokerOutage.objects.all())
        .values("day")
        .annotate(recovery=Sum("recovery_s"), recoveries=Sum("recoveries"), outages=Sum("outages"))
    }
    mttr = [
        (per_day[d]["recovery"] / per_day[d]["recoveries"]) if d in per_day and per_day[d]["recoveries"] else None
        for d in f.days
    ]
    outages = _counts(f, {d: r["outages"] for d, r in per_day.items()})
    config = _bar(
        _day_labels(f),
        [
            {"label": "MTTR (s)", "data": mttr, "yAxisID": "y"},
            {"label": "outages started", "data": outages, "type": "line", "yAxisID": "y2"},
        ],
        "mean time to recovery (s)",
    )
    return _right_axis(config, "outages")


def _outages_chart(f: Filters) -> ChartConfig:
    rows = (
        f.by_time(M.UnavailabilityInterval.objects.all(), "started_at")
        .values("cause_broker")
        .annotate(n=Count("id"), total=Sum("outage_s"))
        .order_by("cause_broker")
    )
    labels = [f"broker {r['cause_broker']}" if r["cause_broker"] is not None else "unknown" for r in rows]
    config = _bar(
        labels,
        [
            {"label": "outages", "data": [r["n"] for r in rows]},
            {"label": "leaderless time (s)", "data": [r["total"] for r in rows], "yAxisID": "y2"},
        ],
        "outages caused",
    )
    return _right_axis(config, "seconds")


# --- elections ---------------------------------------------------------------------------------


def _elections_chart(f: Filters) -> ChartConfig:
    counts: dict[str, dict[date, int]] = defaultdict(dict)
    for r in f.by_day(M.ElectionCount.objects.all()).values("strategy", "day").annotate(n=Sum("elections")):
        counts[r["strategy"]][r["day"]] = r["n"]
    datasets = [{"label": s, "data": _counts(f, counts[s])} for s in sorted(counts)]
    return _bar(_day_labels(f), datasets, "elections", stacked=True)


def _unclean_chart(f: Filters) -> ChartConfig:
    per_day = dict(
        f.by_day(M.UncleanElection.objects.all()).values("day").annotate(n=Count("id")).values_list("day", "n")
    )
    return _bar(
        _day_labels(f),
        [{"label": "unclean elections", "data": _counts(f, per_day)}],
        "unclean elections",
    )


# --- leaders per broker --------------------------------------------------------------------------


def bucket_minutes(f: Filters) -> int:
    """The coarsest of 1, 5, 15, 60, 180, 360, 1440 minutes that keeps a series under ``MAX_POINTS``."""
    span = (f.end - f.start).total_seconds() / 60
    for size in (1, 5, 15, 60, 180, 360, 1440):
        if span / size <= MAX_POINTS:
            return size
    return 1440


def _minute_label(epoch_minute: int) -> str:
    return datetime.fromtimestamp(epoch_minute * 60, tz=UTC).strftime("%m-%d %H:%M")


def _leaders_chart(f: Filters) -> ChartConfig:
    size = bucket_minutes(f)
    rows = (
        f.by_minute(M.LeaderCount.objects.all())
        .annotate(bucket=F("epoch_minute") / size)
        .values("bucket", "broker")
        .annotate(v=Avg("leaders"))
        .order_by("bucket", "broker")
    )
    buckets: list[int] = []
    series: dict[int, dict[int, float]] = defaultdict(dict)
    for r in rows:
        if not buckets or buckets[-1] != r["bucket"]:
            buckets.append(r["bucket"])
        series[r["broker"]][r["bucket"]] = round(r["v"], 2)
    datasets = [
        {"label": f"broker {b}", "data": [series[b].get(k) for k in buckets], "pointRadius": 0, "borderWidth": 1.5}
        for b in sorted(series)
    ]
    title = "leaders (end of minute)" if size == 1 else f"leaders (mean over {size}-minute buckets)"
    return _line([_minute_label(k * size) for k in buckets], datasets, title)


def _skew_chart(f: Filters) -> ChartConfig:
    size = bucket_minutes(f)
    rows = (
        f.by_minute(M.LeaderSkew.objects.all())
        .annotate(bucket=F("epoch_minute") / size)
        .values("bucket")
        .annotate(skew=Max("skew"), top=Max("max_leaders"), low=Min("min_leaders"))
        .order_by("bucket")
    )
    labels = [_minute_label(r["bucket"] * size) for r in rows]
    return _line(
        labels,
        [{"label": "skew (max / mean)", "data": [r["skew"] for r in rows], "pointRadius": 0}],
        "leader skew",
    )


# --- failovers, reassignments, flapping ------------------------------------------------------------


def _failovers_chart(f: Filters) -> ChartConfig:
    rows = list(f.by_time(M.ControllerFailover.objects.all(), "first_at").order_by("first_at"))
    return _bar(
        [f"epoch {r.controller_epoch} ({r.first_at:%m-%d %H:%M})" for r in rows],
        [
            {"label": "nobody acting (s)", "data": [r.gap_s for r in rows]},
            {"label": "failover work (s)", "data": [r.failover_s for r in rows]},
        ],
        "seconds",
    )


def reassignment_actions(f: Filters) -> list[dict[str, Any]]:
    """Per request: partitions, start, end (None while any partition moves), duration."""
    rows = (
        f.by_time(M.Reassignment.objects.all(), "started_at")
        .values("action_id")
        .annotate(
            partitions=Count("id"),
            started=Min("started_at"),
            ended=Max("ended_at"),
            moving=Count("id", filter=Q(ended_at__isnull=True)),
            topic=Min("topic"),
            completed=Count("id", filter=Q(status="completed")),
        )
        .order_by("started")
    )
    actions = []
    for r in rows:
        ended = None if r["moving"] else r["ended"]
        # "audit:<id>": the job matched the move to this operator action (workers/analytics/actions.py).
        audit = r["action_id"].removeprefix("audit:") if r["action_id"].startswith("audit:") else ""
        actions.append(
            {
                **r,
                "ended": ended,
                "duration_s": (ended - r["started"]).total_seconds() if ended else None,
                "audit_id": int(audit) if audit.isdigit() else None,
            }
        )
    return actions


def _reassignments_chart(f: Filters) -> ChartConfig:
    actions = reassignment_actions(f)
    return _bar(
        [f"{a['topic']} x{a['partitions']} ({a['started']:%m-%d %H:%M})" for a in actions],
        [{"label": "action duration (s)", "data": [a["duration_s"] for a in actions]}],
        "seconds",
        horizontal=True,
    )


def _flapping_chart(f: Filters) -> ChartConfig:
    rows = (
        f.by_day(M.IsrFlapping.objects.all())
        .values("topic", "partition")
        .annotate(flaps=Sum("flaps"), shrinks=Sum("shrinks"), expands=Sum("expands"))
        .order_by("-flaps", "topic", "partition")[:20]
    )
    return _bar(
        [f"{r['topic']}-{r['partition']}" for r in rows],
        [{"label": "ISR flaps", "data": [r["flaps"] for r in rows]}],
        "flaps (shrink + expand cycles)",
        horizontal=True,
    )


# --- the registry ------------------------------------------------------------------------------------


PAGES: tuple[Page, ...] = (
    Page(
        "availability",
        "Availability per topic",
        "Share of partition-time with a leader, per topic and day: 1 - leaderless partition-seconds / "
        "(partitions x seconds). The chart shows the whole cluster and the least available topics.",
        lambda f: f.by_day(M.TopicAvailability.objects.all()).order_by("availability", "-day", "topic"),
        columns("day", "topic", "partitions", "availability", "leaderless_s", "outages", "recoveries", "mttr_s"),
        _availability_chart,
    ),
    Page(
        "mttr",
        "MTTR",
        "Mean time to recovery: how long partitions stayed leaderless, averaged over the outages that "
        "ended (with an election) on that day; per broker whose loss caused them. An outage caused by a "
        "broker that died counts from the estimated loss of its ZooKeeper session (recorded by the "
        "controller), else from when the controller detected it.",
        lambda f: f.by_day(M.BrokerOutage.objects.all()).order_by("-day", "broker"),
        columns(
            "day",
            Column("Broker lost", "broker", "num"),
            Column("Outages started", "outages", "num"),
            "recoveries",
            "mttr_s",
            "leaderless_s",
        ),
        _mttr_chart,
    ),
    Page(
        "outages",
        "Unavailability intervals",
        "Every interval a partition spent without a leader: from going offline (or losing its leader) "
        "to the next election. Open intervals have no end yet. 'Detected' is when the controller noticed; "
        "'Estimated start' is when a dead broker's ZooKeeper session was really lost (its registration "
        "vanishes only a session timeout later). 'Outage' counts from the estimate when there is one, "
        "and is what the daily figures use; 'Detected duration' counts from the detection.",
        lambda f: f.by_time(M.UnavailabilityInterval.objects.all(), "started_at").order_by(
            F("outage_s").desc(nulls_first=True), "started_at"
        ),
        columns(
            "topic",
            "partition",
            Column("Detected", "started_at", "time"),
            "estimated_started_at",
            "ended_at",
            "outage_s",
            Column("Detected duration", "duration_s", "s"),
            "cause_broker",
            "end_reason",
        ),
        _outages_chart,
    ),
    Page(
        "elections",
        "Elections by strategy",
        "Leader elections per day, by strategy (offline, reassign, preferred, controlled shutdown) and the "
        "controller event that caused them.",
        lambda f: f.by_day(M.ElectionCount.objects.all()).order_by("-day", "-elections"),
        columns("day", "strategy", "cause", "elections", "unclean"),
        _elections_chart,
    ),
    Page(
        "unclean",
        "Unclean elections",
        "Leaders elected from outside the ISR: the partition may have lost acknowledged writes.",
        lambda f: f.by_day(M.UncleanElection.objects.all()).order_by("-at"),
        columns(
            "at",
            "topic",
            "partition",
            "leader_before",
            "leader_after",
            "isr_before",
            "isr_after",
            "cause",
            "controller_epoch",
        ),
        _unclean_chart,
    ),
    Page(
        "leaders",
        "Leaders per broker",
        "How many partitions each broker leads, at the end of every minute (each partition's leader "
        "carried forward between changes). Long ranges are averaged into buckets in the chart.",
        lambda f: f.by_minute(M.LeaderCount.objects.all()).order_by("-epoch_minute", "broker"),
        columns("minute", "broker", "leaders"),
        _leaders_chart,
    ),
    Page(
        "skew",
        "Leader skew",
        "Leader balance per minute: the busiest broker's leaders divided by the mean over brokers "
        "(1.0 is perfectly even; a dead broker leads nothing and raises it).",
        lambda f: f.by_minute(M.LeaderSkew.objects.all()).order_by(F("skew").desc(nulls_last=True), "-epoch_minute"),
        columns("minute", "skew", "max_leaders", "min_leaders", "mean_leaders", "brokers"),
        _skew_chart,
    ),
    Page(
        "failovers",
        "Controller failovers",
        "Each new controller epoch: the time nobody acted (old controller's last record to the new one's "
        "first) and the new controller's own failover work (elected to ready).",
        lambda f: f.by_time(M.ControllerFailover.objects.all(), "first_at").order_by("-first_at"),
        columns("first_at", "controller_epoch", "controller_id", "previous_controller_id", "gap_s", "failover_s"),
        _failovers_chart,
    ),
    Page(
        "reassignments",
        "Reassignment durations",
        "Partition reassignments from start to completion (or cancellation); the chart shows whole "
        "requests (all partitions of one action).",
        lambda f: f.by_time(M.Reassignment.objects.all(), "started_at").order_by(
            F("duration_s").desc(nulls_first=True), "started_at"
        ),
        columns(
            "topic",
            "partition",
            "started_at",
            "ended_at",
            "duration_s",
            "status",
            "origin_replicas",
            "target_replicas",
            "action_id",
        ),
        _reassignments_chart,
    ),
    Page(
        "flapping",
        "Flapping partitions",
        "Partitions whose ISR shrank and grew back most often (flaps = min(shrinks, expands)); the job "
        "keeps the top partitions of each day.",
        lambda f: f.by_day(M.IsrFlapping.objects.all()).order_by("-day", "rank"),
        columns("day", "rank", "topic", "partition", "flaps", "shrinks", "expands"),
        _flapping_chart,
    ),
)

BY_SLUG = {page.slug: page for page in PAGES}


def known_clusters() -> list[str]:
    return list(M.TopicAvailability.objects.values_list("cluster", flat=True).distinct().order_by("cluster"))


def latest_day(cluster: str) -> date | None:
    latest: date | None = M.TopicAvailability.objects.filter(cluster=cluster).aggregate(d=Max("day"))["d"]
    return latest


def summary(f: Filters) -> dict[str, Any]:
    """Headline figures for the overview."""
    topics = f.by_day(M.TopicAvailability.objects.all()).aggregate(
        w=Sum(F("availability") * F("partitions")), p=Sum("partitions")
    )
    brokers = f.by_day(M.BrokerOutage.objects.all()).aggregate(
        outages=Sum("outages"), recovered=Sum("recoveries"), recovery=Sum("recovery_s")
    )
    elections = f.by_day(M.ElectionCount.objects.all()).aggregate(n=Sum("elections"), unclean=Sum("unclean"))
    return {
        "availability": topics["w"] / topics["p"] * 100 if topics["p"] else None,
        "outages": brokers["outages"] or 0,
        "mttr_s": brokers["recovery"] / brokers["recovered"] if brokers["recovered"] else None,
        "elections": elections["n"] or 0,
        "unclean": elections["unclean"] or 0,
        "failovers": f.by_time(M.ControllerFailover.objects.all(), "first_at").count(),
        "reassignments": f.by_time(M.Reassignment.objects.all(), "started_at").count(),
    }
