"""The action rate limiter's windows and its per-process fallback when Redis is unreachable."""

from __future__ import annotations

import pytest
import redis

from dashboard.lib.redis_pools import pool
from dashboard.security.middleware import REDIS_TIMEOUT_S
from dashboard.security.ratelimit import Limit, RateLimiter, parse_limit


def _down() -> redis.Redis:
    # The middleware's own client configuration, pointed at a port nobody listens on.
    return redis.Redis(connection_pool=pool("redis://127.0.0.1:1/0", REDIS_TIMEOUT_S, REDIS_TIMEOUT_S))


@pytest.mark.parametrize(("text", "limit"), [("30/60", Limit(30, 60)), ("5", Limit(5, 60)), ("0", None), ("", None)])
def test_parse_limit(text: str, limit: Limit | None) -> None:
    assert parse_limit(text) == limit


@pytest.mark.parametrize("text", ["ten/60", "3/0", "-1/60", "3/x"])
def test_bad_limits_fail_loudly(text: str) -> None:
    with pytest.raises(ValueError, match="ACTION_RATE_LIMIT"):
        parse_limit(text)


def test_without_redis_it_counts_per_process_in_fixed_windows() -> None:
    now = [1000.0]
    limiter = RateLimiter(Limit(2, 60), _down, clock=lambda: now[0])
    first, second, third = (limiter.hit("user:1") for _ in range(3))
    assert (first.allowed, second.allowed, third.allowed) == (True, True, False)
    assert third.backend == "local" and third.retry_after_s == 20  # the window 960..1020 ends in 20 s
    assert limiter.hit("user:2").allowed  # per user
    now[0] = 1020.0  # next window
    assert limiter.hit("user:1").allowed
