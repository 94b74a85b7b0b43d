"""Create the first admin user once and print how to log in.

Why: README command one must leave a newcomer with working credentials without asking questions.
The password is random, stored (mode 0600) in ``var/admin-credentials.txt`` and printed on every
start, so it is never a well-known default.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Create the first admin user (random password, saved under var/) if there is no superuser yet."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    def handle(self, *args: Any, username: str, **options: Any) -> None:
        creds = Path(settings.VAR_DIR) / "admin-credentials.txt"
        user_model = get_user_model()
        if user_model.objects.filter(is_superuser=True).exists():
            if creds.exists():
                self.stdout.write(creds.read_text().strip())
            else:
                self.stdout.write("an admin user exists already (credentials not stored here)")
            return
        password = secrets.token_urlsafe(12)
        user_model.objects.create_superuser(username=username, email="", password=password)
        creds.parent.mkdir(parents=True, exist_ok=True)
        creds.write_text(f"username: {username}\npassword: {password}\n")
        creds.chmod(0o600)
        self.stdout.write(creds.read_text().strip())
