"""How many bytes a run reads decides whether it runs as a small run (``job.py``, ``SMALL_INPUT_BYTES``)."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from workers.analytics import records as R
from workers.analytics.inputs import SMALL_INPUT_BYTES, JobConfig, discover, input_bytes, state_root

D1, D2, D3 = date(2024, 1, 1), date(2024, 1, 2), date(2024, 1, 3)


def _log(base: Path, day: date, size: int) -> Path:
    path = base / "demo" / R.file_name_for(day)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


def test_it_counts_the_log_files_and_compacted_days_a_run_reads(tmp_path: Path) -> None:
    logs, compacted = tmp_path / "logs", tmp_path / "compacted"
    _log(logs, D1, 100)  # compacted below: its Parquet is read instead
    _log(logs, D2, 2_000)
    _log(logs, D3, 30_000)  # after the window: not read
    day = compacted / "cluster=demo" / f"date={D1.isoformat()}"
    day.mkdir(parents=True)
    (day / "part-0.parquet").write_bytes(b"p" * 400)
    (day / "_SUCCESS").write_bytes(b"")
    config = JobConfig(input_dir=logs, output_dir=tmp_path / "out", since=D2, until=D2, compacted_dir=compacted)
    # No checkpoint before D2: day 1 is read again as warm-up, from its compacted files.
    assert input_bytes(discover(config)) == 400 + 2_000


def test_a_cursor_run_counts_only_the_bytes_after_its_cursor(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    _log(logs, D1, 50_000)
    tail = tmp_path / "slice.jsonl"
    tail.write_bytes(b"y" * 300)
    root = state_root(tmp_path / "out", at_ms=1_704_067_200_000)
    root.mkdir(parents=True)
    (root / "_complete-demo").write_text("")
    config = JobConfig(
        input_dir=logs,
        output_dir=tmp_path / "out",
        since=D1,
        until=D1,
        from_ms=1_704_067_200_000,
        now_ms=1_704_067_500_000,
        snapshots=(("demo", tail),),
    )
    clusters = discover(config)
    assert input_bytes(clusters) == 300 <= config.small_input_bytes == SMALL_INPUT_BYTES
