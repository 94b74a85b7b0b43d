"""The soak's scenario table (reference §6c): the soak-only scenarios with their pass figures, and
``ALL_SCENARIOS``, every scenario ``scripts/soak`` can run in F-number order.

Why a module of its own: the scenarios live with what they have in common (``scenarios_zk``:
ZooKeeper faults; ``scenarios_midway``: failover mid-operation; ``scenarios_churn``: flapping, floods
and the nemesis; ``scenarios_redis``: Redis faults; ``scenarios``: the per-PR tier), and this is the
one place that names them, their plan runs and what they need from the rig. They run from
``scripts/soak`` against a 3-node ensemble; ``run_scenario`` (``scenarios``) wraps each with the heal
phase and the checker.
"""

from __future__ import annotations

from scripts.reliability.scenarios import SCENARIOS, Scenario, by_name
from scripts.reliability.scenarios_churn import f15_broker_flapping, f21_event_flood, f22_nemesis
from scripts.reliability.scenarios_midway import f13_failover_mid_reassignment, f14_failover_mid_deletion
from scripts.reliability.scenarios_redis import REDIS_SCENARIOS
from scripts.reliability.scenarios_standby import STANDBY_SCENARIOS
from scripts.reliability.scenarios_zk import (
    f7_long_partition,
    f8_zk_leader_restart,
    f9_quorum_loss,
    f12_controlled_shutdown_slow_zk,
)

SOAK_SCENARIOS: dict[str, Scenario] = by_name(
    Scenario("F7", "long controller-ZK partition (3 Ts)", "new controller <= Ts + 3 s", f7_long_partition),
    Scenario("F8", "ZooKeeper leader restart x5", "headless window <= 2 Ts", f8_zk_leader_restart, plan_runs=10),
    Scenario("F9", "ZooKeeper quorum loss 30 s", "converged <= 2 Ts + 5 s", f9_quorum_loss, plan_runs=10),
    Scenario(
        "F12",
        "controlled shutdown: 200 ms ZK delay / ZK down (odd runs)",
        "shutdown <= 10 s; ZK down: broker exits <= 3 x (timeout + backoff)",
        f12_controlled_shutdown_slow_zk,
    ),
    Scenario(
        "F13",
        "failover mid-reassignment / cancel, target offline (odd runs)",
        "complete <= Ts + 10 s; cancel reverted <= 5 s",
        f13_failover_mid_reassignment,
        replicating=True,
    ),
    Scenario(
        "F14",
        "topic deletion: failover mid-way / replica broker down / reassigned (runs mod 4)",
        "deleted <= 15 s (after the broker returns); the reassignment refused",
        f14_failover_mid_deletion,
    ),
    Scenario(
        "F15",
        "broker flapping, auto-rebalance on",
        "<= 3 leader changes per partition per bounce",
        f15_broker_flapping,
        auto_rebalance=True,
        replicating=True,
        plan_runs=10,
    ),
    Scenario("F21", "event flood (1,000 ISR notifications)", "drain <= 10 s; shutdown <= 5 s", f21_event_flood),
    Scenario("F22", "randomized nemesis (seeded)", "S1-S6; L1-L5 after heal", f22_nemesis, mirror=True),
)

ALL_SCENARIOS: dict[str, Scenario] = dict(
    sorted(
        {**SCENARIOS, **SOAK_SCENARIOS, **REDIS_SCENARIOS, **STANDBY_SCENARIOS}.items(), key=lambda kv: int(kv[0][1:])
    )
)
