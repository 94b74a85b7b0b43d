"""Host one controller candidate for a cluster in a long-running process.

Used by the Celery worker's controller fleet (``workers.controller_fleet``, role ``controller``: one
candidate per managed cluster it hosts) and by ``manage.py run_controller``. It adds what only the
hosts know about to the plain ``controller_core`` runner: the cluster's ZooKeeper connect string
from the dashboard's settings or cluster registry, the Redis state-change stream, the status hash
the dashboard's metrics read, and the day's state-change log directory for the cluster.

Settings (environment): ``CONTROLLER_ID``, ``CONTROLLER_CLUSTER`` (``run_controller``'s default
cluster, ``demo``; workers follow the registry instead),
``CONTROLLER_REBALANCE_INTERVAL_S`` (``leader.imbalance.check.interval.seconds``, default 300),
``CONTROLLER_IMBALANCE_PERCENTAGE`` (default 10), ``CONTROLLER_UNCLEAN_ELECTION`` (default off),
``STATE_CHANGE_STREAM_MAXLEN`` (default 1,000,000), ``CONTROLLER_WARM_STANDBY`` (default on: a
standby candidate follows ZooKeeper and fails over from what it holds, ``controller_core.standby``;
its state, lag and last failover path are in the status hash the overview reads).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace

from django.conf import settings

from controller_core.config import ControllerConfig
from controller_core.controller import Controller
from controller_core.runner import ControllerRunner
from dashboard.lib.env import env_bool, env_int
from workers.controller_redis import ControllerRedisPlugs

logger = logging.getLogger(__name__)


def cluster_connect_string(cluster: str) -> str:
    """The cluster's ZooKeeper connect string: its registry entry if there is one, else the default."""
    try:
        from dashboard.clusters.models import Cluster

        found = Cluster.objects.filter(name=cluster).values_list("zookeeper_connect", flat=True).first()
    except Exception as exc:  # registry not migrated yet: fall back to settings, say so
        logger.debug("cluster registry unavailable (%s); using ZOOKEEPER_CONNECT", exc)
        found = None
    return str(found or settings.ZOOKEEPER_CONNECT)


def config_from_environment(
    controller_id: int | None = None, cluster: str | None = None, zookeeper_connect: str | None = None
) -> tuple[str, ControllerConfig]:
    """The candidate's configuration from the environment; ``zookeeper_connect`` (the registry row the
    controller fleet read) saves a registry look-up."""
    cluster_name = cluster or os.environ.get("CONTROLLER_CLUSTER", "demo")
    cid = controller_id if controller_id is not None else env_int("CONTROLLER_ID", -1)
    if cid < 0:
        raise ValueError("a controller needs an id: set CONTROLLER_ID or pass --id")
    config = ControllerConfig(
        controller_id=cid,
        zookeeper_connect=zookeeper_connect or cluster_connect_string(cluster_name),
        zookeeper_session_timeout_s=float(settings.ZOOKEEPER_SESSION_TIMEOUT_S),
        api_host=os.environ.get("CONTROLLER_API_HOST", "127.0.0.1"),
        api_port=env_int("CONTROLLER_API_PORT", 0),
        leader_imbalance_check_interval_seconds=float(env_int("CONTROLLER_REBALANCE_INTERVAL_S", 300)),
        leader_imbalance_per_broker_percentage=env_int("CONTROLLER_IMBALANCE_PERCENTAGE", 10),
        unclean_leader_election_enable=env_bool("CONTROLLER_UNCLEAN_ELECTION", False),
        auto_leader_rebalance_enable=env_bool("CONTROLLER_AUTO_REBALANCE", True),
        leader_imbalance_min_isr_seconds=float(env_int("CONTROLLER_REBALANCE_MIN_ISR_S", 0)),
        request_timeout_s=float(env_int("CONTROLLER_REQUEST_TIMEOUT_S", 30)),
        warm_standby=env_bool("CONTROLLER_WARM_STANDBY", True),
    )
    return cluster_name, config


@dataclass
class ControllerHost:
    """A controller candidate with the Redis stream and status publisher around it (``ControllerRedisPlugs``)."""

    cluster: str
    config: ControllerConfig

    def __post_init__(self) -> None:
        self._runner: ControllerRunner | None = None
        self._redis: ControllerRedisPlugs | None = None

    @classmethod
    def from_environment(cls, controller_id: int | None = None, cluster: str | None = None) -> ControllerHost:
        name, config = config_from_environment(controller_id, cluster)
        return cls(name, config)

    def with_config(self, **changes: object) -> ControllerHost:
        return ControllerHost(self.cluster, replace(self.config, **changes))  # type: ignore[arg-type]

    @property
    def controller(self) -> Controller | None:
        return None if self._runner is None else self._runner.controller

    def start(self, connect_timeout: float = 30.0) -> Controller:
        self._redis = ControllerRedisPlugs.connect(
            settings.REDIS_URL, self.cluster, maxlen=env_int("STATE_CHANGE_STREAM_MAXLEN", 1_000_000)
        )
        log_dir = settings.STATE_CHANGE_LOG_DIR / self.cluster
        self._runner = ControllerRunner(self.config, log_dir=log_dir, extra_sinks=self._redis.sinks)
        controller = self._runner.start(connect_timeout)
        self._redis.publish_status(self.config.controller_id, controller.status)
        logger.info(
            "controller candidate %d for cluster %r (%s); state-change log in %s",
            self.config.controller_id,
            self.cluster,
            self.config.zookeeper_connect,
            log_dir,
        )
        return controller

    def stop(self) -> None:
        if self._redis is not None:
            self._redis.stop_status()
        if self._runner is not None:
            self._runner.stop()
            self._runner = None
        if self._redis is not None:
            self._redis.close()  # after the runner: the resignation's records reach the stream
            self._redis = None
