"""Logins and failed logins go to the audit history too (never the password)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest


def _client(request: HttpRequest | None) -> dict[str, Any]:
    if request is None:
        return {}
    return {"ip": request.META.get("REMOTE_ADDR", ""), "user_agent": request.META.get("HTTP_USER_AGENT", "")[:200]}


def logged_in(sender: Any, request: HttpRequest | None = None, user: Any = None, **kwargs: Any) -> None:
    from dashboard.actions.models import Action

    Action.objects.create(
        user=user,
        username=user.get_username() if user is not None else "",
        kind=Action.Kind.LOGIN,
        status=Action.Status.SUCCEEDED,
        parameters=_client(request),
    )


def login_failed(
    sender: Any, credentials: dict[str, Any] | None = None, request: HttpRequest | None = None, **kwargs: Any
) -> None:
    from dashboard.actions.models import Action

    username = str((credentials or {}).get("username", ""))[:150]
    Action.objects.create(
        username=username,
        kind=Action.Kind.LOGIN_FAILED,
        status=Action.Status.REJECTED,
        parameters=_client(request),
        error="wrong username or password",
    )
