"""The Redis side of a controller candidate: the state-change stream sink and the status publisher.

Why a module of its own: the Celery controller host (``workers.controller_host``) and the
reliability harness's candidate process (``scripts.reliability.controller_proc``, no Django
settings) must plug exactly the same sinks into ``ControllerRunner``, so a fault scenario against
Redis (F20: Redis paused) exercises the product's path and not a copy of it. Nothing here imports
Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import redis

from controller_core.ports import StateChangeSink
from workers.sinks import ControllerStatusPublisher, RedisStreamSink

#: Socket timeouts of the candidate's Redis client: a paused Redis costs the writer threads this
#: long per attempt, never the controller's event thread (the sinks only buffer on it).
REDIS_TIMEOUT_S = 2.0


class ControllerRedisPlugs:
    """The stream sink (started at once) and, once a controller exists, its status publisher.

    Example::

        plugs = ControllerRedisPlugs.connect("redis://127.0.0.1:6379/0", "demo")
        runner = ControllerRunner(config, extra_sinks=plugs.sinks)
        controller = runner.start()
        plugs.publish_status(config.controller_id, controller.status)
        ...
        plugs.stop_status(); runner.stop(); plugs.close()   # the stream drains after the runner stops
    """

    def __init__(self, client: redis.Redis, cluster: str, maxlen: int = 1_000_000) -> None:
        self.client = client
        self.cluster = cluster
        self.stream = RedisStreamSink(client, cluster, maxlen=maxlen)
        self.status: ControllerStatusPublisher | None = None
        self.stream.start()

    @classmethod
    def connect(cls, redis_url: str, cluster: str, maxlen: int = 1_000_000) -> ControllerRedisPlugs:
        client = redis.Redis.from_url(redis_url, socket_timeout=REDIS_TIMEOUT_S, socket_connect_timeout=REDIS_TIMEOUT_S)
        return cls(client, cluster, maxlen)

    @property
    def sinks(self) -> list[StateChangeSink]:
        return [self.stream]

    def publish_status(self, controller_id: int, snapshot: Callable[[], Mapping[str, Any]]) -> None:
        self.status = ControllerStatusPublisher(self.client, self.cluster, controller_id, snapshot)
        self.status.start()

    def stop_status(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None

    def close(self) -> None:
        """Write what the stream still buffers (bounded wait), then drop the connection."""
        self.stop_status()
        self.stream.stop()
        self.client.close()
