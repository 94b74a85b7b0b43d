"""Subprocesses of the tests that run the real stack: ``manage.py`` commands and server teardown."""

from __future__ import annotations

import subprocess
import sys
from typing import Final

from scripts.devservices import REPO_ROOT
from workers.local_processes import terminate_all

__all__ = ["CELERY_WORKER", "manage", "terminate_all"]

#: ``celery worker`` of the project's app, as the tests start it (options follow).
CELERY_WORKER: Final = (sys.executable, "-m", "celery", "-A", "dashboard", "worker")


def manage(env: dict[str, str], *args: str) -> str:
    """Run ``manage.py *args`` in ``env``; its stdout, or fail the test with its output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout
