"""Create the viewer / operator / admin groups where missing (the data migration does it too)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from dashboard.accounts.roles import ROLES, ensure_groups


class Command(BaseCommand):
    help = "Create the role groups viewer, operator and admin if they do not exist."

    def handle(self, *args: Any, **options: Any) -> None:
        created = ensure_groups(Group)
        self.stdout.write(f"roles: {', '.join(ROLES)} (created: {', '.join(created) or 'none'})")
