"""Run one ``manage.py`` command in a child process: its output, or an error that carries it.

Why a child process: the stack's set-up steps, the benchmarks' rigs and the tests that start the real
stack each configure Django through the environment they give the command (database, Redis,
ZooKeeper), never through the caller's own settings. Why one helper: they all need the same thing,
and a failed migration is diagnosed from what the command printed, which is easy to drop.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping

from scripts.devservices import REPO_ROOT

#: Long enough for migrations and password hashing on a loaded machine, short enough that a command
#: stuck on an unreachable service fails the run instead of hanging it.
TIMEOUT_S = 300.0


class ManageFailed(RuntimeError):
    """A ``manage.py`` command exited non-zero or did not finish; the message holds what it printed."""


def manage(env: Mapping[str, str], *args: str, timeout: float = TIMEOUT_S) -> str:
    """Run ``manage.py *args`` from the repository root in ``env``; its stdout.

    Raises ``ManageFailed`` naming the command, its exit code and everything it printed."""
    command = f"manage.py {' '.join(args)}"
    try:
        done = subprocess.run(
            [sys.executable, "manage.py", *args],
            env=dict(env),
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise ManageFailed(f"`{command}` did not finish within {timeout:g} s") from exc
    if done.returncode != 0:
        output = (done.stdout + done.stderr).strip() or "(no output)"
        raise ManageFailed(f"`{command}` failed with exit code {done.returncode}:\n{output}")
    return done.stdout
