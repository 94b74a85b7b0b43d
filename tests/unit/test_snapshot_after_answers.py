"""A failover's state-snapshot record waits for its requests' answers: the transport says when they are in.

``_ChannelTransport.send_held(on_answered=...)`` calls ``on_answered`` once every request it handed
over has been answered (each request's own callback first), so that the controller builds the ~50 MB
record after the senders have let go of the failover's requests, not beside them.
"""

from __future__ import annotations

from typing import Any

import pytest

from controller_core.controller import _ChannelTransport
from controller_core.model import BrokerRegistration

pytestmark = pytest.mark.unit


class Channel:
    """Keeps each request's callback for the test to answer."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, Any, Any]] = []

    def send(self, broker_id: int, request: Any, callback: Any = None) -> None:
        self.sent.append((broker_id, request, callback))

    def answer(self, index: int, response: Any = "ok") -> None:
        callback = self.sent[index][2]
        assert callback is not None
        callback(response)

    def add_broker(self, broker: BrokerRegistration) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...

    def shutdown(self) -> None: ...


def test_on_answered_comes_after_every_answer_and_after_each_requests_own_callback() -> None:
    transport, channel = _ChannelTransport(), Channel()
    transport.channel = channel
    events: list[Any] = []
    transport.hold()
    transport.send(1, "LeaderAndIsr", lambda response: events.append(("own", response)))
    transport.send(2, "LeaderAndIsr")  # no callback of its own: still waited for
    transport.send(1, "UpdateMetadata")
    transport.send_held(on_answered=lambda: events.append("answered"))
    assert [request for _, request, _ in channel.sent] == ["LeaderAndIsr", "LeaderAndIsr", "UpdateMetadata"]
    channel.answer(2)
    channel.answer(0, "r1")
    assert events == [("own", "r1")]
    channel.answer(1)
    assert events == [("own", "r1"), "answered"]


def test_on_answered_comes_even_when_a_requests_own_callback_raises() -> None:
    transport, channel = _ChannelTransport(), Channel()
    transport.channel = channel
    answered: list[bool] = []
    transport.hold()

    def failing(response: Any) -> None:
        raise ZeroDivisionError

    transport.send(1, "LeaderAndIsr", failing)
    transport.send_held(on_answered=lambda: answered.append(True))
    with pytest.raises(ZeroDivisionError):
        channel.answer(0)
    assert answered == [True]


def test_on_answered_comes_at_once_when_nothing_was_handed_over() -> None:
    transport, old, new = _ChannelTransport(), Channel(), Channel()
    answered: list[str] = []
    transport.channel = new
    transport.hold()
    transport.send_held(on_answered=lambda: answered.append("none held"))
    transport.channel = old
    transport.send(1, "stale")
    transport.channel = new  # the channel it was held for is gone: dropped, not waited for
    transport.send_held(on_answered=lambda: answered.append("all dropped"))
    assert answered == ["none held", "all dropped"] and old.sent == [] and new.sent == []


def test_without_on_answered_the_callbacks_are_passed_as_they_are() -> None:
    transport, channel = _ChannelTransport(), Channel()
    transport.channel = channel

    def own(response: Any) -> None: ...

    transport.hold()
    transport.send(1, "LeaderAndIsr", own)
    transport.send(1, "UpdateMetadata")
    transport.send_held()
    assert [callback for _, _, callback in channel.sent] == [own, None]
