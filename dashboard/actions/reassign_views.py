"""Reassignment pages: generate a proposal, edit it (table or Kafka JSON), validate, execute; the
progress page of a submitted reassignment; cancel. Operators act; viewers may watch progress.

Forms carry a fresh uuid4 ``idempotency_key`` per render, so a double click or a resubmitted form
returns the first action instead of creating a second.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

from django.http import HttpRequest, HttpResponse, HttpResponseForbidden, HttpResponseNotAllowed
from django.shortcuts import get_object_or_404, redirect, render

from dashboard.accounts import roles
from dashboard.actions import reassign_throttle
from dashboard.actions.reassign_cluster import read_brokers
from dashboard.actions.reassign_service import (
    RUNNING_STATES,
    BadRequest,
    cancel_unavailable,
    change_throttle,
    check,
    clean_key,
    current_table,
    generate,
    generate_rf,
    parse_ints,
    submit,
    submit_cancel,
    summary,
)
from dashboard.actions.zk import cluster_store
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster

logger = logging.getLogger(__name__)


def _forbidden(request: HttpRequest, what: str) -> HttpResponse:
    return HttpResponseForbidden(f"Your role ({roles.role_of(request.user) or 'none'}) may not {what}.")


def _cluster_choices(cluster: Cluster) -> tuple[list[str], list[dict[str, Any]], str]:
    try:
        with cluster_store(cluster.zookeeper_connect) as store:
            topics = sorted(store.get_all_topics())
            brokers = [{"id": b.id, "rack": b.rack} for b in sorted(read_brokers(store).values(), key=lambda b: b.id)]
        return topics, brokers, ""
    except Exception as exc:
        logger.warning("reassign page on %s: %s", cluster.name, exc)
        return [], [], f"could not read ZooKeeper: {exc.__class__.__name__} {exc}"


def reassign(request: HttpRequest, name: str) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    if not roles.can_operate(request.user):
        if request.method == "POST":
            from dashboard.actions.reassign_service import record_rejection

            record_rejection(
                request.user, cluster.name, Action.Kind.REASSIGNMENT, {}, "", "not allowed: operators only", ""
            )
        return _forbidden(request, "reassign partitions")
    if request.method not in ("GET", "POST"):
        return HttpResponseNotAllowed(["GET", "POST"])
    topics, brokers, zk_error = _cluster_choices(cluster)
    source = request.POST if request.method == "POST" else request.GET
    chosen_topics = [t for t in source.getlist("topics") if t]
    context: dict[str, Any] = {
        "cluster": cluster,
        "all_topics": topics,
        "all_brokers": brokers,
        "chosen_topics": chosen_topics,
        "chosen_brokers": [],
        "document": source.get("reassignment", ""),
        "reason": source.get("reason", ""),
        "replace": source.get("replace") in ("1", "on", "true"),
        "errors": [zk_error] if zk_error else [],
        "idempotency_key": str(uuid.uuid4()),
        "cancel_note": cancel_unavailable(cluster),
        "throttle_mb_s": source.get("throttle_mb_s", ""),
        "rf_change": source.get("change_replication_factor") in ("1", "on", "true"),
        "replication_factor": source.get("replication_factor", ""),
    }
    status = 200
    try:
        context["chosen_brokers"] = parse_ints(source.getlist("brokers"), "broker ids")
        if request.method == "GET" and source.get("generate") == "rf":
            proposal = generate_rf(cluster, chosen_topics, source.get("replication_factor", ""))
            context["proposal"] = proposal
            context["document"] = json.dumps(proposal["request"], indent=1)
            context["rf_change"] = True
        elif request.method == "GET" and source.get("generate") == "current":
            proposal = current_table(cluster, chosen_topics)
            context["proposal"] = proposal
            context["document"] = json.dumps(proposal["request"], indent=1)
        elif request.method == "GET" and source.get("generate"):
            proposal = generate(cluster, chosen_topics, context["chosen_brokers"])
            context["proposal"] = proposal
            context["document"] = json.dumps(proposal["request"], indent=1)
        elif request.method == "POST" and source.get("op") == "validate":
            checked = check(cluster, context["document"], context["replace"], context["rf_change"])
            context["validation"] = summary(checked)
            if not checked.validation.ok:
                context["errors"] = checked.validation.errors
                status = 400
        elif request.method == "POST":
            key = clean_key(source.get("idempotency_key"))
            try:
                throttle = reassign_throttle.parse_form_rate(source.get("throttle_mb_s"))
            except reassign_throttle.ThrottleError as exc:
                raise BadRequest(str(exc)) from None
            done = submit(
                request.user,
                cluster,
                context["document"],
                context["reason"],
                context["replace"],
                key,
                throttle,
                context["rf_change"],
            )
            if not done.errors or not done.created:
                if done.action.status == Action.Status.REJECTED:
                    context["errors"] = done.errors or [done.action.error]
                    status = 400
                else:
                    return redirect("actions:reassign-progress", name=cluster.name, pk=done.action.pk)
            else:
                context["errors"] = done.errors
                context["rejected"] = done.action
                status = 400
    except BadRequest as exc:
        context["errors"] = [str(exc)]
        status = 400
    except Exception as exc:  # ZooKeeper unreachable, timeouts
        logger.warning("reassign on %s failed: %s", cluster.name, exc)
        context["errors"] = [f"could not read ZooKeeper: {exc.__class__.__name__} {exc}"]
        status = 503
    context["proposal_json"] = json.dumps(context.get("proposal") or {})
    return render(request, "actions/reassign.html", context, status=status)


def _progress(request: HttpRequest, cluster: Cluster, action: Action, status: int = 200, **extra: Any) -> HttpResponse:
    """The progress page of ``action``; ``extra`` adds a form's errors (``errors`` for cancel,
    ``throttle_errors`` for the throttle form), answered with ``status``."""
    cancels = Action.objects.filter(
        cluster=cluster.name, kind=Action.Kind.REASSIGNMENT_CANCEL, parameters__reassignment=action.pk
    ).order_by("id")
    context = {
        "cluster": cluster,
        "action": action,
        "cancels": cancels,
        "can_operate": roles.can_operate(request.user),
        "cancel_note": cancel_unavailable(cluster),
        "active": action.status in RUNNING_STATES,
        "idempotency_key": str(uuid.uuid4()),
        "moved_replicas": (action.preview or {}).get("moved_replicas"),
        "data_to_copy": (action.preview or {}).get("data_to_copy") or {},
        "throttle": (action.parameters or {}).get("throttle"),
        **extra,
    }
    return render(request, "actions/reassign_progress.html", context, status=status)


def progress_page(request: HttpRequest, name: str, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    if not roles.can_view(request.user):
        return _forbidden(request, "read the audit history")
    action = get_object_or_404(Action, pk=pk, cluster=cluster.name, kind=Action.Kind.REASSIGNMENT)
    return _progress(request, cluster, action)


def throttle(request: HttpRequest, name: str, pk: int) -> HttpResponse:
    """The progress page's "change throttle" form: MB/s per broker and a reason."""
    cluster = get_object_or_404(Cluster, name=name)
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not roles.can_operate(request.user):
        return _forbidden(request, "change replication throttles")
    target = get_object_or_404(Action, pk=pk, cluster=cluster.name, kind=Action.Kind.REASSIGNMENT)
    try:
        rate = reassign_throttle.parse_form_rate(request.POST.get("throttle_mb_s"))
        if rate is None:
            raise BadRequest("enter the new throttle in MB/s per broker")
        change_throttle(request.user, cluster, target, rate, str(request.POST.get("reason", "")))
    except (BadRequest, reassign_throttle.ThrottleError) as exc:
        return _progress(request, cluster, target, 400, throttle_errors=[str(exc)])
    except Exception as exc:
        logger.warning("throttle change of #%s: %s", pk, exc)
        return HttpResponse(
            f"could not reach ZooKeeper: {exc.__class__.__name__}", status=503, content_type="text/plain; charset=utf-8"
        )
    return redirect("actions:reassign-progress", name=cluster.name, pk=target.pk)


def cancel(request: HttpRequest, name: str, pk: int) -> HttpResponse:
    cluster = get_object_or_404(Cluster, name=name)
    if request.method != "POST":
        return HttpResponseNotAllowed(["POST"])
    if not roles.can_operate(request.user):
        from dashboard.actions.reassign_service import record_rejection

        record_rejection(
            request.user,
            cluster.name,
            Action.Kind.REASSIGNMENT_CANCEL,
            {"reassignment": pk},
            "",
            "not allowed: operators only",
            "",
        )
        return _forbidden(request, "cancel reassignments")
    target = get_object_or_404(Action, pk=pk, cluster=cluster.name, kind=Action.Kind.REASSIGNMENT)
    try:
        key = clean_key(request.POST.get("idempotency_key"))
    except BadRequest as exc:
        return HttpResponse(str(exc), status=400, content_type="text/plain; charset=utf-8")
    done = submit_cancel(request.user, cluster, target, str(request.POST.get("reason", "")), key)
    if done.errors:
        return _progress(request, cluster, target, 400, errors=done.errors)
    return redirect("actions:reassign-progress", name=cluster.name, pk=target.pk)
