"""Settings come from the environment and fail loudly on bad values."""

from __future__ import annotations

import pytest

from dashboard.lib.env import env_bool, env_int, parse_database_url


def test_sqlite_url_is_relative_to_the_checkout() -> None:
    db = parse_database_url("sqlite:///var/db.sqlite3", "/srv/app")
    assert db["ENGINE"] == "django.db.backends.sqlite3"
    assert db["NAME"] == "/srv/app/var/db.sqlite3"


def test_sqlite_absolute_path() -> None:
    assert parse_database_url("sqlite:////tmp/x.db", "/srv")["NAME"] == "/tmp/x.db"


def test_postgres_url() -> None:
    db = parse_database_url("postgres://ops:s%40cret@db.internal:6432/control?sslmode=require", "/srv")
    assert db["ENGINE"] == "django.db.backends.postgresql"
    assert (db["NAME"], db["USER"], db["PASSWORD"], db["HOST"], db["PORT"]) == (
        "control",
        "ops",
        "s@cret",
        "db.internal",
        "6432",
    )
    assert db["OPTIONS"] == {"sslmode": "require"}


@pytest.mark.parametrize("url", ["mysql://x/y", "sqlite:///"])
def test_unsupported_database_urls_are_rejected(url: str) -> None:
    with pytest.raises(ValueError):
        parse_database_url(url, "/srv")


def test_env_bool_rejects_typos(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_FLAG", "treu")
    with pytest.raises(ValueError, match="X_FLAG"):
        env_bool("X_FLAG", False)
    monkeypatch.setenv("X_FLAG", "Yes")
    assert env_bool("X_FLAG", False) is True


def test_env_int(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("X_NUM", "12")
    assert env_int("X_NUM", 3) == 12
    monkeypatch.setenv("X_NUM", "twelve")
    with pytest.raises(ValueError, match="X_NUM"):
        env_int("X_NUM", 3)


def test_a_percent_encoded_socket_host_is_decoded() -> None:
    db = parse_database_url("postgres://ops@%2Fvar%2Frun%2Fpostgresql/control", "/srv")
    assert db["HOST"] == "/var/run/postgresql"
    assert (db["NAME"], db["USER"], db["PORT"]) == ("control", "ops", "")


def test_connections_are_not_kept_under_asgi_unless_asked() -> None:
    """Django's docs: persistent connections leak under ASGI (each request's sync code has its own thread)."""
    assert parse_database_url("postgres://ops@db/control", "/srv")["CONN_MAX_AGE"] == 0
    kept = parse_database_url("postgres://ops@db/control", "/srv", conn_max_age=30)
    assert (kept["CONN_MAX_AGE"], kept["CONN_HEALTH_CHECKS"]) == (30, True)


def test_the_running_settings_keep_no_connection(settings: object) -> None:
    assert settings.DATABASES["default"]["CONN_MAX_AGE"] == 0  # type: ignore[attr-defined]
