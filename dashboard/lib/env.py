"""Typed readers for settings that come from environment variables.

Why: every setting of a deployed dashboard comes from the environment (twelve-factor), and a typo in
a variable must fail loudly at start-up rather than silently fall back to a default.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_str(name: str, default: str) -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise ValueError(f"{name}={raw!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")


def env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw!r} is not an integer") from None


def env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def parse_database_url(url: str, base_dir: str) -> dict[str, Any]:
    """Turn ``sqlite:///path`` or ``postgres://user:pass@host:port/name?opt=v`` into a DATABASES entry."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        path = unquote(parts.path)
        if path.startswith("//"):  # sqlite:////abs/path
            name = path[1:]
        elif path in ("", "/"):
            raise ValueError("DATABASE_URL sqlite:/// needs a file name, e.g. sqlite:///var/db.sqlite3")
        else:
            name = os.path.join(base_dir, path.lstrip("/"))
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name, "OPTIONS": {"timeout": 20}}
    if scheme in {"postgres", "postgresql", "pgsql"}:
        options: Mapping[str, str] = dict(parse_qsl(parts.query))
        return {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": unquote(parts.path.lstrip("/")),
            "USER": unquote(parts.username or ""),
            "PASSWORD": unquote(parts.password or ""),
            "HOST": parts.hostname or "",
            "PORT": str(parts.port or ""),
            "OPTIONS": dict(options),
            "CONN_MAX_AGE": 60,
        }
    raise ValueError(f"DATABASE_URL scheme {scheme!r} is not supported (use sqlite:/// or postgres://)")
