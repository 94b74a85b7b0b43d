"""The hosted candidates (the controller host's processes, as scripts/run starts them) report warm or
cold in their Redis status hash, and the standby's failover takes the warm path."""

from __future__ import annotations

import json

import redis
from kazoo.client import KazooClient

from tests.integration.test_controller_host import Workers, _controller_id, workers
from tests.support.zk import wait_for

__all__ = ["workers"]  # fixture


def test_the_standby_reports_warm_and_takes_over_warm(zk: KazooClient, redis_url: str, workers: Workers) -> None:
    workers.start(100)
    wait_for(lambda: _controller_id(zk) == 100, timeout=60, what="worker 100 elected")
    workers.start(101)
    conn = redis.Redis.from_url(redis_url, decode_responses=True)
    key = "kcp:hosttest:controller:101"
    wait_for(lambda: conn.hget(key, "standby_warm") == "1", timeout=60, what="standby warm in its status")
    assert conn.hget(key, "standby_state") == "warm" and conn.hget(key, "standby_backlog") == "0"
    assert conn.hget("kcp:hosttest:controller:100", "standby_state") == "paused"
    workers.stop(100)
    wait_for(lambda: _controller_id(zk) == 101, timeout=30, what="standby takes over")
    wait_for(lambda: conn.hget(key, "last_failover_path") == "warm", timeout=30, what="warm failover in status")
    entries: list[tuple[str, dict[str, str]]] = conn.xrange("kcp:hosttest:state-changes")  # type: ignore[assignment]
    records = [json.loads(fields["r"]) for _, fields in entries]
    paths = [(r["controller_id"], r["path"]) for r in records if r["kind"] == "failover"]
    assert paths[-1] == (101, "warm")
