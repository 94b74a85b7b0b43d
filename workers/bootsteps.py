"""A Celery worker bootstep that hosts long-running components for the worker's whole life.

Why a bootstep and not a task: a controller candidate and a mirror must run as long as the worker
runs, in the worker's own (main) process, and be stopped cleanly when the worker stops; tasks are
short and run in pool children. The step requires the pool, so it starts *after* the prefork pool
has forked its children: no kazoo client or Redis connection is ever inherited across a fork.

Roles come from ``WORKER_ROLES`` (comma separated): ``controller`` (needs ``CONTROLLER_ID``; see
``workers.controller_host``) and ``mirror`` (``MIRROR_CLUSTERS``, default ``CONTROLLER_CLUSTER`` or
``demo``). A worker without roles only runs tasks.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Protocol

from celery import bootsteps

logger = logging.getLogger(__name__)


class Hosted(Protocol):
    def start(self) -> Any: ...

    def stop(self) -> None: ...


def roles_from_environment() -> set[str]:
    roles = {r.strip() for r in os.environ.get("WORKER_ROLES", "").split(",") if r.strip()}
    unknown = roles - {"controller", "mirror"}
    if unknown:
        raise ValueError(f"unknown WORKER_ROLES {sorted(unknown)}: use controller and/or mirror")
    return roles


def hosted_components() -> list[Hosted]:
    roles = roles_from_environment()
    hosted: list[Hosted] = []
    if "controller" in roles:
        from workers.controller_host import ControllerHost

        hosted.append(ControllerHost.from_environment())
    if "mirror" in roles:
        from workers.mirror.host import MirrorHost

        default = os.environ.get("CONTROLLER_CLUSTER", "demo")
        for cluster in os.environ.get("MIRROR_CLUSTERS", default).split(","):
            if cluster.strip():
                hosted.append(MirrorHost(cluster.strip()))
    return hosted


class HostedComponentsStep(bootsteps.StartStopStep):
    """Start the worker's role components after the pool exists; stop them first at shutdown."""

    requires = ("celery.worker.components:Pool",)

    def __init__(self, worker: Any, **kwargs: Any) -> None:
        super().__init__(worker, **kwargs)
        self.hosted: list[Hosted] = []

    def start(self, worker: Any) -> None:
        self.hosted = hosted_components()
        for component in self.hosted:
            logger.info("starting %s", type(component).__name__)
            component.start()

    def stop(self, worker: Any) -> None:
        for component in reversed(self.hosted):
            try:
                component.stop()
            except Exception:
                logger.exception("stopping %s failed", type(component).__name__)
        self.hosted = []
