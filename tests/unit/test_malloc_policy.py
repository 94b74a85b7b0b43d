"""``malloc_policy``: with glibc's mmap threshold fixed, a large block freed goes back to the operating
system even after an earlier large free (which, left to glibc, raises the threshold so that later
large blocks come from the heap and stay with the process). Each case runs in a fresh interpreter:
the setting is process-wide."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]

_SCRIPT = """
import sys
from controller_core import malloc_policy

def rss_mb():
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * 4096 / 2**20

applied = malloc_policy.give_large_blocks_back() if sys.argv[1] == "on" else False
first = bytearray(8 << 20)
del first  # glibc raises its dynamic threshold to 8 MB here
large, small = [], []
for _ in range(20):  # 4 MB blocks, each followed by a small block that keeps the heap's top in place
    large.append(bytearray(4 << 20))
    small.append(bytearray(600))
before = rss_mb()
del large
print(applied, round(before - rss_mb()))
"""


def _freed_mb(mode: str) -> tuple[str, int]:
    env = {k: v for k, v in os.environ.items() if k not in ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")}
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT, mode], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    return out[0], int(out[1])


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc, /proc")
def test_large_blocks_go_back_to_the_os_once_the_threshold_is_fixed() -> None:
    applied, freed = _freed_mb("on")
    if applied != "True":
        pytest.skip("not glibc: nothing to set")
    assert freed >= 60  # of the 80 MB freed
    _, kept = _freed_mb("off")
    assert kept < 20  # glibc's own dynamic threshold: the freed blocks stayed with the process


def test_an_operators_setting_is_left_alone() -> None:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    code = "from controller_core import malloc_policy; print(malloc_policy.give_large_blocks_back())"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == "False"
