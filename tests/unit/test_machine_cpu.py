"""scripts/support/machine_cpu.py: a window's figures come from the kernel's counters, by role."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from scripts.support.machine_cpu import MachineCpuWindow

pytestmark = pytest.mark.unit


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_role_gets_the_cpu_its_processes_used_and_the_machine_at_least_as_much() -> None:
    sleeper = subprocess.Popen(
        [sys.executable, "-c", "import time; print('asleep', flush=True); time.sleep(30)"], stdout=subprocess.PIPE
    )
    try:
        assert sleeper.stdout is not None and sleeper.stdout.readline() == b"asleep\n"  # its start-up done
        window = MachineCpuWindow({"spinner": [os.getpid()], "sleeper": [sleeper.pid]})
        _spin(0.3)
        used = window.stop()
    finally:
        sleeper.kill()
        sleeper.wait()
    assert 0.25 <= used.by_role["spinner"] <= 0.6  # 0.3 s of this thread, in 10 ms ticks, plus the test's own
    assert used.by_role["sleeper"] <= 0.02
    assert used.busy_s >= used.by_role["spinner"] - 0.02  # the kernel's two counters tick apart
    assert used.wall_s >= 0.29
    figures = used.as_dict()
    assert set(figures) == {"wall_s", "busy_cpu_s", "by_role_cpu_s", "others_cpu_s", "processes"}
    assert figures["processes"] == {"spinner": 1, "sleeper": 1}
    assert "spinner 0." in used.summary()


def test_a_process_gone_before_the_window_ends_counts_nothing_rather_than_failing() -> None:
    quick = subprocess.Popen([sys.executable, "-c", "pass"])
    window = MachineCpuWindow({"gone": [quick.pid]})
    quick.wait()
    used = window.stop()
    assert used.by_role == {"gone": 0.0}


def test_a_window_cut_at_an_earlier_end_counts_only_up_to_it() -> None:
    opened = time.perf_counter()
    window = MachineCpuWindow({"spinner": [os.getpid()]}, period_s=0.01)
    _spin(0.2)
    middle = time.perf_counter()
    _spin(0.2)
    whole, first_half = window.stop(), window.until(middle)
    # The reading nearest the cut: within a period, or a little more on a loaded machine.
    assert abs(first_half.wall_s - (middle - opened)) < 0.1 < whole.wall_s - first_half.wall_s
    assert 0.1 <= first_half.by_role["spinner"] < whole.by_role["spinner"] - 0.1
