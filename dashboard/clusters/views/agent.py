"""Live lag from a broker agent's ``GET /v1/state`` (issue #4), fetched on demand by the brokers page.

The agent serves on the CONTROL listener of its registration, else PLAINTEXT. Observed Kafka
brokers have no such endpoint: the page then shows "no agent" instead of an error. The response
shape is read defensively (``replicas``: list of objects with ``topic``, ``partition`` and ``lag``
or ``log_end_offset``/``high_watermark``), so an agent that adds fields does not break the page.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse

from dashboard.clusters.views.common import cluster_and_snapshot

_LISTENERS = ("CONTROL", "PLAINTEXT")


def agent_url(endpoints: list[str]) -> str | None:
    """``http://host:port/v1/state`` from the CONTROL (else PLAINTEXT) listener, or None."""
    by_listener = {}
    for ep in endpoints:
        listener, sep, rest = ep.partition("://")
        if sep:
            by_listener[listener.upper()] = rest
    for listener in _LISTENERS:
        address = by_listener.get(listener)
        if address:
            host, _, port = address.rpartition(":")
            return f"http://{host or '127.0.0.1'}:{port}/v1/state"
    return None


def summarize(state: Any) -> dict[str, Any]:
    """Lag figures from an agent's ``/v1/state`` (``replicas``: one entry per hosted replica).

    * own lag: for each replica this broker follows, how far its log end is behind the high
      watermark it knows (``high_watermark - log_end_offset``, never negative);
    * followers: for each partition it leads, the lag it measures for each follower (``lag``).
    """
    replicas = state.get("replicas") if isinstance(state, dict) else None
    if not isinstance(replicas, list):
        return {"replicas": None, "leaders": None, "max_lag": None, "lagging": None,
                "followers_behind": None, "max_follower_lag": None}  # fmt: skip
    own: list[int] = []
    followers: list[int] = []
    leaders = 0
    for replica in replicas:
        if not isinstance(replica, dict):
            continue
        if str(replica.get("role", "")).lower().startswith("leader"):
            leaders += 1
            for follower in replica.get("followers") or []:
                lag = follower.get("lag") if isinstance(follower, dict) else None
                if isinstance(lag, int):
                    followers.append(lag)
            continue
        leo, hw = replica.get("log_end_offset"), replica.get("high_watermark")
        if isinstance(leo, int) and isinstance(hw, int):
            own.append(max(hw - leo, 0))
    return {
        "replicas": len(replicas),
        "leaders": leaders,
        "max_lag": max(own, default=0),
        "lagging": sum(1 for lag in own if lag > 0),
        "followers_behind": sum(1 for lag in followers if lag > 0),
        "max_follower_lag": max(followers, default=0),
    }


def broker_agent(request: HttpRequest, name: str, broker: int) -> JsonResponse:
    _cluster, snap = cluster_and_snapshot(name)
    registration = snap.brokers().get(broker)
    if registration is None:
        return JsonResponse({"available": False, "reason": "broker not registered"})
    url = agent_url(list(registration.get("endpoints") or []))
    if url is None:
        return JsonResponse({"available": False, "reason": "no CONTROL or PLAINTEXT listener"})
    try:
        with urllib.request.urlopen(url, timeout=settings.BROKER_AGENT_TIMEOUT_S) as response:
            state = json.loads(response.read(4_000_000))
    except (urllib.error.URLError, TimeoutError, OSError, ValueError) as exc:
        return JsonResponse({"available": False, "reason": f"no agent answering at {url} ({type(exc).__name__})"})
    return JsonResponse({"available": True, "url": url, **summarize(state)})
