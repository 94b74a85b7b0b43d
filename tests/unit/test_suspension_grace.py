"""When a suspended controller candidate gives its ZooKeeper session up (F7's one-way partition)."""

from __future__ import annotations

import pytest

from controller_core.controller import suspension_grace_s

pytestmark = pytest.mark.unit

#: kazoo reports SUSPENDED after this share of the session timeout without an answer.
SUSPENDS_AT = 2 / 3


@pytest.mark.parametrize("servers", range(1, 10))
@pytest.mark.parametrize("session_timeout_s", [4.0, 6.0, 18.0])
def test_the_session_is_given_up_inside_the_first_reconnection_attempt(session_timeout_s: float, servers: int) -> None:
    grace = suspension_grace_s(session_timeout_s, servers)
    attempt_s = session_timeout_s / servers  # kazoo's connect timeout per server
    # Well before the first attempt ends and the next one's connect request renews the session on the
    # server (the old grace, a third of the timeout, fell exactly on that boundary with three servers).
    assert 0 < grace <= attempt_s / 2
    # And no later than a whole session timeout after the last answer.
    assert SUSPENDS_AT * session_timeout_s + grace <= session_timeout_s


def test_three_servers_and_the_soak_timeout() -> None:
    assert suspension_grace_s(4.0, 3) == pytest.approx(2 / 3)
