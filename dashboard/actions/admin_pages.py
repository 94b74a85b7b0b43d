"""Admin pages: register, edit and remove clusters; create users, change their role, (de)activate them.

Admins only (``roles.can_administer``). Every change is one audit action (CLUSTER_CHANGE or
USER_CHANGE) with the values before and after and the admin's optional note; Django admin changes
are recorded by ``signals.admin_log_entry`` instead. Users are deactivated, never deleted, so the
audit history keeps pointing at them.
"""

from __future__ import annotations

from typing import Any, Final

from django import forms
from django.contrib import messages
from django.contrib.auth import get_user_model, password_validation
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard.actions import roles
from dashboard.actions.models import Action
from dashboard.actions.signals import cluster_snapshot, record_change, user_snapshot
from dashboard.actions.views import forbidden
from dashboard.clusters.forms import ClusterRegistrationForm
from dashboard.clusters.models import Cluster

MAX_NOTE: Final = 500


class ClusterForm(ClusterRegistrationForm):
    """The registration form (checked against ZooKeeper, ``dashboard.clusters.forms``) plus an audit note."""

    note = forms.CharField(required=False, max_length=MAX_NOTE, label="Note for the audit history")


class NewUserForm(forms.Form):
    username = forms.CharField(max_length=150)
    email = forms.EmailField(required=False)
    password = forms.CharField(widget=forms.PasswordInput, max_length=128)
    role = forms.ChoiceField(choices=[(r, r) for r in roles.ROLES])
    note = forms.CharField(required=False, max_length=MAX_NOTE)

    def clean_username(self) -> str:
        name = str(self.cleaned_data["username"]).strip()
        user_model = get_user_model()
        try:
            user_model._meta.get_field("username").run_validators(name)
        except ValidationError as exc:
            raise forms.ValidationError(exc.messages) from None
        if user_model.objects.filter(username=name).exists():
            raise forms.ValidationError(f"a user named {name!r} exists already")
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("password") and data.get("username"):
            candidate = get_user_model()(username=data["username"], email=data.get("email", ""))
            try:
                password_validation.validate_password(data["password"], candidate)
            except ValidationError as exc:
                self.add_error("password", exc)
        return data


class EditUserForm(forms.Form):
    role = forms.ChoiceField(choices=[(r, r) for r in roles.ROLES])
    is_active = forms.BooleanField(required=False, label="Active (may log in)")
    email = forms.EmailField(required=False)
    note = forms.CharField(required=False, max_length=MAX_NOTE)


def _errors(form: forms.BaseForm) -> str:
    return "; ".join(f"{f}: {' '.join(str(m) for m in e)}" for f, e in form.errors.items())


def _admin_only(request: HttpRequest) -> HttpResponse | None:
    if not roles.can_administer(request.user):
        return forbidden(request, "manage clusters and users")
    return None


def _refused(request: HttpRequest, kind: str, subject: str, error: str, params: dict[str, Any]) -> None:
    Action.objects.create(
        user=request.user if request.user.is_authenticated else None,
        username=request.user.get_username(),
        kind=kind,
        status=Action.Status.REJECTED,
        parameters={"subject": subject, **params},
        error=error,
    )


# -- clusters -------------------------------------------------------------------------------------------


def save_cluster(form: ClusterForm, before: dict[str, Any] | None, user: Any) -> Cluster:
    """Save a valid registration form and record the change (the pages and the JSON API)."""
    with transaction.atomic():
        cluster: Cluster = form.save()
        after = cluster_snapshot(cluster)
        if after != before:
            record_change(
                Action.Kind.CLUSTER_CHANGE,
                "registered" if before is None else "changed",
                cluster.name,
                before,
                after,
                user=user,
                cluster=cluster.name,
                reason=form.cleaned_data.get("note", ""),
            )
    return cluster


def remove_cluster(cluster: Cluster, user: Any, note: str) -> None:
    """Delete the registry row and record it. The workers notice within ``HOSTING_POLL_S``: the mirror
    stops (its snapshot keys go), a managed cluster's candidates resign (deleting ``/controller``);
    the state-change stream, the audit rows and ZooKeeper's data stay."""
    name = cluster.name
    before = cluster_snapshot(cluster)
    with transaction.atomic():
        cluster.delete()
        record_change(
            Action.Kind.CLUSTER_CHANGE, "removed", name, before, None, user=user, cluster=name, reason=note[:MAX_NOTE]
        )


@require_GET
def cluster_list(request: HttpRequest) -> HttpResponse:
    denied = _admin_only(request)
    if denied:
        return denied
    return render(request, "actions/admin_clusters.html", {"clusters": Cluster.objects.all(), "form": ClusterForm()})


@require_http_methods(["GET", "POST"])
def cluster_edit(request: HttpRequest, name: str | None = None) -> HttpResponse:
    """Register (no ``name``) or edit a cluster."""
    denied = _admin_only(request)
    if denied:
        if request.method == "POST":
            _refused(request, Action.Kind.CLUSTER_CHANGE, name or "", "not allowed: admins only", {})
        return denied
    instance = get_object_or_404(Cluster, name=name) if name else None
    before = cluster_snapshot(instance) if instance is not None else None
    form = ClusterForm(request.POST or None, instance=instance)
    if request.method == "POST":
        if form.is_valid():
            cluster = save_cluster(form, before, request.user)
            found = f" ZooKeeper holds {form.probe.summary}." if form.probe is not None else ""
            watched = " Workers start mirroring it" + (
                " and host its controller candidates" if cluster.mode == Cluster.Mode.MANAGED else ""
            )
            messages.success(
                request,
                f"Cluster {cluster.name} {'registered' if before is None else 'saved'}.{found}{watched}"
                " within seconds.",
            )
            return redirect("actions:admin-clusters")
        error = _errors(form)
        _refused(request, Action.Kind.CLUSTER_CHANGE, name or str(request.POST.get("name", ""))[:50], error, {})
    return render(
        request,
        "actions/admin_cluster_form.html",
        {"form": form, "cluster": instance},
        status=400 if request.method == "POST" else 200,
    )


