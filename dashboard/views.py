"""Project-level pages: the home page every login lands on."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from dashboard.health.checks import run_checks


def home(request: HttpRequest) -> HttpResponse:
    """The stack at a glance: which services answer, so a newcomer knows the setup worked."""
    from dashboard.clusters.models import Cluster

    return render(request, "home.html", {"checks": run_checks(), "clusters": Cluster.objects.all()})
