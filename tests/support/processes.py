"""Subprocesses of the tests that run the real stack: ``manage.py`` commands, server teardown, a JVM's arguments."""

from __future__ import annotations

import subprocess
import sys
from io import StringIO
from pathlib import Path
from typing import Final

from scripts.support.django_manage import manage
from workers.local_processes import terminate_all

__all__ = ["CELERY_WORKER", "in_process", "jvm_arguments", "manage", "terminate_all"]

#: ``celery worker`` of the project's app, as the tests start it (options follow).
CELERY_WORKER: Final = (sys.executable, "-m", "celery", "-A", "dashboard", "worker")


def in_process(name: str, *args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py name *args`` run in this process (``call_command``), as a finished command's result.

    Why: a short command that reads no database (``demo_cluster kill``/``start``/``stop``/``status``)
    runs the same parser and code here without a Django start-up in a child (1-3 s each on the
    loaded 2-core box). A ``CommandError`` is exit code 1 with its message on stderr, as ``manage.py``
    prints it. Commands that read or write a stack's database keep using :func:`manage` in the
    stack's environment.
    """
    from django.core.management import CommandError, call_command

    out, err = StringIO(), StringIO()
    argv = [name, *args]
    try:
        call_command(name, *args, stdout=out, stderr=err)
    except CommandError as exc:
        return subprocess.CompletedProcess(argv, 1, out.getvalue(), f"{err.getvalue()}CommandError: {exc}\n")
    return subprocess.CompletedProcess(argv, 0, out.getvalue(), err.getvalue())


def jvm_arguments(pid: int, main_class: str) -> list[str]:
    """What the running JVM ``pid`` was given before ``main_class``: the arguments the JVM itself
    reads (its options), as opposed to its program's."""
    argv = [a.decode() for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0") if a]
    return argv[: argv.index(main_class)]
