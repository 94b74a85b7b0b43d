"""``/clusters/<name>/metrics``: Prometheus exposition with Kafka's controller metric names.

Auth: scrapers send ``Authorization: Bearer <METRICS_TOKEN>`` (settings/env ``METRICS_TOKEN``;
empty disables token access); a logged-in user may read it in the browser. Anything else gets 401.

Names follow the Prometheus JMX exporter's usual Kafka rules (lower-cased MBean path), so panels
built for a real Kafka controller work beside the dashboard:

* from the mirror's counters (any mode): ``kafka_controller_kafkacontroller_activecontrollercount``
  (1 while ``/controller`` names a broker), ``..._offlinepartitionscount``,
  ``..._preferredreplicaimbalancecount``, ``..._globalpartitioncount``, ``..._globaltopiccount``,
  plus ``kcp_underreplicated_partitions``, ``kcp_under_min_isr_partitions``, per-state gauges;
* from the active controller's status hash (managed mode only, docs/contracts.md):
  ``kafka_controller_controllerstats_uncleanleaderelectionspersec_total`` (a counter, as the
  exporter turns Kafka's meter into one), ``kafka_controller_controllereventmanager_eventqueuesize``,
  ``..._eventqueuetimems{quantile="0.5"|"1.0"}``, ``kafka_controller_kafkacontroller_controllerstate``,
  and per controller state ``kcp_controller_state_events_total``, ``kcp_controller_state_seconds_total``
  and ``kcp_controller_state_cpu_seconds_total`` (the event thread's own CPU: the difference is time
  its events spent waiting, mostly on ZooKeeper);
* the mirror's own health: ``kcp_mirror_lag_seconds`` (age of the oldest change in the last flush),
  ``kcp_mirror_staleness_seconds`` (since the last confirmed sync), ``kcp_mirror_heartbeat_age_seconds``,
  ``kcp_mirror_zookeeper_connected``, ``kcp_mirror_sequence``, ``kcp_mirror_zookeeper_unreachable``;
* hosting (issue #32): ``kcp_mirror_missing`` (no mirror for more than a lease period) and, for managed
  clusters, ``kcp_controller_missing`` and ``kcp_controller_candidates``.
"""

from __future__ import annotations

import hmac
from collections.abc import Callable, Iterator
from typing import Any, Final

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from dashboard.clusters import layout
from dashboard.clusters.hosting import ClusterHosting
from dashboard.clusters.snapshot import ZK_UNREACHABLE, ClusterSnapshot, status_from_meta
from dashboard.clusters.state_times import state_times
from dashboard.clusters.views.common import cluster_and_snapshot, hosting_of

COUNTER_GAUGES: Final = (
    ("kafka_controller_kafkacontroller_offlinepartitionscount", "Partitions without a live leader.", layout.OFFLINE),
    (
        "kafka_controller_kafkacontroller_preferredreplicaimbalancecount",
        "Partitions whose leader is not the preferred (first) replica.",
        layout.NON_PREFERRED,
    ),
    ("kafka_controller_kafkacontroller_globalpartitioncount", "Partitions.", layout.PARTITIONS),
    ("kafka_controller_kafkacontroller_globaltopiccount", "Topics.", layout.TOPICS),
    ("kcp_live_brokers", "Registered brokers.", layout.LIVE_BROKERS),
    (
        "kcp_underreplicated_partitions",
        "Partitions whose ISR is smaller than the replica list.",
        layout.UNDER_REPLICATED,
    ),
    ("kcp_under_min_isr_partitions", "Partitions whose ISR is smaller than min.insync.replicas.", layout.UNDER_MIN_ISR),
    ("kcp_reassigning_partitions", "Partitions being reassigned.", layout.REASSIGNING),
)
"""Gauges read straight from one of the mirror's counters: name, help, the counter (0 when absent)."""

STATE_GAUGES: Final = (
    ("kcp_partition_state_count", "Partitions per partition state.", layout.PARTITION_STATES, layout.pstate_counter),
    ("kcp_replica_state_count", "Replicas per replica state.", layout.REPLICA_STATES, layout.rstate_counter),
)
"""Gauge families with a ``state`` label: name, help, the states, each state's counter."""


def _authorized(request: HttpRequest) -> bool:
    if request.user.is_authenticated:
        return True
    token = settings.METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    scheme, _, value = header.partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token)


