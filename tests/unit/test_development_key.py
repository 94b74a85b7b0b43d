"""The development secret key file: generated once, whole, and the same for every process that races."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from dashboard.security import secrets as secrets_module
from dashboard.security.secrets import development_key


def test_it_is_generated_once_and_then_read(tmp_path: Path) -> None:
    key_file = tmp_path / "var" / "secret_key"
    first = development_key(key_file)
    assert len(first) >= 50 and key_file.read_text() == first
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert development_key(key_file) == first
    assert [p.name for p in key_file.parent.iterdir()] == ["secret_key"]  # no temporary file left


#: A racer: loads the settings' key module by its path (not through the ``dashboard`` package,
#: which imports Celery: ~0.15 s a process), says it is ready, waits for the start line, settles.
_RACER = """
import importlib.util, sys
from pathlib import Path
spec = importlib.util.spec_from_file_location("key_module", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print("ready", flush=True)
sys.stdin.readline()
print(module.development_key(Path(sys.argv[2])), flush=True)
"""


def test_processes_starting_together_all_get_the_same_whole_key(tmp_path: Path) -> None:
    """The race a fresh checkout's first start runs: with the key written in place, a process could
    read the file between its creation and its write and start with an empty key.

    The racers are fresh interpreters, not forks of this test process: a fork of an xdist worker
    inherits its threads' locks and once hung in a loaded run."""
    for attempt in range(5):
        key_file = tmp_path / str(attempt) / "secret_key"
        racers = [
            subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _RACER, secrets_module.__file__, str(key_file)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(8)
        ]
        try:
            for racer in racers:  # every one imported and waiting: the start line releases them together
                assert racer.stdout is not None and racer.stdout.readline() == "ready\n", racer.communicate()
            for racer in racers:
                assert racer.stdin is not None
                racer.stdin.write("go\n")
                racer.stdin.flush()
            answers = [racer.communicate(timeout=60) for racer in racers]
        finally:
            for racer in racers:
                racer.kill()
        keys = [out.strip() for out, _ in answers]
        assert all(racer.returncode == 0 for racer in racers), answers
        assert len(set(keys)) == 1 and keys[0] == key_file.read_text(), (attempt, keys)


def test_an_empty_key_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    key_file = tmp_path / "secret_key"
    key_file.write_text("\n")
    with pytest.raises(RuntimeError, match="is empty: delete it"):
        development_key(key_file)
    assert key_file.read_text() == "\n"  # nothing changed