@require_POST
def cluster_remove(request: HttpRequest, name: str) -> HttpResponse:
    denied = _admin_only(request)
    if denied:
        _refused(request, Action.Kind.CLUSTER_CHANGE, name, "not allowed: admins only", {"operation": "remove"})
        return denied
    cluster = get_object_or_404(Cluster, name=name)
    if request.POST.get("confirm", "") != cluster.name:
        error = "type the cluster's name to confirm its removal"
        _refused(request, Action.Kind.CLUSTER_CHANGE, name, error, {"operation": "remove"})
        messages.error(request, error)
        return redirect("actions:admin-cluster-edit", name=name)
    managed = cluster.mode == Cluster.Mode.MANAGED
    remove_cluster(cluster, request.user, str(request.POST.get("note", "")))
    resign = " Its controller candidates resign within seconds." if managed else ""
    messages.success(
        request,
        f"Cluster {name} removed from the dashboard: its mirror stops.{resign} Its ZooKeeper data and its history"
        " stay.",
    )
    return redirect("actions:admin-clusters")


# -- users ----------------------------------------------------------------------------------------------


def _set_role(user: Any, role: str) -> None:
    groups = {g.name: g for g in Group.objects.filter(name__in=roles.ROLES)}
    for name in roles.ROLES:
        if name not in groups:
            groups[name] = Group.objects.create(name=name)
    user.groups.remove(*[groups[r] for r in roles.ROLES if r != role])
    user.groups.add(groups[role])


@require_http_methods(["GET", "POST"])
def user_list(request: HttpRequest) -> HttpResponse:
    """The users with their role; POST creates one."""
    denied = _admin_only(request)
    if denied:
        if request.method == "POST":
            _refused(request, Action.Kind.USER_CHANGE, "", "not allowed: admins only", {"operation": "create"})
        return denied
    form = NewUserForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form.is_valid():
            data = form.cleaned_data
            with transaction.atomic():
                user = get_user_model().objects.create_user(data["username"], data["email"], data["password"])
                _set_role(user, data["role"])
                record_change(
                    Action.Kind.USER_CHANGE,
                    "created",
                    user.get_username(),
                    None,
                    user_snapshot(user),
                    user=request.user,
                    reason=data.get("note", ""),
                )
            messages.success(request, f"User {user.get_username()} created as {data['role']}.")
            return redirect("actions:admin-users")
        status = 400
        error = _errors(form)
        subject = str(request.POST.get("username", ""))[:150]
        _refused(request, Action.Kind.USER_CHANGE, subject, error, {"operation": "create"})
    users = get_user_model().objects.order_by("username").prefetch_related("groups")
    rows = [{"user": u, "role": roles.role_of(u) if u.is_active else "inactive"} for u in users]
    return render(request, "actions/admin_users.html", {"rows": rows, "form": form}, status=status)


@require_http_methods(["GET", "POST"])
def user_edit(request: HttpRequest, pk: int) -> HttpResponse:
    denied = _admin_only(request)
    if denied:
        if request.method == "POST":
            _refused(request, Action.Kind.USER_CHANGE, str(pk), "not allowed: admins only", {"operation": "change"})
        return denied
    user = get_object_or_404(get_user_model(), pk=pk)
    current = roles.role_of(user) or roles.VIEWER
    initial = {"role": current, "is_active": user.is_active, "email": user.email}
    form = EditUserForm(request.POST or None, initial=initial)
    if request.method == "POST":
        error = ""
        if form.is_valid():
            data = form.cleaned_data
            if user.pk == request.user.pk and (data["role"] != roles.ADMIN or not data["is_active"]):
                error = "you cannot demote or deactivate yourself (ask another admin)"
            elif user.is_superuser and data["role"] != roles.ADMIN:
                error = "a superuser is always an admin; change superuser status in Django admin"
        else:
            error = _errors(form)
        if error:
            _refused(request, Action.Kind.USER_CHANGE, user.get_username(), error, {"operation": "change"})
            form.add_error(None, error)
            return render(request, "actions/admin_user_form.html", {"form": form, "subject": user}, status=400)
        before = user_snapshot(user)
        with transaction.atomic():
            user.is_active = data["is_active"]
            user.email = data["email"]
            user.save(update_fields=["is_active", "email"])
            _set_role(user, data["role"])
            after = user_snapshot(user)
            if after != before:
                record_change(
                    Action.Kind.USER_CHANGE,
                    "changed",
                    user.get_username(),
                    before,
                    after,
                    user=request.user,
                    reason=data.get("note", ""),
                )
        messages.success(request, f"User {user.get_username()} saved.")
        return redirect("actions:admin-users")
    return render(request, "actions/admin_user_form.html", {"form": form, "subject": user})
