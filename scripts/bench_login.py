"""Login brute force at scale: a thousand wrong passwords from one address against the real login view.

The test suite proves the lock-out (django-axes by client address) and its audit rows with a few
dozen attempts past the limit (tests/unit/test_login_throttling.py): after the limit every attempt
takes the same path. This keeps the issue's full figure measured: ``--attempts`` wrong passwords
(1,000 by default) through Django's test client, each answered by the form until the limit and
refused (429) after it, the right password refused while locked out, one audit row per attempt;
and what an attempt costs before and after the lock-out.

Run on its own it migrates a fresh SQLite database in a temporary directory and hashes with the
product's settings (Django's full PBKDF2 work factor); imported into a process where Django is
already set up (the test suite's small mode), it uses that process's database and settings.
Exit 1 when the lock-out did not hold.

Usage::

    .venv/bin/python scripts/bench_login.py [--attempts 1000] [--json]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))

ATTACKER = "203.0.113.66"
PASSWORD = "correct horse battery"


def _set_up_django(directory: Path) -> None:
    """Configure Django on a fresh SQLite file in ``directory`` and migrate it (standalone runs only)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    os.environ["DATABASE_URL"] = f"sqlite:///{directory / 'db.sqlite3'}"
    os.environ["VAR_DIR"] = str(directory / "var")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    logging.getLogger("django.request").setLevel(logging.ERROR)  # not a warning line per refused attempt


def _ms(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "max": 0.0}
    return {"p50": round(statistics.median(values) * 1000, 2), "max": round(max(values) * 1000, 2)}


def measure(attempts: int, username: str = "bench-alice") -> dict[str, Any]:
    """``attempts`` wrong passwords for ``username`` from one address, then the right one; the figures."""
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.test import Client

    from dashboard.audit.models import Action

    User.objects.create_user(username, password=PASSWORD)
    limit = int(settings.AXES_FAILURE_LIMIT)
    client = Client(HTTP_HOST="127.0.0.1")  # an allowed host of the product's settings (not 'testserver')
    statuses: list[int] = []
    seconds: list[float] = []
    started = time.monotonic()
    for i in range(attempts):
        began = time.monotonic()
        response = client.post(
            "/accounts/login/", {"username": username, "password": f"guess-{i}"}, REMOTE_ADDR=ATTACKER
        )
        seconds.append(time.monotonic() - began)
        statuses.append(int(response.status_code))
    wall_s = time.monotonic() - started
    right = client.post("/accounts/login/", {"username": username, "password": PASSWORD}, REMOTE_ADDR=ATTACKER)
    audited = Action.objects.filter(kind=Action.Kind.LOGIN_FAILED, parameters__ip=ATTACKER, username=username)
    held = (
        statuses[: limit - 1] == [200] * (limit - 1)
        and set(statuses[limit:]) == {429}
        and int(right.status_code) == 429
        and "_auth_user_id" not in client.session
        and audited.count() == attempts + 1
    )
    return {
        "attempts": attempts,
        "failure_limit": limit,
        "answered_by_form": statuses.count(200),
        "refused_429": statuses.count(429),
        "right_password_refused": int(right.status_code) == 429,
        "audit_rows": audited.count(),
        "audit_rows_locked_out": audited.filter(parameters__locked_out=True).count(),
        "lockout_held": held,
        "wall_s": round(wall_s, 2),
        "attempts_per_s": round(attempts / wall_s, 1) if wall_s > 0 else 0.0,
        "before_limit_ms": _ms(seconds[:limit]),
        "after_limit_ms": _ms(seconds[limit:]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="A login brute force from one address: lock-out and per-attempt cost.")
    parser.add_argument("--attempts", type=int, default=1_000)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    if args.attempts < 1:
        parser.error("--attempts must be at least 1")
    from django.apps import apps

    with tempfile.TemporaryDirectory(prefix="bench-login-") as tmp:
        if not apps.ready:
            print(f"migrating a fresh database in {tmp} ...", file=sys.stderr, flush=True)
            _set_up_django(Path(tmp))
        if args.attempts <= int(_failure_limit()):
            parser.error(f"--attempts must be above the lock-out limit ({_failure_limit()})")
        figures = measure(args.attempts)
    if args.json:
        print(json.dumps(figures))
    else:
        print(
            f"{figures['attempts']:,} wrong passwords from one address (limit {figures['failure_limit']}): "
            f"{figures['answered_by_form']} answered by the form, {figures['refused_429']} refused (429), "
            f"right password refused: {figures['right_password_refused']}, {figures['audit_rows']} audit rows; "
            f"{figures['attempts_per_s']} attempts/s, per attempt before the limit p50 "
            f"{figures['before_limit_ms']['p50']} ms, after p50 {figures['after_limit_ms']['p50']} ms; "
            f"lock-out held: {figures['lockout_held']}"
        )
    return 0 if figures["lockout_held"] else 1


def _failure_limit() -> int:
    from django.conf import settings

    return int(settings.AXES_FAILURE_LIMIT)


if __name__ == "__main__":
    raise SystemExit(main())
