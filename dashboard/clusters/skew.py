"""Balance metrics, defined exactly as the tools operators know define them.

* **Preferred replicas %** (CMAK's topic view, Kafdrop's cluster total): the share of partitions whose
  leader is the first replica of their assignment (the *preferred* replica).
* **Replicas skew % / Leaders skew %** per broker (kafka-ui, ``PartitionDistributionStats``):
  ``(value - mean) / mean * 100`` with the mean over the live brokers, rounded to 0.1; kafka-ui hides
  it below 50 partitions in the cluster, and so do we (``None``).
* **Brokers skew % / Brokers leader skew % / Brokers spread %** (CMAK, ``TopicIdentity``): a broker is
  *skewed* when it holds more than ``ceil(replicas / brokers)`` replicas and *leader skewed* when it
  leads more than ``ceil(partitions / brokers)`` partitions; the percentages are the share of brokers
  that are, over the brokers that host the topic (or all live brokers for the cluster); spread is
  ``brokers hosting / live brokers``.

Pure functions over counters, so the pages, the Prometheus endpoint and the tests agree (``live.js``
repeats the two formulas the live overview recomputes).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

SKEW_MIN_PARTITIONS: Final = 50


def preferred_percent(partitions: int, non_preferred: int) -> float | None:
    """Share of partitions led by their preferred replica; None for a cluster without partitions."""
    if partitions <= 0:
        return None
    return round(100.0 * (partitions - non_preferred) / partitions, 1)


def skew_percent(value: int, mean: float) -> float | None:
    if mean <= 0:
        return None
    return round((value - mean) / mean * 100.0, 1)


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    broker: int
    live: bool
    replicas: int
    leaders: int
    replicas_skew: float | None  # kafka-ui
    leaders_skew: float | None  # kafka-ui
    skewed: bool  # CMAK
    leader_skewed: bool  # CMAK


@dataclass(frozen=True, slots=True)
class Balance:
    brokers: list[BrokerLoad]
    brokers_skew: float | None  # CMAK "Brokers Skew %"
    brokers_leader_skew: float | None  # CMAK "Brokers Leader Skew %"
    brokers_spread: float | None  # CMAK "Brokers Spread %"


def balance(
    replicas_by_broker: Mapping[int, int],
    leaders_by_broker: Mapping[int, int],
    live: Iterable[int],
    partitions: int,
    cluster_partitions: int | None = None,
) -> Balance:
    """Per-broker loads and the CMAK percentages for a cluster (or a topic: pass its counters).

    ``cluster_partitions`` decides kafka-ui's 50-partition threshold (default: ``partitions``).
    """
    live_set = set(live)
    ids = sorted(set(replicas_by_broker) | set(leaders_by_broker) | live_set)
    hosting = [b for b in ids if replicas_by_broker.get(b, 0) > 0]
    total_replicas = sum(replicas_by_broker.values())
    n_live = len(live_set) or 1
    mean_replicas = total_replicas / n_live
    mean_leaders = sum(leaders_by_broker.values()) / n_live
    show_skew = (cluster_partitions if cluster_partitions is not None else partitions) >= SKEW_MIN_PARTITIONS
    basis = hosting or sorted(live_set)
    avg_replicas = math.ceil(total_replicas / len(basis)) if basis else 0
    avg_leaders = math.ceil(partitions / len(basis)) if basis else 0
    loads = [
        BrokerLoad(
            broker=b,
            live=b in live_set,
            replicas=replicas_by_broker.get(b, 0),
            leaders=leaders_by_broker.get(b, 0),
            replicas_skew=skew_percent(replicas_by_broker.get(b, 0), mean_replicas)
            if show_skew and b in live_set
            else None,
            leaders_skew=skew_percent(leaders_by_broker.get(b, 0), mean_leaders)
            if show_skew and b in live_set
            else None,
            skewed=replicas_by_broker.get(b, 0) > avg_replicas,
            leader_skewed=leaders_by_broker.get(b, 0) > avg_leaders,
        )
        for b in ids
    ]
    in_basis = [load for load in loads if load.broker in set(basis)]
    if not in_basis:
        return Balance(loads, None, None, None)
    return Balance(
        loads,
        round(100.0 * sum(1 for x in in_basis if x.skewed) / len(in_basis), 1),
        round(100.0 * sum(1 for x in in_basis if x.leader_skewed) / len(in_basis), 1),
        round(100.0 * len(hosting) / len(live_set), 1) if live_set else None,
    )
