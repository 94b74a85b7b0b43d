"""Refuse secret keys that would make signed sessions and CSRF tokens forgeable in production.

Why here and not only in ``check --deploy``: the check warns, but a dashboard that can force
leader elections must not start at all with a placeholder key. The rules are Django's own
(``security.W009``: at least 50 characters, at least 5 distinct, not ``django-insecure-``) plus the
placeholders people copy from examples.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import tempfile
from pathlib import Path
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


def development_key(key_file: Path) -> str:
    """The development secret key kept in ``key_file``, generated there by the first process to ask.

    Several processes start at once on a fresh checkout (``scripts/run``'s web process and workers,
    the test session's stacks), and each one settles the key as it imports the settings. Writing the
    file in place let another process read it empty between its creation and its write, and start
    with an empty ``SECRET_KEY`` (every request then failed with ImproperlyConfigured; seen in a
    browser test of a fresh clone's first run). So the key is written whole to a temporary file and
    linked into place: the name appears only with its content, and when two processes race, the
    loser's link fails and it reads the winner's key, so every process signs with the same one."""
    try:
        return _read_key(key_file)
    except FileNotFoundError:
        pass
    key_file.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".secret_key.", dir=key_file.parent)  # created 0600
    try:
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_urlsafe(50))
        with contextlib.suppress(FileExistsError):  # another process linked its key first: use that one
            os.link(tmp, key_file)
    finally:
        os.unlink(tmp)
    return _read_key(key_file)


def _read_key(key_file: Path) -> str:
    key = key_file.read_text().strip()
    if not key:
        raise RuntimeError(f"{key_file} is empty: delete it and a new development key is generated")
    return key
