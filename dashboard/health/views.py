"""``/healthz``: JSON for machines, 200 when every dependency answers, 503 naming the ones that don't."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from dashboard.health.checks import run_checks


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    results = run_checks()
    healthy = all(r.ok for r in results)
    body = {
        "status": "ok" if healthy else "unavailable",
        "down": [r.name for r in results if not r.ok],
        "checks": {r.name: r.as_dict() for r in results},
    }
    return JsonResponse(body, status=200 if healthy else 503)
