"""Manage users: create them with a role, change their role, (de)activate them (admins only).

Every change is one USER_CHANGE audit action with the values before and after and the admin's
optional note; a refused change is a *rejected* one. Users are deactivated, never deleted, so the
audit history keeps pointing at them. Django admin changes are recorded by
``dashboard.audit.signals.admin_log_entry`` instead.
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
from django.views.decorators.http import require_http_methods

from dashboard.accounts import roles
from dashboard.accounts.access import admin_only
from dashboard.audit.models import Action
from dashboard.audit.signals import record_change, record_refusal, user_snapshot

MAX_NOTE: Final = 500


def form_errors(form: forms.BaseForm) -> str:
    """A form's errors as one line for the audit row (``field: message; ...``)."""
    return "; ".join(f"{f}: {' '.join(str(m) for m in e)}" for f, e in form.errors.items())


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
    denied = admin_only(request)
    if denied:
        if request.method == "POST":
            record_refusal(request, Action.Kind.USER_CHANGE, "", "not allowed: admins only", {"operation": "create"})
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
            return redirect("manage:users")
        status = 400
        error = form_errors(form)
        subject = str(request.POST.get("username", ""))[:150]
        record_refusal(request, Action.Kind.USER_CHANGE, subject, error, {"operation": "create"})
    users = get_user_model().objects.order_by("username").prefetch_related("groups")
    rows = [{"user": u, "role": roles.role_of(u) if u.is_active else "inactive"} for u in users]
    return render(request, "accounts/admin_users.html", {"rows": rows, "form": form}, status=status)


@require_http_methods(["GET", "POST"])
def user_edit(request: HttpRequest, pk: int) -> HttpResponse:
    denied = admin_only(request)
    if denied:
        if request.method == "POST":
            record_refusal(
                request, Action.Kind.USER_CHANGE, str(pk), "not allowed: admins only", {"operation": "change"}
            )
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
            error = form_errors(form)
        if error:
            record_refusal(request, Action.Kind.USER_CHANGE, user.get_username(), error, {"operation": "change"})
            form.add_error(None, error)
            return render(request, "accounts/admin_user_form.html", {"form": form, "subject": user}, status=400)
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
        return redirect("manage:users")
    return render(request, "accounts/admin_user_form.html", {"form": form, "subject": user})
