"""Create the role groups viewer, operator and admin (dashboard.accounts.roles)."""

from __future__ import annotations

from typing import Any

from django.db import migrations

ROLES = ("viewer", "operator", "admin")  # frozen copy of dashboard.accounts.roles.ROLES


def create_groups(apps: Any, schema_editor: Any) -> None:
    group = apps.get_model("auth", "Group")
    for name in ROLES:
        group.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("actions", "0001_initial"), ("auth", "0012_alter_user_first_name_max_length")]

    operations = [migrations.RunPython(create_groups, migrations.RunPython.noop)]
