"""The controller's transport holds what an event sends and hands it to the senders when the event ends."""

from __future__ import annotations

from typing import Any

import pytest

from controller_core.controller import _ChannelTransport
from controller_core.model import BrokerRegistration

pytestmark = pytest.mark.unit


class Channel:
    def __init__(self) -> None:
        self.sent: list[tuple[int, Any]] = []

    def send(self, broker_id: int, request: Any, callback: Any = None) -> None:
        self.sent.append((broker_id, request))

    def add_broker(self, broker: BrokerRegistration) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...

    def shutdown(self) -> None: ...


def test_without_an_event_requests_go_out_at_once() -> None:
    transport, channel = _ChannelTransport(), Channel()
    transport.channel = channel
    transport.send(1, "a")
    assert channel.sent == [(1, "a")]


def test_an_events_requests_go_out_in_order_when_it_ends() -> None:
    transport, channel = _ChannelTransport(), Channel()
    transport.channel = channel
    transport.hold()
    for broker_id, request in [(1, "LeaderAndIsr"), (2, "LeaderAndIsr"), (1, "UpdateMetadata")]:
        transport.send(broker_id, request)
    assert channel.sent == []
    transport.send_held()  # a failover hands its requests over before its clock stops, and goes on holding
    assert channel.sent == [(1, "LeaderAndIsr"), (2, "LeaderAndIsr"), (1, "UpdateMetadata")]
    transport.send(3, "StopReplica")
    assert len(channel.sent) == 3
    transport.release()
    transport.send(4, "after")
    assert channel.sent[3:] == [(3, "StopReplica"), (4, "after")]


def test_requests_of_a_channel_closed_while_held_are_dropped() -> None:
    transport, old, new = _ChannelTransport(), Channel(), Channel()
    transport.channel = old
    transport.hold()
    transport.send(1, "stale")
    transport.channel = None  # resigned during the event ...
    transport.send(1, "dropped at once")
    transport.channel = new  # ... and elected again
    transport.send(2, "fresh")
    transport.release()
    assert old.sent == [] and new.sent == [(2, "fresh")]
