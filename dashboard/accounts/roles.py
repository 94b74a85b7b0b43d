"""The one place that says who may do what (issue #7, item 1).

Three roles, held as Django groups: *viewer* reads, *operator* also acts (preferred elections and
other cluster actions), *admin* also manages clusters and users. A superuser is an admin. Any active,
logged-in user without a group reads, as before roles existed (DESIGN §6: "viewers read").
"""

from __future__ import annotations

from typing import Any, Final

VIEWER: Final = "viewer"
OPERATOR: Final = "operator"
ADMIN: Final = "admin"
ROLES: Final = (VIEWER, OPERATOR, ADMIN)
_RANK: Final = {VIEWER: 0, OPERATOR: 1, ADMIN: 2}


def _active(user: Any) -> bool:
    return (
        user is not None and bool(getattr(user, "is_authenticated", False)) and bool(getattr(user, "is_active", False))
    )


def role_of(user: Any) -> str | None:
    """The highest role of ``user``, or None for anonymous and inactive users (runs a query)."""
    if not _active(user):
        return None
    if getattr(user, "is_superuser", False):
        return ADMIN
    names = set(user.groups.values_list("name", flat=True))
    for role in (ADMIN, OPERATOR):
        if role in names:
            return role
    return VIEWER


def has_role(user: Any, role: str) -> bool:
    current = role_of(user)
    return current is not None and _RANK[current] >= _RANK[role]


def can_view(user: Any) -> bool:
    return has_role(user, VIEWER)


def can_operate(user: Any) -> bool:
    return has_role(user, OPERATOR)


def can_administer(user: Any) -> bool:
    return has_role(user, ADMIN)


def ensure_groups(group_model: Any) -> list[str]:
    """Create the three groups where missing; returns the names created (used by the migration)."""
    created = []
    for name in ROLES:
        _, was_created = group_model.objects.get_or_create(name=name)
        if was_created:
            created.append(name)
    return created
