"""Audit rows keep bad input that holds NUL characters (PostgreSQL's text and jsonb refuse U+0000)."""

from __future__ import annotations

import pytest

from dashboard.audit.models import Action

pytestmark = pytest.mark.django_db


def test_nul_characters_are_stored_as_the_replacement_character() -> None:
    row = Action.objects.create(
        kind=Action.Kind.PREFERRED_ELECTION,
        status=Action.Status.REJECTED,
        username="fuzz\x00er",
        parameters={"partition": "\x82\x00", "nested": [{"k\x00": "v\x00"}], "n": 3},
        reason="why\x00",
        error="partition must be a non-negative whole number",
    )
    stored = Action.objects.get(pk=row.pk)
    assert stored.parameters == {"partition": "\x82\ufffd", "nested": [{"k\ufffd": "v\ufffd"}], "n": 3}
    assert (stored.username, stored.reason) == ("fuzz\ufffder", "why\ufffd")
