"""Analytics pages: overview, one page per chart (chart + paginated table + CSV), runs.

Every page needs a login (LoginRequiredMiddleware); starting a run needs the
``analytics.run_analytics`` permission (admins have it). Runs are sent to Celery by task name, so
the web process never imports ``workers``.
"""

from __future__ import annotations

import csv
import logging
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django import forms
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden, JsonResponse, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from dashboard.analytics import pages
from dashboard.analytics.models import AnalyticsRun
from dashboard.analytics.pages import Filters

logger = logging.getLogger(__name__)

RUN_TASK = "workers.analytics.run"
PAGE_SIZE = 50
DEFAULT_DAYS = 7
MAX_DAYS = 366


class FilterForm(forms.Form):
    cluster = forms.CharField(required=False, max_length=100)
    since = forms.DateField(required=False, input_formats=["%Y-%m-%d"])
    until = forms.DateField(required=False, input_formats=["%Y-%m-%d"])

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until:
            if since > until:
                raise forms.ValidationError("The first day is after the last day.")
            if (until - since).days >= MAX_DAYS:
                raise forms.ValidationError(f"Show at most {MAX_DAYS} days at a time.")
        return data


class RunForm(forms.Form):
    since = forms.DateField(input_formats=["%Y-%m-%d"])
    until = forms.DateField(input_formats=["%Y-%m-%d"])
    cluster = forms.CharField(required=False, max_length=100)

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError("The first day is after the last day.")
        return data


def _today() -> date:
    return datetime.now(UTC).date()


def next_scheduled_runs(now: datetime | None = None) -> list[tuple[str, datetime]]:
    """The analytics entries of the beat schedule and when each next fires (UTC), soonest first.

    An interval entry fires ``every`` seconds after the last run it started (or within ``every`` of
    now when there is none yet); a crontab entry at its next matching minute.
    """
    from django.conf import settings

    now = now or datetime.now(UTC)
    found: list[tuple[str, datetime]] = []
    for name, entry in getattr(settings, "CELERY_BEAT_SCHEDULE", {}).items():
        if not str(entry.get("task", "")).startswith("workers.analytics."):
            continue
        schedule = entry["schedule"]
        if isinstance(schedule, (int, float)):
            last = AnalyticsRun.objects.filter(trigger=AnalyticsRun.Trigger.CURRENT).first()
            base = last.created_at if last is not None else now
            due = base + timedelta(seconds=float(schedule))
            found.append((name, max(due, now)))
        else:
            found.append((name, now + schedule.remaining_estimate(now)))
    return sorted(found, key=lambda item: item[1])


def _filters(request: HttpRequest) -> tuple[Filters | None, FilterForm, list[str]]:
    """Read cluster and days from the query string, defaulting to the last week with data."""
    clusters = pages.known_clusters()
    form = FilterForm(request.GET)
    if not form.is_valid():
        return None, form, clusters
    cluster = form.cleaned_data.get("cluster") or (clusters[0] if clusters else "")
    if not cluster:
        return None, form, clusters
    # Today by default: the every-few-minutes run keeps it current (issue #30).
    until = form.cleaned_data.get("until") or max(_today(), pages.latest_day(cluster) or _today())
    since = form.cleaned_data.get("since") or until - timedelta(days=DEFAULT_DAYS - 1)
    since = min(since, until)
    return Filters(cluster, since, until), form, clusters


def _run_context(request: HttpRequest) -> dict[str, Any]:
    active = AnalyticsRun.objects.filter(status__in=AnalyticsRun.ACTIVE).first()
    last = AnalyticsRun.objects.exclude(status__in=AnalyticsRun.ACTIVE).first()
    today = _today()
    return {
        "active_run": active,
        "last_run": last,
        "next_runs": next_scheduled_runs(),
        "stages": [name for name, _ in AnalyticsRun.STAGES],
        "can_run": request.user.has_perm("analytics.run_analytics"),
        "run_form": RunForm(initial={"since": today, "until": today}),
    }


def _context(request: HttpRequest, **extra: Any) -> dict[str, Any]:
    filters, form, clusters = _filters(request)
    return {
        "filters": filters,
        "filter_form": form,
        "clusters": clusters,
        "pages": pages.PAGES,
        **_run_context(request),
        **extra,
    }


