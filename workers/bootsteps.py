"""A Celery worker bootstep that hosts long-running components for the worker's whole life.

Why a bootstep and not a task: a controller candidate and a mirror must run as long as the worker
runs, in the worker's own (main) process, and be stopped cleanly when the worker stops; tasks are
short and run in pool children. The step requires the pool, so it starts *after* the prefork pool
has forked its children: no kazoo client or Redis connection is ever inherited across a fork.

Roles come from ``WORKER_ROLES`` (comma separated): ``controller`` (needs ``CONTROLLER_ID``; hosts
candidates for the registered managed clusters, ``workers.controller_fleet``) and ``mirror`` (mirrors
registered clusters, ``workers.mirror.fleet``). Both follow the cluster registry while the worker
runs; ``CONTROLLER_CLUSTERS`` and ``MIRROR_CLUSTERS`` optionally restrict them to the names listed.
A worker without roles only runs tasks.
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
        from workers.controller_fleet import ControllerFleet

        if os.environ.get("CONTROLLER_CLUSTER"):
            logger.info("CONTROLLER_CLUSTER is not read by workers: they follow the registry (see CONTROLLER_CLUSTERS)")
        hosted.append(ControllerFleet())
    if "mirror" in roles:
        from workers.mirror.fleet import MirrorFleet

        hosted.append(MirrorFleet())
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
