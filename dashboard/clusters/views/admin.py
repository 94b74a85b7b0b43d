"""Admin pages: register, edit and remove clusters (users are ``dashboard.accounts.user_admin``).

Admins only (``roles.can_administer``). Every change is one CLUSTER_CHANGE audit action with the
values before and after and the admin's optional note; Django admin changes are recorded by
``dashboard.audit.signals.admin_log_entry`` instead.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from dashboard.accounts.access import admin_only
from dashboard.accounts.user_admin import MAX_NOTE, form_errors
from dashboard.audit.models import Action
from dashboard.audit.signals import cluster_snapshot, record_change, record_refusal
from dashboard.clusters.forms import ClusterRegistrationForm
from dashboard.clusters.models import Cluster


class ClusterForm(ClusterRegistrationForm):
    """The registration form (checked against ZooKeeper, ``dashboard.clusters.forms``) plus an audit note."""

    note = forms.CharField(required=False, max_length=MAX_NOTE, label="Note for the audit history")


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
    denied = admin_only(request)
    if denied:
        return denied
    return render(request, "clusters/admin_clusters.html", {"clusters": Cluster.objects.all(), "form": ClusterForm()})


@require_http_methods(["GET", "POST"])
def cluster_edit(request: HttpRequest, name: str | None = None) -> HttpResponse:
    """Register (no ``name``) or edit a cluster."""
    denied = admin_only(request)
    if denied:
        if request.method == "POST":
            record_refusal(request, Action.Kind.CLUSTER_CHANGE, name or "", "not allowed: admins only", {})
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
            return redirect("manage:clusters")
        error = form_errors(form)
        record_refusal(request, Action.Kind.CLUSTER_CHANGE, name or str(request.POST.get("name", ""))[:50], error, {})
    return render(
        request,
        "clusters/admin_cluster_form.html",
        {"form": form, "cluster": instance},
        status=400 if request.method == "POST" else 200,
    )


@require_POST
def cluster_remove(request: HttpRequest, name: str) -> HttpResponse:
    denied = admin_only(request)
    if denied:
        record_refusal(request, Action.Kind.CLUSTER_CHANGE, name, "not allowed: admins only", {"operation": "remove"})
        return denied
    cluster = get_object_or_404(Cluster, name=name)
    if request.POST.get("confirm", "") != cluster.name:
        error = "type the cluster's name to confirm its removal"
        record_refusal(request, Action.Kind.CLUSTER_CHANGE, name, error, {"operation": "remove"})
        messages.error(request, error)
        return redirect("manage:cluster-edit", name=name)
    managed = cluster.mode == Cluster.Mode.MANAGED
    remove_cluster(cluster, request.user, str(request.POST.get("note", "")))
    resign = " Its controller candidates resign within seconds." if managed else ""
    messages.success(
        request,
        f"Cluster {name} removed from the dashboard: its mirror stops.{resign} Its ZooKeeper data and its history"
        " stay.",
    )
    return redirect("manage:clusters")
