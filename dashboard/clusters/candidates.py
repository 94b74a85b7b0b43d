"""The controller candidates of a cluster as its overview shows them: active or standby, warm or
cold (and why), how far behind ZooKeeper a standby is, and how each one's last failover went.

Read from each candidate's status hash (``workers.sinks``, TTL 10 s, docs/contracts.md), found by
key pattern so that candidates run outside the worker fleet (``run_controller``) are listed too; a
cluster has a handful of keys under its ``controller:`` prefix, so the scan is short.
"""

from __future__ import annotations

from typing import Any

import redis

from dashboard.lib.redis_keys import controller_status_key


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value not in (None, "") else None
    except ValueError:
        return None


def candidate_rows(client: redis.Redis, cluster: str) -> list[dict[str, Any]]:
    """One row per candidate with a live status hash, active first, then by id."""
    prefix = controller_status_key(cluster, 0)[:-1]
    ids = sorted(
        int(suffix)
        for key in client.scan_iter(match=prefix + "*", count=200)
        if (suffix := _text(key)[len(prefix) :]).isdigit()
    )
    if not ids:
        return []
    pipe = client.pipeline(transaction=False)
    for controller_id in ids:
        pipe.hgetall(controller_status_key(cluster, controller_id))
    rows = []
    for controller_id, raw in zip(ids, pipe.execute(), strict=True):
        status = {_text(k): _text(v) for k, v in raw.items()}
        if not status:
            continue
        active = status.get("active") == "1"
        state = status.get("standby_state", "")
        # Following, but with a context its takeover cannot use (``standby_context``): it will read everything.
        broken = status.get("standby_context", "").startswith("broken")
        warm = status.get("standby_warm") == "1" and not broken
        rows.append(
            {
                "controller_id": controller_id,
                "active": active,
                # A candidate from before issue 28 publishes no standby fields: unknown, not cold.
                "standby": "active" if active else ("warm" if warm else ("cold" if broken else (state or "?"))),
                "reason": "" if active else status["standby_context"] if broken else status.get("standby_reason", ""),
                "lag_ms": _number(status.get("standby_lag_ms")),
                "lag_p99_ms": _number(status.get("standby_lag_p99_ms")),
                "backlog": _number(status.get("standby_backlog")),
                "last_failover_path": status.get("last_failover_path", ""),
                "last_failover_ms": _number(status.get("last_failover_ms")),
            }
        )
    rows.sort(key=lambda r: (not r["active"], r["controller_id"]))
    return rows
