"""Reassignment JSON API under ``/api/v1/`` (docs/api.md, "Reassignment"): the same operations and
permissions as the pages. Actions are POST only (405 otherwise) and go through Django's CSRF check
(session cookie + ``X-CSRFToken``); ``Idempotency-Key`` makes a repeated submission return the first
action. Errors are JSON ``{"error": ..., "errors": [...]}`` with 400 (input), 401 (not logged in),
403 (role), 404, 405 or 503 (ZooKeeper unreachable).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.urls import reverse

from dashboard.accounts import roles
from dashboard.actions import reassign_throttle
from dashboard.actions.reassign_service import (
    BadRequest,
    Submitted,
    change_throttle,
    check,
    clean_key,
    generate,
    generate_rf,
    parse_ints,
    progress_document,
    record_rejection,
    submit,
    submit_cancel,
    summary,
)
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster

logger = logging.getLogger(__name__)

View = Callable[..., JsonResponse]


def _error(status: int, message: str, errors: list[str] | None = None, **extra: Any) -> JsonResponse:
    return JsonResponse({"error": message, "errors": errors or [message], **extra}, status=status)


def _api(method: str, operate: bool) -> Callable[[View], View]:
    """Method, login and role checks shared by every endpoint; ZooKeeper failures become 503."""

    def wrap(view: View) -> View:
        @login_not_required
        @wraps(view)
        def inner(request: HttpRequest, name: str, *args: Any, **kwargs: Any) -> JsonResponse:
            if request.method != method:
                response = _error(405, f"use {method}")
                response["Allow"] = method
                return response
            if not request.user.is_authenticated:
                return _error(401, "log in first (session cookie)")
            cluster = get_object_or_404(Cluster, name=name)
            allowed = roles.can_operate(request.user) if operate else roles.can_view(request.user)
            if not allowed:
                if method == "POST":
                    kind = Action.Kind.REASSIGNMENT_CANCEL if "pk" in kwargs else Action.Kind.REASSIGNMENT
                    record_rejection(request.user, cluster.name, kind, {"api": view.__name__}, "", "not allowed", "")
                return _error(403, f"your role ({roles.role_of(request.user) or 'none'}) may not do this")
            try:
                return view(request, cluster, *args, **kwargs)
            except BadRequest as exc:
                return _error(400, str(exc))
            except Exception as exc:
                logger.warning("reassign API %s on %s: %s", view.__name__, cluster.name, exc)
                return _error(503, f"could not read ZooKeeper: {exc.__class__.__name__} {exc}")

        return inner

    return wrap


def _body(request: HttpRequest) -> dict[str, Any]:
    try:
        body = json.loads(request.body or b"{}")
    except ValueError as exc:
        raise BadRequest(f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    return body


def _key(request: HttpRequest, body: dict[str, Any]) -> str:
    return clean_key(request.headers.get("Idempotency-Key") or str(body.get("idempotency_key") or ""))


def _document(body: dict[str, Any]) -> Any:
    if "reassignment" not in body:
        raise BadRequest('the body needs "reassignment": Kafka\'s reassignment JSON (an object, or a string)')
    return body["reassignment"]


def _action_json(cluster: Cluster, done: Submitted) -> JsonResponse:
    action = done.action
    body = {
        "action": action.pk,
        "status": action.status,
        "replayed": not done.created,
        "errors": done.errors,
        "progress_url": reverse("api:reassign-progress", kwargs={"name": cluster.name, "pk": action.pk})
        if action.kind == Action.Kind.REASSIGNMENT
        else None,
        "page_url": reverse("audit:detail", kwargs={"pk": action.pk}),
    }
    if action.status == Action.Status.REJECTED:
        return JsonResponse({"error": action.error, **body}, status=400)
    return JsonResponse(body, status=202 if done.created else 200)


@_api("POST", operate=True)
def generate_view(request: HttpRequest, cluster: Cluster) -> JsonResponse:
    body = _body(request)
    topics = body.get("topics")
    brokers = body.get("brokers")
    if not isinstance(topics, list) or not all(isinstance(t, str) for t in topics):
        raise BadRequest('"topics" must be a list of topic names')
    if "replication_factor" in body:
        factor = body["replication_factor"]
        if isinstance(factor, bool) or not isinstance(factor, int):
            raise BadRequest(f'"replication_factor" must be a whole number, got {factor!r}')
        return JsonResponse(generate_rf(cluster, topics, factor))
    if not isinstance(brokers, list):
        raise BadRequest('"brokers" must be a list of broker ids')
    if any(not isinstance(b, int) or isinstance(b, bool) for b in brokers):
        raise BadRequest('"brokers" must be a list of non-negative integers')
    return JsonResponse(generate(cluster, topics, parse_ints(brokers, "broker ids")))


def _rf_change(body: dict[str, Any]) -> bool:
    value = body.get("change_replication_factor", False)
    if not isinstance(value, bool):
        raise BadRequest('"change_replication_factor" must be true or false')
    return value


def _replace(body: dict[str, Any]) -> bool:
    value = body.get("replace", False)
    if not isinstance(value, bool):
        raise BadRequest('"replace" must be true or false')
    return value


@_api("POST", operate=True)
def validate_view(request: HttpRequest, cluster: Cluster) -> JsonResponse:
    body = _body(request)
    checked = check(cluster, _document(body), _replace(body), _rf_change(body))
    return JsonResponse(summary(checked), status=200 if checked.validation.ok else 400)


@_api("POST", operate=True)
def execute_view(request: HttpRequest, cluster: Cluster) -> JsonResponse:
    body = _body(request)
    key = _key(request, body)
    if not isinstance(body.get("reason", ""), str):
        raise BadRequest('"reason" must be a string')
    throttle = None
    if body.get("throttle_bytes_per_s") is not None:
        try:
            throttle = reassign_throttle.parse_rate(body["throttle_bytes_per_s"])
        except reassign_throttle.ThrottleError as exc:
            raise BadRequest(str(exc)) from None
    done = submit(
        request.user,
        cluster,
        _document(body),
        str(body.get("reason", "")),
        _replace(body),
        key,
        throttle,
        _rf_change(body),
    )
    return _action_json(cluster, done)


@_api("POST", operate=True)
def throttle_view(request: HttpRequest, cluster: Cluster, pk: int) -> JsonResponse:
    """``{"throttle_bytes_per_s": <int>, "reason": "..."}``: change a running reassignment's throttle."""
    body = _body(request)
    target = get_object_or_404(Action, pk=pk, cluster=cluster.name, kind=Action.Kind.REASSIGNMENT)
    if "throttle_bytes_per_s" not in body:
        raise BadRequest('the body needs "throttle_bytes_per_s": a positive whole number of bytes per second')
    if not isinstance(body.get("reason", ""), str):
        raise BadRequest('"reason" must be a string')
    throttle = change_throttle(request.user, cluster, target, body["throttle_bytes_per_s"], body.get("reason", ""))
    return JsonResponse({"action": target.pk, "throttle": {k: v for k, v in throttle.items() if k != "plan"}})


@_api("POST", operate=True)
def cancel_view(request: HttpRequest, cluster: Cluster, pk: int) -> JsonResponse:
    body = _body(request)
    key = _key(request, body)
    target = get_object_or_404(Action, pk=pk, cluster=cluster.name, kind=Action.Kind.REASSIGNMENT)
    done = submit_cancel(request.user, cluster, target, str(body.get("reason", "")), key)
    return _action_json(cluster, done)


@_api("GET", operate=False)
def progress_view(request: HttpRequest, cluster: Cluster, pk: int) -> JsonResponse:
    action = get_object_or_404(Action, pk=pk, cluster=cluster.name, kind=Action.Kind.REASSIGNMENT)
    return JsonResponse(progress_document(cluster, action))
