"""What a newcomer sees on the analytics pages (issue #30): today by default, gaps where nothing is
known, the run's stages and the next scheduled runs. Database only: no Spark needed."""

from __future__ import annotations

import json
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard.analytics import models as M

pytestmark = [pytest.mark.django_db]


@pytest.fixture
def viewer(django_user_model: type[User]) -> Client:
    client = Client()
    client.force_login(django_user_model.objects.create_user("newcomer", password="x"))
    return client


def _day(cluster: str, day: date, topic: str = "orders") -> None:
    M.TopicAvailability.objects.create(
        cluster=cluster, day=day, topic=topic, partitions=3, availability=1.0,
        outages=0, recoveries=0, leaderless_s=0.0, recovery_s=0.0, mttr_s=None,
    )  # fmt: skip


def _chart(response: object) -> dict[str, object]:
    text = response.content.decode()  # type: ignore[attr-defined]
    found = re.search(r'<script id="chart-config" type="application/json">(.*?)</script>', text, re.S)
    assert found, "no chart config on the page"
    config: dict[str, object] = json.loads(found.group(1))
    return config


def test_the_overview_shows_today_and_the_next_scheduled_runs(viewer: Client) -> None:
    today = datetime.now(UTC).date()
    _day("demo", today - timedelta(days=30))  # an old result must not pull the range back
    _day("demo", today)
    page = viewer.get("/analytics/").content.decode()
    assert f"to {today.isoformat()} (UTC days)" in page
    assert 'data-next-run="analytics-current"' in page and 'data-next-run="analytics-nightly"' in page


def test_charts_show_a_gap_not_zeros_where_nothing_is_known(viewer: Client) -> None:
    today = datetime.now(UTC).date()
    first = today - timedelta(days=2)
    _day("demo", first)
    _day("demo", today)  # yesterday: no run covered it
    M.ElectionCount.objects.create(
        cluster="demo", day=today, strategy="offline", cause="BrokerChange", elections=4, unclean=0
    )
    since = (today - timedelta(days=4)).isoformat()
    config = _chart(viewer.get("/analytics/elections/", {"cluster": "demo", "since": since}))
    [dataset] = config["data"]["datasets"]  # type: ignore[index]
    # Four days before: nothing known (gap); first day: known, no elections (0); yesterday: gap; today: 4.
    assert dataset["data"] == [None, None, 0, None, 4]


def test_the_run_status_names_its_stage(viewer: Client) -> None:
    today = datetime.now(UTC).date()
    run = M.AnalyticsRun.objects.create(since=today, until=today, status=M.AnalyticsRun.Status.RUNNING, progress=0.3)
    assert viewer.get(f"/analytics/runs/{run.pk}/status.json").json()["stage"] == "compute"
    M.AnalyticsRun.objects.filter(pk=run.pk).update(progress=0.85)
    assert viewer.get(f"/analytics/runs/{run.pk}/status.json").json()["stage"] == "load"
    page = viewer.get("/analytics/").content.decode()
    assert 'data-stage-name="load" class="current"' in page
