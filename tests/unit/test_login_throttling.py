"""Login brute force against the real login view: locked out, every attempt audited, nobody else affected.

The issue's target is 1,000 wrong passwords from one address. Past the limit every attempt takes the
same path (refused by axes, audited as locked out), so five times the limit proves what a thousand
would here; the thousand themselves, with what each attempt costs, are ``scripts/bench_login.py``
(its small mode is the last test below). The lock-out is django-axes (by client address,
settings.AXES_*); the audit rows are the dashboard's own LOGIN_FAILED actions.
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import Client

from dashboard.audit.models import Action
from scripts import bench_login

pytestmark = pytest.mark.django_db

ATTACKER = "203.0.113.66"
ATTEMPTS = 5 * int(settings.AXES_FAILURE_LIMIT)


def login(client: Client, username: str, password: str, address: str) -> int:
    response = client.post("/accounts/login/", {"username": username, "password": password}, REMOTE_ADDR=address)
    return int(response.status_code)


def test_wrong_passwords_from_one_address_past_the_limit_lock_it_out_and_only_it(django_user_model: type[User]) -> None:
    django_user_model.objects.create_user("alice", password="correct horse battery")
    django_user_model.objects.create_user("bob", password="staple battery horse")
    limit = int(settings.AXES_FAILURE_LIMIT)
    attacker = Client()
    statuses = [login(attacker, "alice", f"guess-{i}", ATTACKER) for i in range(ATTEMPTS)]

    # Wrong passwords are answered by the form (200) until the limit, then refused outright (429).
    assert statuses[: limit - 1] == [200] * (limit - 1)
    assert set(statuses[limit:]) == {429}
    # The right password from that address is refused too while the lock-out lasts.
    assert login(attacker, "alice", "correct horse battery", ATTACKER) == 429
    assert "_auth_user_id" not in attacker.session

    # Every attempt is audited, the locked-out ones marked as such.
    failed = Action.objects.filter(kind=Action.Kind.LOGIN_FAILED, parameters__ip=ATTACKER)
    assert failed.count() == ATTEMPTS + 1
    assert failed.filter(parameters__locked_out=True).count() >= ATTEMPTS + 1 - limit
    assert set(failed.values_list("username", flat=True)) == {"alice"}

    # Nobody else is affected: alice herself and bob log in from their own addresses.
    for username, password, address in (
        ("alice", "correct horse battery", "198.51.100.7"),
        ("bob", "staple battery horse", "198.51.100.8"),
    ):
        other = Client()
        assert login(other, username, password, address) == 302
        assert other.session["_auth_user_id"]
    assert Action.objects.filter(kind=Action.Kind.LOGIN, username__in=["alice", "bob"]).count() == 2


def test_a_success_before_the_limit_starts_the_count_again(django_user_model: type[User]) -> None:
    django_user_model.objects.create_user("carol", password="correct horse battery")
    limit = int(settings.AXES_FAILURE_LIMIT)
    client = Client()
    for _ in range(limit - 1):
        assert login(client, "carol", "typo", "192.0.2.10") == 200
    assert login(client, "carol", "correct horse battery", "192.0.2.10") == 302
    client.logout()
    for _ in range(limit - 1):
        assert login(client, "carol", "typo", "192.0.2.10") == 200


def test_the_benchmark_small_mode_reports_a_lockout_that_held(capsys: pytest.CaptureFixture[str]) -> None:
    limit = int(settings.AXES_FAILURE_LIMIT)
    assert bench_login.main(["--attempts", str(limit + 3), "--json"]) == 0
    figures = json.loads(capsys.readouterr().out)
    assert figures["lockout_held"] is True
    assert (figures["answered_by_form"], figures["refused_429"]) == (limit - 1, 4)  # the limit-th: 429 already
    assert figures["audit_rows"] == limit + 4 and figures["right_password_refused"] is True
    assert figures["after_limit_ms"]["p50"] > 0


def test_the_benchmark_refuses_attempts_that_never_reach_the_limit() -> None:
    with pytest.raises(SystemExit):
        bench_login.main(["--attempts", str(int(settings.AXES_FAILURE_LIMIT))])
