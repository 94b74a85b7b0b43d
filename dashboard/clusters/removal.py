"""A removed cluster leaves a tombstone in Redis, so the hosting fleets can tell removal from a blank registry.

Why: a fleet stops a removed cluster's mirror and candidates and deletes its snapshot. When the
registry reads empty, that is either every cluster removed or a database that is not the one it
was (restored, re-created, a worker pointed at a fresh file): ``workers.hosting.RegistryReads``
waits ``HOSTING_EMPTY_REGISTRY_CONFIRM_S`` before believing it, unless every cluster the fleet
holds has a tombstone, the proof that it was deleted through Django (the UI, the API, the admin
site or ``manage.py``: each sends ``post_delete``). Writing it is best effort: with Redis away
the fleets fall back to the wait.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Final

import redis

from dashboard.lib.redis_keys import PREFIX

logger = logging.getLogger(__name__)

TOMBSTONE_TTL_S: Final = 3600


def tombstone_key(cluster: str) -> str:
    return f"{PREFIX}:{cluster}:removed"


def note_removed(sender: Any, instance: Any, **kwargs: Any) -> None:
    """``post_delete`` receiver for ``Cluster``: the tombstone, for an hour."""
    from dashboard.clusters.snapshot import get_redis

    with contextlib.suppress(redis.RedisError):
        get_redis().set(tombstone_key(str(instance.name)), 1, ex=TOMBSTONE_TTL_S)


def note_registered(sender: Any, instance: Any, **kwargs: Any) -> None:
    """``post_save`` receiver: a cluster registered again under a removed name is no longer removed."""
    from dashboard.clusters.snapshot import get_redis

    with contextlib.suppress(redis.RedisError):
        get_redis().delete(tombstone_key(str(instance.name)))


def removed(client: redis.Redis, clusters: list[str]) -> set[str]:
    """Which of ``clusters`` have a tombstone."""
    if not clusters:
        return set()
    values = client.mget([tombstone_key(c) for c in clusters])
    return {c for c, v in zip(clusters, values, strict=True) if v is not None}
