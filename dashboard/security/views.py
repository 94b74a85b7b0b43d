"""The CSRF failure view: a clear 403 and an audit row instead of Django's bare debug page."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from dashboard.audit.rejections import record_rejection
from dashboard.security.middleware import rejection


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    message = (
        f"CSRF check failed ({reason or 'no reason given'}): reload the page and submit again; "
        "API clients must send the csrftoken cookie's value in the X-CSRFToken header"
    )
    record_rejection(request, status=403, reason=message, extra={"csrf": reason})
    return rejection(request, 403, message)
