"""``{{ user|can_administer }}`` and friends: the role checks of ``roles`` for templates (nav links)."""

from __future__ import annotations

from typing import Any

from django import template

from dashboard.accounts import roles

register = template.Library()


@register.filter
def can_operate(user: Any) -> bool:
    return roles.can_operate(user)


@register.filter
def can_administer(user: Any) -> bool:
    return roles.can_administer(user)
