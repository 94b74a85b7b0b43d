"""Typed readers for settings that come from environment variables.

Why: every setting of a deployed dashboard comes from the environment (twelve-factor), and a typo in
a variable must fail loudly at start-up rather than silently fall back to a default.
"""

from __future__ import annotations

import os
from typing import Any, Final
from urllib.parse import urlsplit

import dj_database_url

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


SUPPORTED_DATABASES: Final = {"django.db.backends.sqlite3", "django.db.backends.postgresql"}


def parse_database_url(url: str, base_dir: str, conn_max_age: int = 0) -> dict[str, Any]:
    """Turn ``sqlite:///path`` or ``postgres://user:pass@host:port/name?opt=v`` into a DATABASES entry.

    Parsed by dj-database-url (percent-decoding of every part, including a Unix-socket host written
    ``%2Fvar%2Frun%2Fpostgresql``, and query options). What this adds: a relative SQLite path is
    relative to the checkout (not the working directory), SQLite waits 20 s on a locked database,
    and only the two databases the project is tested on are accepted.

    ``conn_max_age`` defaults to 0 (a connection per request) because the dashboard runs under
    Daphne (ASGI): Django's docs advise against persistent connections there, as each request runs
    sync code in a thread of its own and a kept connection is never reused, only leaked until the
    server's limit. ``CONN_HEALTH_CHECKS`` makes a kept connection (a Celery worker with
    ``DATABASE_CONN_MAX_AGE`` > 0) be checked before reuse.
    """
    if urlsplit(url).scheme.lower() == "pgsql":
        url = "postgres" + url[len("pgsql") :]
    try:
        config: dict[str, Any] = dict(dj_database_url.parse(url, conn_max_age=conn_max_age, conn_health_checks=True))
    except ValueError as exc:
        raise ValueError(f"DATABASE_URL {url.split('@')[-1]!r} is not usable: {exc}") from None
    engine = config.get("ENGINE", "")
    if engine not in SUPPORTED_DATABASES:
        scheme = urlsplit(url).scheme
        raise ValueError(f"DATABASE_URL scheme {scheme!r} is not supported (use sqlite:/// or postgres://)")
    if engine == "django.db.backends.sqlite3":
        name = str(config.get("NAME", ""))
        if name in ("", ":memory:"):
            raise ValueError("DATABASE_URL sqlite:/// needs a file name, e.g. sqlite:///var/db.sqlite3")
        config["NAME"] = name if os.path.isabs(name) else os.path.join(base_dir, name)
        config["OPTIONS"] = {"timeout": 20, **config.get("OPTIONS", {})}
    else:
        config["PORT"] = str(config.get("PORT") or "")
    return config
