"""Refuse secret keys that would make signed sessions and CSRF tokens forgeable in production.

Why here and not only in ``check --deploy``: the check warns, but a dashboard that can force
leader elections must not start at all with a placeholder key. The rules are Django's own
(``security.W009``: at least 50 characters, at least 5 distinct, not ``django-insecure-``) plus the
placeholders people copy from examples.
"""

from __future__ import annotations

from typing import Final

MIN_LENGTH: Final = 50
MIN_UNIQUE: Final = 5
_PLACEHOLDERS: Final = ("change-me", "changeme", "secret", "replace-me", "your-secret-key", "example")


def weak_secret_reason(key: str) -> str:
    """Why ``key`` is unfit for production, or ``""`` when it is fine."""
    if key.startswith("django-insecure-"):
        return "it is a development key (starts with 'django-insecure-')"
    lowered = key.lower()
    if any(lowered.startswith(p) or lowered.endswith(p) for p in _PLACEHOLDERS):
        return "it is an example placeholder"
    if len(key) < MIN_LENGTH:
        return f"it has {len(key)} characters (at least {MIN_LENGTH} needed)"
    if len(set(key)) < MIN_UNIQUE:
        return f"it has fewer than {MIN_UNIQUE} distinct characters"
    return ""
