"""The channel layer survives an idle channel: a consumer waiting longer than a blocking pop's timeout.

Why: channels_redis receives with ``BZPOPMIN channel 5`` (5 s on the server) and, unless told
otherwise, redis-py 8 reads every reply with a 5 s socket timeout. Redis answers an expired
blocking pop late (it checks them in its cron, up to 100 ms after), so whenever a consumer hears
nothing for 5 s (the mirror busy with a full resync of 100,000 partitions sends no heartbeat for
that long) the read times out first, ``redis.exceptions.TimeoutError: Timeout reading from ...``
escapes the layer's receive loop and the LiveConsumer dies. settings.CHANNEL_LAYERS gives the
layer a socket timeout well above the pop's.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.conf import settings as django_settings

pytestmark = pytest.mark.integration


def test_the_configured_read_timeout_outlasts_the_blocking_pop() -> None:
    from channels_redis.core import RedisChannelLayer

    layers: dict[str, Any] = django_settings.CHANNEL_LAYERS
    (host,) = layers["default"]["CONFIG"]["hosts"]
    assert isinstance(host, dict) and host["socket_timeout"] >= RedisChannelLayer.brpop_timeout + 5


async def test_a_consumer_waits_through_seven_silent_seconds(redis_url: str, settings: Any) -> None:
    config: dict[str, Any] = copy.deepcopy(django_settings.CHANNEL_LAYERS)
    (host,) = config["default"]["CONFIG"]["hosts"]
    config["default"]["CONFIG"]["hosts"] = [{**host, "address": redis_url} if isinstance(host, dict) else redis_url]
    settings.CHANNEL_LAYERS = config
    layer = get_channel_layer()
    assert layer is not None
    channel = await layer.new_channel()
    try:
        with pytest.raises(asyncio.TimeoutError):  # our own deadline, not Redis' "Timeout reading from"
            await asyncio.wait_for(layer.receive(channel), 7.0)
        await layer.send(channel, {"type": "still.alive"})
        assert await asyncio.wait_for(layer.receive(channel), 5.0) == {"type": "still.alive"}
    finally:
        await layer.flush()
        await layer.close_pools()