class SnapshotCollector:
    """A prometheus-client collector reading one cluster's snapshot at scrape time."""

    def __init__(self, snap: ClusterSnapshot, hosting: ClusterHosting | None = None) -> None:
        self.snap = snap
        self.hosting = hosting

    def collect(self) -> Iterator[Metric]:
        snap = self.snap
        label = ["cluster"]
        value = [snap.cluster]
        counts = snap.counts()
        meta = snap.meta()
        status = status_from_meta(meta)

        def gauge(name: str, doc: str, v: float) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=label)
            g.add_metric(value, v)
            return g

        controller_id = meta.get("controller_id", "")
        yield gauge(
            "kafka_controller_kafkacontroller_activecontrollercount",
            "Active controllers (1 while /controller names a broker).",
            1.0 if controller_id.lstrip("-").isdigit() else 0.0,
        )
        for name, doc, key in COUNTER_GAUGES:
            yield gauge(name, doc, counts.get(key, 0))
        for name, doc, states, counter in STATE_GAUGES:
            family = GaugeMetricFamily(name, doc, labels=["cluster", "state"])
            for state in states:
                family.add_metric([snap.cluster, state], counts.get(counter(state), 0))
            yield family
        yield from self._controller_metrics(controller_id)
        yield gauge(
            "kcp_mirror_lag_seconds", "Age of the oldest change in the mirror's last flush.", status.lag_ms / 1000
        )
        synced = status.synced_age_s
        yield gauge(
            "kcp_mirror_staleness_seconds",
            "Seconds since the mirror last confirmed it is in sync with ZooKeeper (-1: never).",
            synced if synced is not None else -1.0,
        )
        heartbeat = status.heartbeat_age_s
        yield gauge(
            "kcp_mirror_heartbeat_age_seconds",
            "Seconds since the mirror's last heartbeat (-1: no mirror data).",
            heartbeat if heartbeat is not None else -1.0,
        )
        yield gauge(
            "kcp_mirror_zookeeper_connected", "1 while the mirror's ZooKeeper session is connected.",
            1.0 if status.zk_state == "CONNECTED" else 0.0,
        )  # fmt: skip
        yield gauge("kcp_mirror_sequence", "The mirror's last published sequence number.", status.seq)
        yield gauge(
            "kcp_mirror_zookeeper_unreachable",
            "1 while the mirror runs but cannot reach the cluster's ZooKeeper (unreachable, not empty).",
            1.0 if status.zk_state in ZK_UNREACHABLE else 0.0,
        )
        yield from self._hosting_metrics(gauge)

    def _hosting_metrics(self, gauge: Callable[[str, str, float], GaugeMetricFamily]) -> Iterator[Metric]:
        """Issue #32: a cluster without a mirror, or a managed one without a controller, for a lease period."""
        hosting = self.hosting
        if hosting is None:
            return
        yield gauge(
            "kcp_mirror_missing",
            "1 when no worker has mirrored this cluster for more than a mirror lease period.",
            1.0 if hosting.mirror_missing_s is not None else 0.0,
        )
        if hosting.mode == "managed":
            yield gauge(
                "kcp_controller_missing",
                "1 when no controller candidate of this managed cluster was active for more than a slot lease period.",
                1.0 if hosting.controller_missing_s is not None else 0.0,
            )
            yield gauge(
                "kcp_controller_candidates",
                "Controller candidates hosted for this cluster by the workers (slot leases held).",
                float(len(hosting.candidates)),
            )

    def _controller_metrics(self, controller_id: str) -> Iterator[Metric]:
        if not controller_id.lstrip("-").isdigit():
            return
        fields: dict[str, Any] = self.snap.controller_status(int(controller_id))
        if not fields:
            return
        label = ["cluster"]
        value = [self.snap.cluster]

        def num(key: str) -> float | None:
            try:
                return float(fields[key])
            except (KeyError, ValueError):
                return None

        unclean = num("unclean_elections_total")
        if unclean is not None:
            c = CounterMetricFamily(
                "kafka_controller_controllerstats_uncleanleaderelectionspersec",
                "Unclean leader elections (Kafka's meter, as a counter).",
                labels=label,
            )
            c.add_metric(value, unclean)
            yield c
        size = num("event_queue_size")
        if size is not None:
            g = GaugeMetricFamily(
                "kafka_controller_controllereventmanager_eventqueuesize", "Controller event queue size.", labels=label
            )
            g.add_metric(value, size)
            yield g
        p50, top = num("event_queue_time_ms_p50"), num("event_queue_time_ms_max")
        if p50 is not None or top is not None:
            g = GaugeMetricFamily(
                "kafka_controller_controllereventmanager_eventqueuetimems",
                "Time events wait in the controller queue (ms).",
                labels=["cluster", "quantile"],
            )
            if p50 is not None:
                g.add_metric([self.snap.cluster, "0.5"], p50)
            if top is not None:
                g.add_metric([self.snap.cluster, "1.0"], top)
            yield g
        state = fields.get("state", "")
        from controller_core.controller_state import ControllerState

        code = ControllerState[state].value if state in ControllerState.__members__ else None
        if code is None and state.isdigit():
            code = int(state)
        if code is not None:
            g = GaugeMetricFamily(
                "kafka_controller_kafkacontroller_controllerstate", "What the controller is doing (Kafka's codes).",
                labels=label,
            )  # fmt: skip
            g.add_metric(value, code)
            yield g
        yield from self._state_time_metrics(fields)

    def _state_time_metrics(self, fields: dict[str, Any]) -> Iterator[Metric]:
        """Events, wall and event-thread CPU seconds per controller state (``per_state_ms``)."""
        rows = state_times(fields)
        if not rows:
            return
        labels = ["cluster", "state"]
        events = CounterMetricFamily(
            "kcp_controller_state_events", "Events the controller handled, per state.", labels=labels
        )
        wall = CounterMetricFamily(
            "kcp_controller_state_seconds", "Wall time of the controller's events, per state.", labels=labels
        )
        cpu = CounterMetricFamily(
            "kcp_controller_state_cpu_seconds",
            "The event thread's own CPU time, per state (wall minus CPU: waiting, mostly on ZooKeeper).",
            labels=labels,
        )
        for row in rows:
            key = [self.snap.cluster, row.state]
            events.add_metric(key, row.events)
            wall.add_metric(key, row.total_ms / 1000)
            if row.cpu_ms is not None:
                cpu.add_metric(key, row.cpu_ms / 1000)
        yield from (events, wall, cpu)


@login_not_required
def metrics(request: HttpRequest, name: str) -> HttpResponse:
    if not _authorized(request):
        response = HttpResponse("metrics need a login or 'Authorization: Bearer <METRICS_TOKEN>'\n", status=401)
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        response["Content-Type"] = "text/plain; charset=utf-8"
        return response
    cluster, snap = cluster_and_snapshot(name)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SnapshotCollector(snap, hosting_of(snap.client, cluster)))
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
