"""The suite's shared directories: a worker waiting for one never touches it before the lock is its.

``shared_dir`` rebuilds a directory whose build failed half-way (remove, then create), holding the
lock. A worker that created the directory before it waited once made the holder's ``mkdir`` fail
(FileExistsError in a Spark module's setup). The wait is observed in ``/proc/locks`` (a blocked
``flock`` is listed there with ``->``), not slept for.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from tests.integration.conftest import _locked


def _waiters_on(lock_file: Path) -> int:
    """Blocked lock requests on ``lock_file``'s inode (``/proc/locks`` lines marked ``->``)."""
    stat = os.stat(lock_file)
    inode = f"{os.major(stat.st_dev):02x}:{os.minor(stat.st_dev):02x}:{stat.st_ino}"
    with open("/proc/locks") as locks:
        return sum(1 for line in locks if "->" in line and line.split()[-3] == inode)


def test_a_waiting_worker_leaves_the_directory_to_the_holder(tmp_path: Path) -> None:
    entered = threading.Event()

    def second_worker() -> None:
        with _locked(tmp_path, "shared-x") as directory:
            assert directory.is_dir()
            entered.set()

    with _locked(tmp_path, "shared-x") as directory:
        directory.rmdir()  # the holder's rebuild: removed...
        waiter = threading.Thread(target=second_worker, daemon=True)
        waiter.start()
        deadline = time.monotonic() + 10.0
        while _waiters_on(tmp_path / "shared-x.lock") == 0:
            assert time.monotonic() < deadline, "the second worker never waited for the lock"
            time.sleep(0.01)
        assert not directory.exists()  # ...and not created behind its back by the one waiting
        directory.mkdir()  # ...then created again, as shared_dir does
        assert not entered.is_set()
    waiter.join(10.0)
    assert entered.is_set()
