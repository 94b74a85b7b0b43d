"""The analytics pages' tables and CSVs come from one declaration of how each result attribute is
shown (``pages.COLUMNS``): the same header on every page, availability as a percentage in both the
table and the CSV. Database only: no Spark needed."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest
from django.contrib.auth.models import User
from django.test import Client

from dashboard.analytics import models as M
from dashboard.analytics import pages

pytestmark = [pytest.mark.django_db]


def test_every_page_shows_known_attributes_once() -> None:
    for page in pages.PAGES:
        values = [c.value for c in page.columns]
        assert len(values) == len(set(values)), page.slug
    assert [c.header for c in pages.BY_SLUG["mttr"].columns][:3] == ["Day", "Broker lost", "Outages started"]
    with pytest.raises(KeyError):
        pages.columns("no_such_attribute")


def test_the_table_and_the_csv_show_availability_as_a_percentage(django_user_model: type[User]) -> None:
    client = Client()
    client.force_login(django_user_model.objects.create_user("reader", password="x"))
    today = datetime.now(UTC).date()
    M.TopicAvailability.objects.create(
        cluster="demo", day=today, topic="orders", partitions=3, availability=0.75,
        outages=1, recoveries=1, leaderless_s=12.0, recovery_s=12.0, mttr_s=12.0,
    )  # fmt: skip
    query = {"cluster": "demo", "since": today.isoformat(), "until": today.isoformat()}
    page = client.get("/analytics/availability/", query).content.decode()
    assert "<th>Day</th><th>Topic</th>" in page and "75" in page
    rows = list(csv.reader(io.StringIO(b"".join(client.get("/analytics/availability.csv", query)).decode())))
    assert rows[0] == [c.header for c in pages.BY_SLUG["availability"].columns]
    assert rows[1][:4] == [today.isoformat(), "orders", "3", "75.0"]
