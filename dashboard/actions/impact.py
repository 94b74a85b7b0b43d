"""Impact preview in the dashboard: read the live state, run ``controller_core.impact`` on it.

The state comes from the cluster's ZooKeeper, not from the Redis mirror: the same znodes the
controller reads (registrations with racks, assignments, partition state znodes, topic configs), at
the moment of the request, so the preview cannot be behind a lagging or resyncing mirror and works
for a cluster no mirror runs for. The cost is one batched read of every assignment and state znode.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from controller_core.impact import MODES, Impact, PartitionSnapshot, brokers_in_rack, compute_impact
from controller_core.model import TopicPartition
from controller_core.partition_state_machine import parse_config_bool

MIN_ISR = "min.insync.replicas"
UNCLEAN = "unclean.leader.election.enable"


@dataclass(frozen=True, slots=True)
class Target:
    """What the operator asked about: brokers or a rack, failing or shutting down."""

    mode: str
    brokers: tuple[int, ...] = ()
    rack: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"mode": self.mode, "brokers": list(self.brokers), "rack": self.rack}

    def describe(self) -> str:
        who = f"rack {self.rack}" if self.rack else "broker " + ", ".join(str(b) for b in self.brokers)
        return f"{who} {'fails now' if self.mode == 'failure' else 'is shut down (controlled shutdown)'}"


def parse_target(data: Mapping[str, Any]) -> Target:
    """Validate form or JSON fields (``mode``, ``broker`` or ``brokers``, ``rack``); raises ``ValueError``."""
    mode = str(data.get("mode", "") or "failure").strip()
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}")
    rack = str(data.get("rack", "") or "").strip()
    raw = data.get("brokers", data.get("broker", ""))
    if isinstance(raw, (list, tuple)):
        items = [str(x).strip() for x in raw]
    else:
        items = [x.strip() for x in str(raw or "").split(",")]
    items = [x for x in items if x]
    if rack and items:
        raise ValueError("name brokers or a rack, not both")
    if not rack and not items:
        raise ValueError("name a broker (or several, comma separated) or a rack")
    if any(not x.isdigit() for x in items):
        raise ValueError("broker ids must be non-negative whole numbers")
    if len(rack) > 255:
        raise ValueError("the rack name is too long")
    return Target(mode, tuple(sorted({int(x) for x in items})), rack)


def _config_int(config: Mapping[str, str], default: int) -> int:
    raw = config.get(MIN_ISR)
    return int(raw) if raw is not None and str(raw).isdigit() else default


def _config_bool(config: Mapping[str, str]) -> bool:
    raw = config.get(UNCLEAN)
    try:
        return raw is not None and parse_config_bool(raw)
    except ValueError:
        return False


def read_snapshot(store: Any) -> tuple[dict[TopicPartition, PartitionSnapshot], dict[int, str | None]]:
    """Every partition (assignment, leader, ISR, topic settings) and every registered broker's rack."""
    topics = sorted(store.get_all_topics())
    assignments = store.get_replica_assignments(topics)
    configs = store.get_topic_configs(topics) if topics else {}
    default_min_isr = int(getattr(settings, "MIRROR_DEFAULT_MIN_ISR", 1))
    tps = [TopicPartition(t, p) for t, ta in assignments.items() for p in ta.partitions]
    states = store.get_partition_states(tps) if tps else {}
    out: dict[TopicPartition, PartitionSnapshot] = {}
    for tp in tps:
        config = configs.get(tp.topic, {})
        replicas = tuple(assignments[tp.topic].partitions[tp.partition].replicas)
        read = states.get(tp)
        min_isr, unclean = _config_int(config, default_min_isr), _config_bool(config)
        if read is not None and read.state is not None:
            lai = read.state.leader_and_isr
            out[tp] = PartitionSnapshot(replicas, lai.leader, tuple(lai.isr), lai.leader_epoch, min_isr, unclean)
        else:
            out[tp] = PartitionSnapshot(replicas, min_isr=min_isr, unclean=unclean)
    racks = {b: reg.rack for b, reg in store.get_all_broker_registrations().items()}
    return out, racks


def impact_of(store: Any, target: Target) -> Impact:
    """Read the live state and compute the impact; ``ValueError`` for brokers or racks not registered."""
    partitions, racks = read_snapshot(store)
    if target.rack:
        brokers = brokers_in_rack(racks, target.rack)
        if not brokers:
            known = sorted({r for r in racks.values() if r})
            raise ValueError(f"no registered broker is in rack {target.rack!r} (racks: {', '.join(known) or 'none'})")
    else:
        brokers = target.brokers
        missing = [b for b in brokers if b not in racks]
        if missing:
            raise ValueError(
                f"broker {', '.join(map(str, missing))} is not registered (live: {', '.join(map(str, sorted(racks)))})"
            )
    return compute_impact(partitions, racks, brokers, target.mode)


def racks_of(store: Any) -> dict[int, str | None]:
    return {b: reg.rack for b, reg in store.get_all_broker_registrations().items()}
