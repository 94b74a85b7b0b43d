"""The role groups survive a ``flush``: without them every role check refuses (accounts' post_migrate)."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group
from django.core.management import call_command

from dashboard.accounts.roles import ROLES

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_flushed_database_still_has_every_role_group() -> None:
    call_command("flush", interactive=False, verbosity=0)  # a transactional test's teardown does this
    assert sorted(Group.objects.values_list("name", flat=True)) == sorted(ROLES)
