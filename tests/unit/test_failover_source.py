"""``FailoverSource``: a failover takes the standby's kept context only when the follower is warm, its
catch-up succeeded and it has a context to hand over; otherwise it says why and the failover reads
everything (cold). A fake follower keeps each case to one line; the real one: test_standby_follower."""

from __future__ import annotations

from typing import Any, cast

from controller_core.context import ControllerContext
from controller_core.standby import FailoverSource, StandbyFollower
from controller_core.standby.follower import Handover
from controller_core.standby.view import ClusterView
from controller_core.standby.warm_context import WarmContext


class _Follower:
    def __init__(self, *, warm: bool = True, caught_up: bool = True, context: bool = True) -> None:
        self.is_warm = warm
        self.reason = "following ZooKeeper" if warm else "ZooKeeper connection lost: full reload on reconnect"
        self._caught_up = caught_up
        self._context = context
        self.paused: list[str] = []

    def catch_up(self) -> bool:
        if not self._caught_up:
            self.reason = "catch-up not done in 10.0 s (12 changed paths behind)"
        return self._caught_up

    def freeze(self) -> Handover:
        kept = WarmContext(ControllerContext(-1)) if self._context else None
        return Handover(ClusterView(), kept, 42, "" if kept else "no context kept")

    def pause(self, reason: str = "active controller") -> None:
        self.paused.append(reason)


def _source(**kwargs: Any) -> tuple[FailoverSource, _Follower]:
    follower = _Follower(**kwargs)
    return FailoverSource(cast(StandbyFollower, follower)), follower


def test_a_caught_up_warm_follower_hands_its_context_over() -> None:
    source, follower = _source()
    handover = source.take_over()
    assert handover is not None and handover.context is not None and handover.zxid == 42
    record = source.finish()
    assert record["path"] == "warm" and record["standby"] == "caught up to the election"
    assert follower.paused


def test_every_reason_not_to_hand_over_is_a_cold_failover_that_says_why() -> None:
    cases = {
        "ZooKeeper connection lost": _source(warm=False),
        "catch-up not done": _source(caught_up=False),
        "no context to hand over (no context kept)": _source(context=False),
    }
    for why, (source, follower) in cases.items():
        assert source.take_over() is None, why
        assert follower.paused, why  # before the cold read, not after it
        record = source.finish()
        assert record["path"] == "cold" and why in record["standby"], (why, record)
    assert FailoverSource(None).take_over() is None and FailoverSource(None).finish()["standby"] == "no standby"
