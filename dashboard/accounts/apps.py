from typing import Any

from django.apps import AppConfig
from django.apps import apps as global_apps
from django.apps.registry import Apps
from django.db.models.signals import post_migrate


class _GroupsOn:
    """The migration state's ``Group`` with its manager bound to one database alias."""

    def __init__(self, group_model: Any, using: str) -> None:
        self.objects = group_model.objects.db_manager(using)


def _ensure_role_groups(sender: AppConfig, using: str = "default", apps: Apps | None = None, **kwargs: Any) -> None:
    """The three role groups exist after every ``migrate`` and ``flush`` (both send post_migrate).

    A data migration creates them once (``actions.0002_role_groups``); a ``flush`` empties the table
    and migrations do not run again, so without this a flushed database (a transactional test's
    teardown, an operator's reset) has no roles and every role check refuses. The model comes from
    the migration state the signal carries (as Django's own ``create_permissions`` does): after a
    ``migrate auth zero`` there is no ``Group`` and nothing to do.
    """
    from dashboard.accounts.roles import ensure_groups

    registry = apps if apps is not None else global_apps  # flush sends no migration state
    try:
        group_model = registry.get_model("auth", "Group")
    except LookupError:
        return
    ensure_groups(_GroupsOn(group_model, using))


class AccountsConfig(AppConfig):
    name = "dashboard.accounts"
    label = "accounts"
    verbose_name = "People"

    def ready(self) -> None:
        # Sent per app with models; this app has none, so hang it on auth's (whose tables it fills).
        post_migrate.connect(
            _ensure_role_groups, sender=global_apps.get_app_config("auth"), dispatch_uid="accounts-role-groups"
        )
