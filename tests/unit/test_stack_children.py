"""``scripts/run``'s demo: its auto rebalance waits for catch-up by default (issue #29, item 4)."""

from __future__ import annotations

import argparse

from scripts.stack import build_children


def _args(**overrides: object) -> argparse.Namespace:
    values = {"host": "127.0.0.1", "port": 8000, "cluster": "demo", "brokers": 5, "rebalance_interval": 30}
    return argparse.Namespace(**{**values, "rebalance_min_isr": 30, **overrides})


ENV = {"ZOOKEEPER_CONNECT": "127.0.0.1:21810/kafka", "REDIS_URL": "redis://127.0.0.1:26379/0"}


def _min_isr(args: argparse.Namespace) -> set[str]:
    workers = [c for c in build_children(args, ENV) if c.name.startswith("worker-")]
    assert len(workers) == 2
    return {c.env["CONTROLLER_REBALANCE_MIN_ISR_S"] for c in workers}


def test_the_demo_controllers_rebalance_only_to_warm_replicas() -> None:
    assert _min_isr(_args()) == {"30"}
    assert _min_isr(_args(rebalance_min_isr=0)) == {"0"}
