"""A reassignment's progress document, and pushing it to the open progress pages (issue #29, item 2).

The document is what the progress page shows (status, error, progress without the rate samples, the
throttle); the same one is answered by ``GET /api/v1/clusters/<c>/reassignments/<id>/`` and pushed
over ``ws/clusters/<c>/reassignments/<id>/progress/`` (``reassign_consumer``).

Who pushes: whoever has just measured or changed it, i.e. the reassignment's worker side (the
monitor task every ``MONITOR_INTERVAL_S``, the execute and cancel tasks) and a throttle change.
Each message carries the whole document, so a message lost by the channel layer (it drops over
capacity) is repaired by the next one and the page needs no sequence numbers. A document larger
than ``MAX_PUSH_BYTES`` (a reassignment of thousands of partitions) is not pushed: the message then
says only ``changed`` and the page fetches the document over HTTP once.

Group names: ``kcp.<cluster>.reassign.<id>`` (cluster names are slugs of at most 50 characters,
so the name stays under Channels' 100-character limit), distinct from the live pages' groups
(``dashboard.live.groups``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, Final

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from dashboard.audit.models import Action

logger = logging.getLogger(__name__)

#: The group event (routed to ``ReassignProgressConsumer.reassign_progress``).
EVENT: Final = "reassign.progress"
MAX_PUSH_BYTES: Final = 256 * 1024


def group(cluster: str, action_id: int) -> str:
    """The Channels group of one reassignment's progress pages."""
    return f"kcp.{cluster}.reassign.{int(action_id)}"


def document(action: Action, progress: Mapping[str, Any] | None, cancel_note: str, stale: str = "") -> dict[str, Any]:
    """The progress page's document: ``progress`` as just measured, or the last one stored."""
    stored = progress if progress is not None else (action.outcome or {}).get("progress") or {}
    body: dict[str, Any] = {
        "id": action.pk,
        "cluster": action.cluster,
        "status": action.status,
        "error": action.error,
        "attempts": action.attempts,
        "controller_epoch": action.controller_epoch,
        "cancel": cancel_note or None,
    }
    if stale:
        body["stale"] = stale
    body["progress"] = {k: v for k, v in stored.items() if k != "samples"}
    body["throttle"] = (action.parameters or {}).get("throttle") or None
    return body


def message(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The group event carrying ``doc``, or only a ``changed`` notice when it is too big to push."""
    size = len(json.dumps(doc, default=str))
    if size > MAX_PUSH_BYTES:
        return {"type": EVENT, "changed": True, "id": doc.get("id"), "bytes": size}
    return {"type": EVENT, "document": dict(doc)}


def publish(doc: Mapping[str, Any]) -> bool:
    """Send ``doc`` to its reassignment's progress pages; False (logged) when the layer is unreachable.

    Best effort, like every channel-layer send: the pages fall back to polling when they hear nothing.
    """
    layer = get_channel_layer()
    if layer is None:
        return False
    try:
        async_to_sync(layer.group_send)(group(str(doc["cluster"]), int(doc["id"])), message(doc))
    except Exception as exc:  # Redis down: the page's fallback poll still shows progress
        logger.warning("could not push the progress of reassignment #%s: %s", doc.get("id"), exc)
        return False
    return True
