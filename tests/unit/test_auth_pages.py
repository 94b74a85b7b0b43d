"""Every page but /healthz and the login page needs a login."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

pytestmark = pytest.mark.django_db


def test_home_redirects_anonymous_users_to_login(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/accounts/login/?next=/")


def test_admin_site_needs_login_too(client: Client) -> None:
    assert client.get("/admin/").status_code == 302


def test_login_page_is_public_and_has_csrf(client: Client) -> None:
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    assert b"csrfmiddlewaretoken" in response.content


def test_login_with_csrf_enforced(django_user_model: type[User]) -> None:
    django_user_model.objects.create_user("alice", password="correct horse battery")
    strict = Client(enforce_csrf_checks=True)
    assert (
        strict.post("/accounts/login/", {"username": "alice", "password": "correct horse battery"}).status_code == 403
    )
    page = strict.get("/accounts/login/")
    token = page.cookies["csrftoken"].value
    response = strict.post(
        "/accounts/login/",
        {"username": "alice", "password": "correct horse battery", "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302
    assert response["Location"] == "/"


def test_wrong_password_is_refused(client: Client, django_user_model: type[User]) -> None:
    django_user_model.objects.create_user("alice", password="correct horse battery")
    response = client.post("/accounts/login/", {"username": "alice", "password": "nope"})
    assert response.status_code == 200
    assert b"didn&#x27;t match" in response.content or b"didn't match" in response.content


def test_ensure_admin_creates_one_admin_with_a_random_password(
    settings: object, tmp_path: Path, capsys: pytest.CaptureFixture[str], django_user_model: type[User]
) -> None:
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]
    call_command("ensure_admin")
    first = capsys.readouterr().out
    assert "username: admin" in first
    password = first.split("password:")[1].split()[0]
    assert len(password) >= 12
    assert django_user_model.objects.get(username="admin").check_password(password)
    assert (tmp_path / "admin-credentials.txt").stat().st_mode & 0o777 == 0o600
    call_command("ensure_admin")  # idempotent: same credentials, no second user
    assert capsys.readouterr().out == first
    assert django_user_model.objects.filter(is_superuser=True).count() == 1
