"""Assemble and run one controller candidate: kazoo client, store, broker channel, API, controller.

Used by ``manage.py run_controller`` and by the Celery worker bootstep (``workers.controller_host``),
which add their own sinks (the Redis stream). Everything is created in ``start()``, never at import
or construction time, so a Celery prefork parent never holds a kazoo client that a child inherits.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from controller_core.channel_manager import ControllerChannelManager
from controller_core.config import ControllerConfig
from controller_core.controller import Controller
from controller_core.controller_api import ControllerApiServer
from controller_core.ports import StateChangeSink
from controller_core.standby import StandbyFollower
from controller_core.state_change_log import FanoutSink, JsonLinesDailySink
from controller_core.zk.client import ZkSecurity, new_client, world_writable_warning
from controller_core.zk.store import ZkStore

logger = logging.getLogger(__name__)

UNBATCHED_IN_FLIGHT = 1000
"""Writes in flight when batching is off: Kafka 1.1's pipelined one-znode-per-request writes."""


def split_chroot(connect: str) -> tuple[str, str]:
    """``"h1:2181,h2:2181/kafka"`` -> ``("h1:2181,h2:2181", "/kafka")`` (chroot ``""`` when none)."""
    hosts, slash, chroot = connect.partition("/")
    if not hosts:
        raise ValueError(f"ZooKeeper connect string {connect!r} names no host (expected host:port[/chroot])")
    chroot = (slash + chroot).rstrip("/")
    return hosts, chroot


def ensure_chroot(connect: str, timeout: float = 15.0, security: ZkSecurity | None = None) -> None:
    """Create the connect string's chroot if missing, as Kafka brokers do on first start."""
    hosts, chroot = split_chroot(connect)
    if not chroot:
        return
    sec = security if security is not None else ZkSecurity.from_env()
    client = new_client(hosts, timeout=timeout, security=sec)
    client.start(timeout=timeout)
    try:
        client.ensure_path(chroot)
        warning = world_writable_warning(client, chroot, sec)
        if warning:
            logger.warning("%s", warning)
    finally:
        client.stop()
        client.close()


def new_kazoo_client(connect: str, session_timeout_s: float, security: ZkSecurity | None = None) -> KazooClient:
    """A client that keeps reconnecting forever (a new session after expiry), as Kafka's does.

    Authenticated, and creating znodes with ACLs, per ``ZOOKEEPER_AUTH``/``ZOOKEEPER_ACL`` when
    ``security`` is not given (``controller_core.zk.client``).
    """
    return new_client(
        connect,
        timeout=session_timeout_s,
        security=security,
        connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2.0),
        command_retry=KazooRetry(max_tries=3, delay=0.05, max_delay=0.5),
    )


class ControllerRunner:
    """One controller candidate and everything it needs, with a clean start and stop.

    Example::

        runner = ControllerRunner(ControllerConfig(controller_id=1, zookeeper_connect="127.0.0.1:2181/kafka"),
                                  log_dir=Path("var/state-change-log/demo"))
        runner.start()
        ...
        runner.stop()
    """

    def __init__(
        self,
        config: ControllerConfig,
        *,
        log_dir: Path | None = None,
        extra_sinks: Sequence[StateChangeSink] = (),
    ) -> None:
        self.config = config
        self.log_dir = log_dir
        self.extra_sinks = list(extra_sinks)
        self.client: KazooClient | None = None
        self.controller: Controller | None = None
        self.api: ControllerApiServer | None = None
        self.standby: StandbyFollower | None = None
        self._sink: StateChangeSink | None = None

    def start(self, connect_timeout: float = 30.0) -> Controller:
        cfg = self.config
        ensure_chroot(cfg.zookeeper_connect, timeout=connect_timeout)
        sinks: list[StateChangeSink] = []
        if self.log_dir is not None:
            sinks.append(JsonLinesDailySink(self.log_dir))
        sinks.extend(self.extra_sinks)
        self._sink = FanoutSink(sinks)
        self.client = new_kazoo_client(cfg.zookeeper_connect, cfg.zookeeper_session_timeout_s)
        started = time.monotonic()
        self.client.start(timeout=connect_timeout)
        # Unbatched (benchmark baseline only): one fenced write per znode, pipelined like Kafka 1.1.
        store = (
            ZkStore(self.client)
            if cfg.batched_writes
            else ZkStore(self.client, max_ops_per_multi=1, max_in_flight=UNBATCHED_IN_FLIGHT)
        )
        # The standby follows on the candidate's own session: its election's reply then proves
        # which changes the view must hold (controller_core.standby.follower).
        self.standby = StandbyFollower(self.client) if cfg.warm_standby else None
        controller = Controller(
            cfg,
            self.client,
            store,
            channel_factory=partial(ControllerChannelManager, request_timeout_s=cfg.request_timeout_s),
            sink=self._sink,
            standby=self.standby,
        )
        if self.standby is not None:
            self.standby.start()
        self.api = ControllerApiServer(controller, cfg.api_host, cfg.api_port)
        controller.endpoint = self.api.url
        self.api.start()
        controller.start()
        self.controller = controller
        logger.info(
            "controller candidate %d started (ZooKeeper %s, API %s) in %.0f ms",
            cfg.controller_id,
            cfg.zookeeper_connect,
            self.api.url,
            (time.monotonic() - started) * 1000,
        )
        return controller

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.shutdown()
            self.controller = None
        if self.api is not None:
            self.api.stop()
            self.api = None
        if self.standby is not None:
            self.standby.stop()
            self.standby = None
        if self.client is not None:
            self.client.stop()
            self.client.close()
            self.client = None
        if self._sink is not None:
            self._sink.flush()
