"""Size and rate limits on action requests, answered before any view (or CSRF check) reads the body.

Action requests are the unsafe methods (POST, PUT, PATCH, DELETE) under ``/actions/`` and
``/api/v1/``. In order:

1. more than ``ACTION_RATE_LIMIT`` requests in the window by the same user, or for anonymous
   requests by the same client address -> 429 with ``Retry-After`` (first, so every action request
   counts, malformed and anonymous ones too);
2. no ``Content-Length`` -> 411 (every browser ``fetch`` and form sends one; a chunked body of
   unknown size is not accepted for actions);
3. ``Content-Length`` over ``ACTION_MAX_BODY_BYTES`` -> 413 (Django's own
   ``DATA_UPLOAD_MAX_MEMORY_SIZE`` still bounds every other form);
4. no logged-in user -> 401 under ``/api/v1/`` (an API client cannot follow the login redirect);
   pages keep ``LoginRequiredMiddleware``'s redirect to the login form, and the attempt is audited.

Refusals are audited (``REQUEST_REJECTED``) and answered as JSON under ``/api/`` and as plain text
elsewhere. The audit is bounded: a 429 is audited once per limited key (user, or address) per
window, on the first refusal (its row says so); the 411s, 413s and anonymous redirects audited
before it are at most ``ACTION_RATE_LIMIT``'s count per window. So a flood from one address adds at
most count + 1 rows per window, however many requests it sends. Being a ``__call__`` check, it runs
before every middleware's ``process_view`` (CSRF, login), so an oversized body is never parsed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import redis
from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse

from dashboard.audit.rejections import record_rejection
from dashboard.lib.redis_pools import shared_redis
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


#: Short timeouts: a hung Redis must not hold every action request for seconds.
REDIS_TIMEOUT_S: Final = 0.5


def _redis() -> redis.Redis:
    return shared_redis(socket_timeout=REDIS_TIMEOUT_S, connect_timeout=REDIS_TIMEOUT_S)


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
        refused = self._rate_limit(request)
        if refused is not None:
            return refused
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
        user = getattr(request, "user", None)
        if user is None or not getattr(user, "is_authenticated", False):
            message = "log in first: action requests need an authenticated session"
            if request.path.startswith("/api/"):
                return self._refuse(request, 401, message, {})
            record_rejection(request, status=302, reason=message + " (redirected to the login page)")
            return None  # LoginRequiredMiddleware redirects to the login form
        return None

    def _rate_limit(self, request: HttpRequest) -> HttpResponse | None:
        """Counted before anything else, so anonymous and malformed requests are limited too (anonymous
        ones by client address); only the window's first refusal per key is audited."""
        if self.limiter is None:
            return None
        decision = self.limiter.hit(rate_key(request))
        if decision.allowed:
            return None
        limit = self.limiter.limit
        message = f"too many action requests: the limit is {limit.describe()}; try again in {decision.retry_after_s} s"
        if decision.count == limit.count + 1:
            extra: dict[str, object] = {
                "limit": limit.describe(),
                "counter": decision.backend,
                "audited": "the first refusal of this window; later ones in it are refused without a row",
            }
            record_rejection(request, status=429, reason=message, extra=extra)
        response = rejection(request, 429, message)
        response["Retry-After"] = str(decision.retry_after_s)
        return response

    def _refuse(self, request: HttpRequest, status: int, message: str, extra: dict[str, object]) -> HttpResponse:
        record_rejection(request, status=status, reason=message, extra=extra)
        return rejection(request, status, message)
