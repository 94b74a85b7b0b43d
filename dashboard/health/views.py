"""``/healthz``: JSON for machines, 200 when every dependency answers, 503 naming the ones that don't.

``/healthz?detail=1`` adds, for a logged-in user or a scraper with ``Authorization: Bearer
<METRICS_TOKEN>``, who hosts each registered cluster (mirror holder, lag, last sync, controller
candidates and the active one) and the hosting warnings (``dashboard.clusters.views.hosting``).
Anonymous callers get the plain answer: the detail names hosts and clusters.
"""

from __future__ import annotations

import hmac

import redis
from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from dashboard.health.checks import run_checks


def _may_see_detail(request: HttpRequest) -> bool:
    if request.user.is_authenticated:
        return True
    token = settings.METRICS_TOKEN
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return bool(token) and scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), token)


@login_not_required
@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    results = run_checks()
    healthy = all(r.ok for r in results)
    body: dict[str, object] = {
        "status": "ok" if healthy else "unavailable",
        "down": [r.name for r in results if not r.ok],
        "checks": {r.name: r.as_dict() for r in results},
    }
    if request.GET.get("detail"):
        if not _may_see_detail(request):
            body["hosting"] = {"error": "log in, or send Authorization: Bearer <METRICS_TOKEN>, for the detail"}
        else:
            from dashboard.accounts import roles
            from dashboard.clusters.snapshot import get_redis
            from dashboard.clusters.views.hosting import hosting_detail

            try:
                detail = hosting_detail(get_redis())
            except redis.RedisError as exc:
                body["hosting"] = {"error": f"Redis unavailable: {exc}"}
            else:
                if not roles.can_administer(request.user):
                    # The worker list (hosts, pids, filters) is the admins' hosting page's, not a
                    # viewer's or a monitoring token's: they get the per-cluster part and warnings.
                    detail.pop("workers", None)
                body["hosting"] = detail
    return JsonResponse(body, status=200 if healthy else 503)
