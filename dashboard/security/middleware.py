"""Size and rate limits on action requests, answered before any view (or CSRF check) reads the body.

Action requests are the unsafe methods (POST, PUT, PATCH, DELETE) under ``/actions/`` and
``/api/v1/``. In order:

1. no ``Content-Length`` -> 411 (every browser ``fetch`` and form sends one; a chunked body of
   unknown size is not accepted for actions);
2. ``Content-Length`` over ``ACTION_MAX_BODY_BYTES`` -> 413 (Django's own
   ``DATA_UPLOAD_MAX_MEMORY_SIZE`` still bounds every other form);
3. more than ``ACTION_RATE_LIMIT`` requests in the window by the same user, or for anonymous
   requests by the same client address -> 429 with ``Retry-After`` (before the login check, so a
   flood of anonymous POSTs is limited too and cannot fill the audit log unchecked);
4. no logged-in user -> 401 under ``/api/v1/`` (an API client cannot follow the login redirect);
   pages keep ``LoginRequiredMiddleware``'s redirect to the login form, and the attempt is audited.

Every refusal is audited (``REQUEST_REJECTED``) and answered as JSON under ``/api/`` and as plain
text elsewhere. Being a ``__call__`` check, it runs before every middleware's ``process_view``
(CSRF, login), so an oversized body is never parsed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import Final

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from dashboard.audit.rejections import record_rejection
from dashboard.security.ratelimit import RateLimiter, parse_limit

ACTION_PREFIXES: Final = ("/actions/", "/api/v1/")
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})


def is_action_request(request: HttpRequest) -> bool:
    return request.method not in SAFE_METHODS and request.path.startswith(ACTION_PREFIXES)


def rejection(request: HttpRequest, status: int, message: str) -> HttpResponse:
    """The response for a refused request: JSON for API clients, plain text for pages."""
    if request.path.startswith("/api/"):
        return JsonResponse({"error": message, "status": status}, status=status)
    return HttpResponse(message + "\n", status=status, content_type="text/plain; charset=utf-8")


@lru_cache(maxsize=4)
def _pool(url: str) -> redis.ConnectionPool:
    # Short timeouts: a hung Redis must not hold every action request for seconds.
    return redis.ConnectionPool.from_url(url, socket_timeout=0.5, socket_connect_timeout=0.5)


def _redis() -> redis.Redis:
    return redis.Redis(connection_pool=_pool(settings.REDIS_URL))


def rate_key(request: HttpRequest) -> str:
    user = getattr(request, "user", None)
    if user is not None and getattr(user, "is_authenticated", False):
        # With the join time: a recreated user that reuses a primary key starts with a fresh count.
        joined = getattr(user, "date_joined", None)
        return f"user:{user.pk}:{int(joined.timestamp()) if joined is not None else 0}"
    return f"ip:{request.META.get('REMOTE_ADDR', '')}"


class ActionRequestLimitsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response
        self.max_body = int(settings.ACTION_MAX_BODY_BYTES)
        limit = parse_limit(str(settings.ACTION_RATE_LIMIT))
        self.limiter = RateLimiter(limit, _redis) if limit is not None else None

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if is_action_request(request):
            refused = self._check(request)
            if refused is not None:
                return refused
        return self.get_response(request)

    def _check(self, request: HttpRequest) -> HttpResponse | None:
        raw = request.META.get("CONTENT_LENGTH") or ("0" if request.method == "DELETE" else "")
        try:
            length = int(raw)
        except ValueError:
            return self._refuse(request, 411, "action requests must send a Content-Length header", {})
        if length < 0:
            return self._refuse(request, 400, f"invalid Content-Length {raw!r}", {})
        if length > self.max_body:
            message = f"request body of {length} bytes is over the {self.max_body}-byte limit for action requests"
            return self._refuse(request, 413, message, {"content_length": length, "limit": self.max_body})
        refused = self._rate_limit(request)
        if refused is not None:
            return refused
        user = getattr(request, "user", None)
        if user is None or not getattr(user, "is_authenticated", False):
            message = "log in first: action requests need an authenticated session"
            if request.path.startswith("/api/"):
                return self._refuse(request, 401, message, {})
            record_rejection(request, status=302, reason=message + " (redirected to the login page)")
            return None  # LoginRequiredMiddleware redirects to the login form
        return None

    def _rate_limit(self, request: HttpRequest) -> HttpResponse | None:
        """Counted before the login check, so anonymous requests are limited too (by client address)."""
        if self.limiter is None:
            return None
        decision = self.limiter.hit(rate_key(request))
        if decision.allowed:
            return None
        message = (
            f"too many action requests: the limit is {self.limiter.limit.describe()}; "
            f"try again in {decision.retry_after_s} s"
        )
        response = self._refuse(
            request, 429, message, {"limit": self.limiter.limit.describe(), "counter": decision.backend}
        )
        response["Retry-After"] = str(decision.retry_after_s)
        return response

    def _refuse(self, request: HttpRequest, status: int, message: str, extra: dict[str, object]) -> HttpResponse:
        record_rejection(request, status=status, reason=message, extra=extra)
        return rejection(request, status, message)