@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    context = _context(request)
    filters = context["filters"]
    context["summary"] = pages.summary(filters) if filters else None
    return render(request, "analytics/overview.html", context)


@require_GET
def chart(request: HttpRequest, slug: str) -> HttpResponse:
    page = pages.BY_SLUG.get(slug)
    if page is None:
        raise Http404("no such analytics page")
    context = _context(request, page=page)
    filters = context["filters"]
    if filters is not None:
        paginator = Paginator(page.rows(filters), PAGE_SIZE)
        page_obj = paginator.get_page(request.GET.get("page"))
        context["page_obj"] = page_obj
        context["table"] = [[(c, c.of(row)) for c in page.columns] for row in page_obj]
        context["chart_config"] = page.chart(filters)
        if slug == "reassignments":
            context["actions"] = pages.reassignment_actions(filters)
    return render(request, "analytics/chart.html", context)


class _Echo:
    def write(self, value: str) -> str:
        return value


def _csv_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return "" if value is None else value


@require_GET
def chart_csv(request: HttpRequest, slug: str) -> HttpResponse | StreamingHttpResponse:
    """Every row of the page's table for the chosen cluster and days (not just one page of it)."""
    page = pages.BY_SLUG.get(slug)
    if page is None:
        raise Http404("no such analytics page")
    filters, form, _ = _filters(request)
    if filters is None:
        return HttpResponse(
            f"Bad filters: {form.errors.as_text() or 'no cluster'}", status=400, content_type="text/plain"
        )
    writer = csv.writer(_Echo())

    def rows() -> Iterator[str]:
        yield writer.writerow([c.header for c in page.columns])
        for row in page.rows(filters).iterator(chunk_size=2000):
            yield writer.writerow([_csv_value(c.of(row)) for c in page.columns])

    name = f"{slug}-{filters.cluster}-{filters.since}-{filters.until}.csv"
    response = StreamingHttpResponse(rows(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response


@require_POST
def run_now(request: HttpRequest) -> HttpResponse:
    """Queue a run (admins only). One run at a time: the job saturates the machine anyway."""
    if not request.user.has_perm("analytics.run_analytics"):
        return HttpResponseForbidden("Only administrators can start analytics runs.")
    form = RunForm(request.POST)
    if not form.is_valid():
        messages.error(
            request, "Cannot start a run: " + "; ".join(str(e) for errs in form.errors.values() for e in errs)
        )
        return redirect("analytics:overview")
    active = AnalyticsRun.objects.filter(status__in=AnalyticsRun.ACTIVE).first()
    if active is not None:
        messages.error(request, f"Run #{active.pk} is still {active.status}; wait for it to finish.")
        return redirect("analytics:overview")
    data = form.cleaned_data
    cluster = (data.get("cluster") or "").strip()
    run = AnalyticsRun.objects.create(
        since=data["since"],
        until=data["until"],
        clusters=cluster,
        trigger=AnalyticsRun.Trigger.PAGE,
        requested_by=request.user if request.user.is_authenticated else None,
    )
    from dashboard.celery import app as celery_app

    try:
        result = celery_app.send_task(RUN_TASK, kwargs={"run_id": run.pk})
    except Exception as exc:  # broker down: say so now rather than leave a run queued forever
        logger.exception("could not queue analytics run %s", run.pk)
        AnalyticsRun.objects.filter(pk=run.pk).update(
            status=AnalyticsRun.Status.FAILED, error=f"could not queue the task: {exc}", finished_at=timezone.now()
        )
        messages.error(request, f"Could not queue the run: {exc}")
        return redirect("analytics:overview")
    AnalyticsRun.objects.filter(pk=run.pk).update(task_id=result.id or "")
    messages.success(request, f"Run #{run.pk} queued for {run.since}..{run.until}.")
    return redirect("analytics:overview")


@require_GET
def run_status(request: HttpRequest, pk: int) -> JsonResponse:
    run = get_object_or_404(AnalyticsRun, pk=pk)
    return JsonResponse(run.as_status())
