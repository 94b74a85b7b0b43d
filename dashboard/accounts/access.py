"""Who may open a page or call the API: the role checks of ``roles`` turned into HTTP answers.

Pages answer 403 with a sentence naming the role (``forbidden``, ``admin_only``); the JSON API
answers 401 / 405 / 403 as JSON (``api``) and reads a JSON or form body (``request_data``). Every
app's views use these, so a role means the same thing on a page and in ``/api/v1/``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any, Final

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse
from django.http.response import HttpResponseBase

from dashboard.accounts import roles

View = Callable[..., HttpResponseBase]
CHECKS: Final = {roles.VIEWER: roles.can_view, roles.OPERATOR: roles.can_operate, roles.ADMIN: roles.can_administer}


def forbidden(request: HttpRequest, what: str) -> HttpResponse:
    return HttpResponseForbidden(f"Your role ({roles.role_of(request.user) or 'none'}) may not {what}.")


def admin_only(request: HttpRequest) -> HttpResponse | None:
    """The 403 answer for a non-admin on a management page, or None for an admin."""
    if not roles.can_administer(request.user):
        return forbidden(request, "manage clusters and users")
    return None


def error(status: int, message: str, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, "status": status, **extra}, status=status)


def api(role: str, methods: tuple[str, ...] = ("GET",)) -> Callable[[View], View]:
    """Authenticate (401), check the HTTP method (405) and the role (403), all answered as JSON."""

    def wrap(view: View) -> View:
        @login_not_required
        @wraps(view)
        def inner(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
            if not getattr(request.user, "is_authenticated", False):
                return error(401, "log in first: the API uses the dashboard's session (see docs/api.md)")
            if request.method not in methods:
                response = error(405, f"method {request.method} not allowed; use {', '.join(methods)}")
                response["Allow"] = ", ".join(methods)
                return response
            if not CHECKS[role](request.user):
                return error(403, f"your role ({roles.role_of(request.user) or 'none'}) may not do this: {role}s only")
            return view(request, *args, **kwargs)

        return inner

    return wrap


def request_data(request: HttpRequest) -> dict[str, Any]:
    """A JSON object body, or form fields; ``ValueError`` for anything else."""
    if request.content_type == "application/json":
        try:
            data = json.loads(request.body or b"{}")
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"the body is not valid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError("the body must be a JSON object")
        return data
    return {k: request.POST.get(k) for k in request.POST}
