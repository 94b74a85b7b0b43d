"""Subprocesses of the tests that run the real stack: ``manage.py`` commands and server teardown."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable

from scripts.devservices import REPO_ROOT
from scripts.web_processes import stop_all


def manage(env: dict[str, str], *args: str) -> str:
    """Run ``manage.py *args`` in ``env``; its stdout, or fail the test with its output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args], env=env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise AssertionError(f"manage.py {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def terminate_all(procs: Iterable[subprocess.Popen[bytes]], timeout: float = 10.0) -> None:
    """SIGTERM every process at once, then wait for each, SIGKILLing any still there after ``timeout``."""
    stop_all(procs, timeout)
