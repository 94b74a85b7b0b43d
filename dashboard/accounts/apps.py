from typing import Any

from django.apps import AppConfig, apps
from django.db.models.signals import post_migrate


class _GroupsOn:
    """``Group`` with its manager bound to one database alias (``ensure_groups`` takes a model)."""

    def __init__(self, using: str) -> None:
        from django.contrib.auth.models import Group

        self.objects = Group.objects.db_manager(using)


def _ensure_role_groups(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    """The three role groups exist after every ``migrate`` and ``flush`` (both send post_migrate).

    A data migration creates them once (``actions.0002_role_groups``); a ``flush`` empties the table
    and migrations do not run again, so without this a flushed database (a transactional test's
    teardown, an operator's reset) has no roles and every role check refuses.
    """
    from dashboard.accounts.roles import ensure_groups

    ensure_groups(_GroupsOn(using))


class AccountsConfig(AppConfig):
    name = "dashboard.accounts"
    label = "accounts"
    verbose_name = "People"

    def ready(self) -> None:
        # Sent per app with models; this app has none, so hang it on auth's (whose tables it fills).
        post_migrate.connect(
            _ensure_role_groups, sender=apps.get_app_config("auth"), dispatch_uid="accounts-role-groups"
        )
