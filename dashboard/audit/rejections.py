"""Audit rows for requests refused before they reached an action (size, rate, CSRF, socket checks).

Why one helper: every refusal the hardening layer makes must leave the same evidence an operator
can filter on (``kind=request_rejected``, ``status=rejected``), with the path, the user (or the
client address when anonymous), the HTTP status and the reason, and never the request body.
"""

from __future__ import annotations

import logging
import re
from typing import Any, Final

from django.db import DatabaseError
from django.http import HttpRequest

from dashboard.audit.models import Action

logger = logging.getLogger(__name__)

_CLUSTER_IN_PATH: Final = re.compile(r"/clusters/([-a-zA-Z0-9_]{1,50})/")
MAX_PATH: Final = 500


def cluster_of(path: str) -> str:
    """The cluster a dashboard path is about (``/actions/clusters/<name>/...``), or ``""``."""
    match = _CLUSTER_IN_PATH.search(path)
    return match.group(1) if match else ""


def _user(request: HttpRequest) -> Any:
    user = getattr(request, "user", None)
    return user if user is not None and getattr(user, "is_authenticated", False) else None


def record_rejection(
    request: HttpRequest, *, status: int, reason: str, extra: dict[str, Any] | None = None
) -> Action | None:
    """Store one ``REQUEST_REJECTED`` row; a database failure is logged, never turned into a 500."""
    user = _user(request)
    path = request.path[:MAX_PATH]
    parameters: dict[str, Any] = {
        "path": path,
        "method": request.method or "",
        "http_status": status,
        "ip": request.META.get("REMOTE_ADDR", ""),
        **(extra or {}),
    }
    return _store(user, path, parameters, reason)


def record_socket_rejection(user: Any, path: str, reason: str, code: int) -> Action | None:
    """The WebSocket counterpart: a socket refused at connect or closed after a failed re-check."""
    active = user if user is not None and getattr(user, "is_authenticated", False) else None
    parameters = {"path": path[:MAX_PATH], "method": "WEBSOCKET", "close_code": code}
    return _store(active, path[:MAX_PATH], parameters, reason)


def _store(user: Any, path: str, parameters: dict[str, Any], reason: str) -> Action | None:
    """One ``REQUEST_REJECTED`` row; a database failure is logged, never turned into a 500."""
    try:
        return Action.objects.create(
            user=user,
            username=user.get_username() if user is not None else "",
            cluster=cluster_of(path),
            kind=Action.Kind.REQUEST_REJECTED,
            parameters=parameters,
            status=Action.Status.REJECTED,
            error=reason,
        )
    except DatabaseError as exc:
        logger.error("could not audit the rejection of %s %s (%s): %s", parameters.get("method"), path, reason, exc)
        return None
