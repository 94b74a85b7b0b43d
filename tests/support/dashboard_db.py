"""One ``manage.py migrate`` per test session: every dashboard the tests start gets a copy of its database.

Why: migrating a fresh SQLite file is a Django start-up plus every migration (4-5 s on the 2-core CI
box under load), and each browser stack and Celery rig did it again. The template is written by a
real ``manage.py migrate`` subprocess once (the session fixture ``migrated_db_template`` in
tests/conftest.py); a byte copy of that file is the same migrated database, so the stacks stay real.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from tests.support.processes import manage

SQLITE_PREFIX = "sqlite:///"


def sqlite_file(env: dict[str, str]) -> Path:
    """The SQLite file of ``env``'s ``DATABASE_URL``; an error for any other database."""
    url = env.get("DATABASE_URL", "")
    if not url.startswith(SQLITE_PREFIX):
        raise ValueError(f"a migrated template is a SQLite file; DATABASE_URL is {url!r}")
    return Path(url.removeprefix(SQLITE_PREFIX))


def migrate_template(directory: Path) -> Path:
    """Run ``manage.py migrate`` into ``directory/db.sqlite3`` (its ``var`` there too); the file."""
    db = directory / "db.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": SQLITE_PREFIX + str(db),
        "VAR_DIR": str(directory / "var"),
    }
    manage(env, "migrate", "--noinput", "-v", "0")
    return db


def install_migrated(template: Path, env: dict[str, str]) -> None:
    """Copy the migrated ``template`` to ``env``'s database file (which must not exist yet)."""
    target = sqlite_file(env)
    if target.exists():
        raise FileExistsError(f"{target} exists: a stack installs its database once, before it starts")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, target)


def register_cluster_and_user(
    env: dict[str, str], *, cluster: str, zookeeper: str, mode: str, user: str, password: str, group: str | None
) -> None:
    """Register ``cluster`` through the real ``ensure_cluster`` command (``call_command``) and create
    ``user`` (in ``group`` when given), in one ``manage.py`` process.

    Why one process: each is a Django start-up, seconds under load, and the browser stacks run this
    while daphne and the workers start (neither reads the database before its first request or task).
    """
    join = f"User.objects.get(username={user!r}).groups.add(Group.objects.get(name={group!r}))" if group else "None"
    manage(
        env,
        "shell",
        "-c",
        "from django.core.management import call_command; "
        "from django.contrib.auth.models import Group, User; "
        f"call_command('ensure_cluster', '--name', {cluster!r}, '--zookeeper', {zookeeper!r}, '--mode', {mode!r}); "
        f"User.objects.create_user({user!r}, password={password!r}); "
        f"{join}",
    )
