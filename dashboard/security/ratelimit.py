"""A per-user fixed-window rate limit for action POSTs, counted in Redis.

Why Redis: several daphne processes serve the dashboard, and a limit per process would multiply the
allowance by their number. Why a local fallback: when Redis is down we neither want to refuse every
operator action (fail closed would block the very action that fixes an outage; the Celery broker
being down already makes queued actions fail with a clear error) nor let a runaway script through
unlimited (fail open). So the limit falls back to a per-process window with the same figures: the
effective limit is at most ``processes x count`` until Redis is back. Counters live under
``kcp:ratelimit:`` with a TTL of one window.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import redis

from dashboard.lib.redis_keys import PREFIX

logger = logging.getLogger(__name__)

KEY_PREFIX: Final = f"{PREFIX}:ratelimit:"


@dataclass(frozen=True, slots=True)
class Limit:
    count: int
    window_s: int

    def describe(self) -> str:
        return f"{self.count} action requests per {self.window_s} s"


def parse_limit(text: str) -> Limit | None:
    """``"30/60"`` -> 30 requests per 60 s; ``"0"`` or ``""`` -> no limit. Raises on anything else."""
    raw = text.strip()
    if raw in ("", "0"):
        return None
    count, sep, window = raw.partition("/")
    try:
        limit = Limit(int(count), int(window) if sep else 60)
    except ValueError:
        raise ValueError(f"ACTION_RATE_LIMIT={text!r} must be COUNT/SECONDS, e.g. 30/60, or 0 for none") from None
    if limit.count < 1 or limit.window_s < 1:
        raise ValueError(f"ACTION_RATE_LIMIT={text!r}: count and seconds must be positive")
    return limit


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    retry_after_s: int
    count: int
    backend: str  # "redis" or "local"


class RateLimiter:
    """Counts hits per key in fixed windows; ``hit`` says whether one more is allowed."""

    def __init__(self, limit: Limit, client: Callable[[], redis.Redis], clock: Callable[[], float] = time.time) -> None:
        self.limit = limit
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._local: dict[tuple[str, int], int] = {}
        self._warned_at = 0.0

    def hit(self, key: str) -> Decision:
        now = self._clock()
        window = int(now // self.limit.window_s)
        retry = max(1, math.ceil((window + 1) * self.limit.window_s - now))
        try:
            count, backend = self._redis_hit(key, window), "redis"
        except redis.RedisError as exc:
            self._warn(exc)
            count, backend = self._local_hit(key, window), "local"
        return Decision(count <= self.limit.count, retry, count, backend)

    def _redis_hit(self, key: str, window: int) -> int:
        name = f"{KEY_PREFIX}{key}:{window}"
        pipe = self._client().pipeline(transaction=True)
        pipe.incr(name)
        pipe.expire(name, self.limit.window_s + 1)
        count, _ = pipe.execute()
        return int(count)

    def _local_hit(self, key: str, window: int) -> int:
        with self._lock:
            for stale in [k for k in self._local if k[1] < window]:
                del self._local[stale]
            count = self._local.get((key, window), 0) + 1
            self._local[(key, window)] = count
            return count

    def _warn(self, exc: Exception) -> None:
        now = self._clock()
        if now - self._warned_at > 60:
            self._warned_at = now
            logger.warning("rate limit counters unavailable in Redis (%s): counting per process until it is back", exc)
