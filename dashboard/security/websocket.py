"""The WebSocket origin check of ``AllowedHostsOriginValidator``, with the refusal audited.

Why: a socket from a foreign ``Origin`` is the cross-site WebSocket hijacking attempt the Channels
docs warn about; Channels closes it silently, and issue #10 wants every refused attempt on record.
Same rule as Channels' own factory (``ALLOWED_HOSTS``; local hosts when ``DEBUG`` and none set).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlparse

from channels.db import database_sync_to_async
from channels.security.websocket import OriginValidator
from django.conf import settings

from dashboard.audit.rejections import record_socket_rejection

CLOSE_FOREIGN_ORIGIN = 403


def _origin(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"origin":
            return bytes(value).decode("latin1")
    return None


class AuditedOriginValidator(OriginValidator):  # type: ignore[misc]
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        origin = _origin(scope)
        try:
            parsed = urlparse(origin) if origin is not None else None
        except ValueError:
            parsed = None
        if not self.valid_origin(parsed):
            reason = f"WebSocket from a foreign Origin {origin!r} (not in ALLOWED_HOSTS)"
            await database_sync_to_async(record_socket_rejection)(
                None, str(scope.get("path", "")), reason, CLOSE_FOREIGN_ORIGIN
            )
        return await super().__call__(scope, receive, send)


def audited_allowed_hosts_origin_validator(application: Any) -> AuditedOriginValidator:
    allowed_hosts = list(settings.ALLOWED_HOSTS)
    if settings.DEBUG and not allowed_hosts:
        allowed_hosts = ["localhost", "127.0.0.1", "[::1]"]
    return AuditedOriginValidator(application, allowed_hosts)
