"""The development secret key file: generated once, whole, and the same for every process that races."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from dashboard.security.secrets import development_key


def test_it_is_generated_once_and_then_read(tmp_path: Path) -> None:
    key_file = tmp_path / "var" / "secret_key"
    first = development_key(key_file)
    assert len(first) >= 50 and key_file.read_text() == first
    assert key_file.stat().st_mode & 0o777 == 0o600
    assert development_key(key_file) == first
    assert [p.name for p in key_file.parent.iterdir()] == ["secret_key"]  # no temporary file left


def _settle(key_file: str, start: multiprocessing.synchronize.Event, out: multiprocessing.queues.Queue[str]) -> None:
    start.wait()
    out.put(development_key(Path(key_file)))


def test_processes_starting_together_all_get_the_same_whole_key(tmp_path: Path) -> None:
    """The race a fresh checkout's first start runs: with the key written in place, a process could
    read the file between its creation and its write and start with an empty key."""
    ctx = multiprocessing.get_context("fork")
    for attempt in range(5):
        key_file = tmp_path / str(attempt) / "secret_key"
        start, out = ctx.Event(), ctx.Queue()
        workers = [ctx.Process(target=_settle, args=(str(key_file), start, out)) for _ in range(8)]
        for w in workers:
            w.start()
        start.set()
        keys = [out.get(timeout=30) for _ in workers]
        for w in workers:
            w.join(timeout=30)
        assert len(set(keys)) == 1 and keys[0] == key_file.read_text(), (attempt, keys)


def test_an_empty_key_file_is_refused_with_what_to_do(tmp_path: Path) -> None:
    key_file = tmp_path / "secret_key"
    key_file.write_text("\n")
    with pytest.raises(RuntimeError, match="is empty: delete it"):
        development_key(key_file)
    assert key_file.read_text() == "\n"  # nothing changed
