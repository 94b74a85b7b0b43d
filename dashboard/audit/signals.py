"""Logins, failed logins, and changes of clusters, users and roles go to the audit history (never a password)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from django.http import HttpRequest


def _client(request: HttpRequest | None) -> dict[str, Any]:
    if request is None:
        return {}
    return {"ip": request.META.get("REMOTE_ADDR", ""), "user_agent": request.META.get("HTTP_USER_AGENT", "")[:200]}


def logged_in(sender: Any, request: HttpRequest | None = None, user: Any = None, **kwargs: Any) -> None:
    from dashboard.audit.models import Action

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
    from dashboard.audit.models import Action

    username = str((credentials or {}).get("username", ""))[:150]
    # django-axes marks the request when this address is (or has just become) locked out; its backend
    # refuses a locked-out address before any password is checked, and Django still sends this signal.
    locked = bool(getattr(request, "axes_locked_out", False))
    Action.objects.create(
        username=username,
        kind=Action.Kind.LOGIN_FAILED,
        status=Action.Status.REJECTED,
        parameters={**_client(request), "locked_out": locked},
        error="too many failed logins from this address: locked out" if locked else "wrong username or password",
    )


# -- changes of clusters, users and roles -------------------------------------------------------------
#
# The dashboard's admin pages record their changes themselves (``record_change`` with the acting user).
# Django admin writes a ``LogEntry`` (with its user and whether it added, changed or deleted) right
# after each change it makes; ``admin_log_entry`` turns that into a CLUSTER_CHANGE or USER_CHANGE action
# with the values before (captured by the pre-save and pre-m2m signals) and after. Saves outside any
# admin (migrations, shells, tests creating users, ``last_login`` updates) leave no LogEntry and are
# not recorded: the captured "before" values wait in a small per-thread buffer, cleared per request.

USER_FIELDS: Final = ("username", "email", "first_name", "last_name", "is_active", "is_staff", "is_superuser")
CLUSTER_FIELDS: Final = ("name", "zookeeper_connect", "mode", "description")
_PENDING_MAX: Final = 64
_pending = threading.local()


def user_snapshot(user: Any) -> dict[str, Any]:
    data = {f: getattr(user, f, None) for f in USER_FIELDS}
    data["groups"] = sorted(user.groups.values_list("name", flat=True)) if user.pk else []
    return data


def cluster_snapshot(cluster: Any) -> dict[str, Any]:
    return {f: getattr(cluster, f, None) for f in CLUSTER_FIELDS}


def group_snapshot(group: Any) -> dict[str, Any]:
    return {"name": group.name, "permissions": sorted(group.permissions.values_list("codename", flat=True))}


SNAPSHOTS: Final[dict[str, Callable[[Any], dict[str, Any]]]] = {
    "cluster": cluster_snapshot,
    "user": user_snapshot,
    "group": group_snapshot,
}


def record_change(
    kind: str,
    operation: str,
    subject: str,
    before: Any,
    after: Any,
    *,
    user: Any = None,
    cluster: str = "",
    reason: str = "",
    source: str = "dashboard",
) -> Any:
    """One audit row for a change of a cluster, a user or a role."""
    from dashboard.audit.models import Action

    acting = user if user is not None and getattr(user, "is_authenticated", False) else None
    return Action.objects.create(
        user=acting,
        username=acting.get_username() if acting is not None else "",
        cluster=cluster,
        kind=kind,
        status=Action.Status.SUCCEEDED,
        reason=reason,
        parameters={"operation": operation, "subject": subject, "before": before, "after": after, "source": source},
    )


def record_refusal(request: Any, kind: str, subject: str, error: str, params: dict[str, Any]) -> Any:
    """One *rejected* audit row for a management change the request was not allowed or not valid to make."""
    from dashboard.audit.models import Action

    return Action.objects.create(
        user=request.user if request.user.is_authenticated else None,
        username=request.user.get_username(),
        kind=kind,
        status=Action.Status.REJECTED,
        parameters={"subject": subject, **params},
        error=error,
    )


def _buffer() -> OrderedDict[tuple[str, str], dict[str, Any] | None]:
    if not hasattr(_pending, "items"):
        _pending.items = OrderedDict()
    items: OrderedDict[tuple[str, str], dict[str, Any] | None] = _pending.items
    return items


def _capture(model: str, pk: Any, snapshot: dict[str, Any] | None) -> None:
    """Remember the values before the first change of an object (until its LogEntry, if any)."""
    key = (model, str(pk))
    items = _buffer()
    if key in items:
        return
    items[key] = snapshot
    while len(items) > _PENDING_MAX:
        items.popitem(last=False)


def new_request(sender: Any, **kwargs: Any) -> None:
    """Captures belong to one request: whatever an earlier one (or a shell) left is dropped."""
    _buffer().clear()


def _model_name(sender: Any) -> str:
    return str(sender._meta.model_name)


def before_save(sender: Any, instance: Any, raw: bool = False, update_fields: Any = None, **kwargs: Any) -> None:
    if raw or instance.pk is None or (update_fields is not None and set(update_fields) <= {"last_login"}):
        return
    model = _model_name(sender)
    old = sender.objects.filter(pk=instance.pk).first()
    _capture(model, instance.pk, SNAPSHOTS[model](old) if old is not None else None)


def before_delete(sender: Any, instance: Any, **kwargs: Any) -> None:
    model = _model_name(sender)
    _capture(model, instance.pk, SNAPSHOTS[model](instance))


def before_groups_change(sender: Any, instance: Any, action: str, reverse: bool, **kwargs: Any) -> None:
    if action in ("pre_add", "pre_remove", "pre_clear") and not reverse and instance.pk is not None:
        _capture("user", instance.pk, user_snapshot(instance))


def admin_log_entry(sender: Any, instance: Any, created: bool, raw: bool = False, **kwargs: Any) -> None:
    """Record the change a Django admin LogEntry reports, as done by its user."""
    from django.contrib.admin.models import ADDITION, DELETION

    from dashboard.audit.models import Action

    if raw or not created or not instance.content_type_id:
        return
    ct = instance.content_type
    model = ct.model
    kinds = {"cluster": Action.Kind.CLUSTER_CHANGE, "user": Action.Kind.USER_CHANGE, "group": Action.Kind.USER_CHANGE}
    if model not in kinds or ct.app_label not in ("clusters", "auth"):
        return
    key = (model, str(instance.object_id))
    before = _buffer().pop(key, None)
    model_class = ct.model_class()
    current = model_class.objects.filter(pk=instance.object_id).first() if model_class is not None else None
    now = SNAPSHOTS[model](current) if current is not None else None
    flag = instance.action_flag
    if flag == ADDITION:
        operation, before, after = "created", None, now
    elif flag == DELETION:  # logged just before the row goes
        operation, before, after = "deleted", now or before, None
    else:
        operation, after = "changed", now
    if model == "cluster":
        operation = {"created": "registered", "deleted": "removed"}.get(operation, operation)
    record_change(
        kinds[model],
        operation if model != "group" else f"group {operation}",
        str(instance.object_repr),
        before,
        after,
        user=instance.user,
        cluster=str(instance.object_repr) if model == "cluster" else "",
        reason=str(instance.get_change_message() or ""),
        source="django admin",
    )


def connect() -> None:
    """Connect the login, capture and LogEntry handlers (called once by ``AuditConfig.ready``)."""
    from django.contrib.admin.models import LogEntry
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.contrib.auth.signals import user_logged_in, user_login_failed
    from django.core.signals import request_started
    from django.db.models import signals as db

    from dashboard.clusters.models import Cluster

    user_model = get_user_model()
    for model in (Cluster, user_model, Group):
        label = model._meta.label_lower
        db.pre_save.connect(before_save, sender=model, dispatch_uid=f"audit-before-{label}")
        db.pre_delete.connect(before_delete, sender=model, dispatch_uid=f"audit-before-delete-{label}")
    db.m2m_changed.connect(before_groups_change, sender=user_model.groups.through, dispatch_uid="audit-user-groups")
    db.post_save.connect(admin_log_entry, sender=LogEntry, dispatch_uid="audit-admin-log")
    request_started.connect(new_request, dispatch_uid="audit-new-request")
    user_logged_in.connect(logged_in, dispatch_uid="audit-login")
    user_login_failed.connect(login_failed, dispatch_uid="audit-login-failed")
