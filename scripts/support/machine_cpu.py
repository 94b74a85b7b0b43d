"""The whole machine's CPU over a benchmark figure's window, and which of the benchmark's processes used it.

A figure such as the controlled shutdown's is made by several processes on the same two cores: the
controller, ZooKeeper (every conditional write), the warm standby (it follows every write), the
broker agents (they decode the requests), the Redis the controller feeds. The controller's own CPU
says whether its Python bounds the figure; this says whether the machine does: when the processes a
figure needs used more CPU-seconds than ``cores x wall`` allows for a target wall time, that target
cannot be met on this machine whatever the controller does, and by how much each process stands in
the way shows where to look.

Linux only (``/proc``); the kernel counts in ticks of ``1 / SC_CLK_TCK`` s (10 ms here), so a
process's share of a sub-second window is good to about a hundredth of a CPU-second.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from scripts.devservices.process import process_cpu_seconds

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU-seconds every core of the machine has spent busy since boot (user, nice, system, irq, softirq)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(v) for v in fields[:7])
    return (user + nice + system + irq + softirq) * _TICK_S


def _process_cpu_s(pid: int) -> float | None:
    """User + system CPU-seconds of ``pid`` (every thread) so far; None once it is gone."""
    try:
        return process_cpu_seconds(pid)
    except OSError:
        return None


@dataclass(frozen=True)
class MachineCpu:
    """What the machine and each named group of processes spent in a :class:`MachineCpuWindow`."""

    wall_s: float
    busy_s: float
    by_role: dict[str, float]
    processes: dict[str, int]  # how many processes each role had when the window opened

    @property
    def others_s(self) -> float:
        """Busy CPU no named process accounts for: the benchmark's other processes, the OS, other jobs."""
        return max(self.busy_s - sum(self.by_role.values()), 0.0)

    def as_dict(self) -> dict[str, float | dict[str, float] | dict[str, int]]:
        return {
            "wall_s": round(self.wall_s, 3),
            "busy_cpu_s": round(self.busy_s, 2),
            "by_role_cpu_s": {role: round(cpu, 2) for role, cpu in self.by_role.items()},
            "others_cpu_s": round(self.others_s, 2),
            "processes": dict(self.processes),
        }

    def summary(self) -> str:
        """One line: the machine's busy CPU over the window, then each role's share."""
        cores = os.cpu_count() or 1
        parts = ", ".join(f"{role} {cpu:.2f}" for role, cpu in self.by_role.items())
        return (
            f"machine {self.busy_s:.2f} CPU-s busy in {self.wall_s:.3f} s ({cores} cores: "
            f"{self.busy_s / max(self.wall_s * cores, 1e-9):.0%} of them): {parts}, other {self.others_s:.2f}"
        )


class MachineCpuWindow:
    """Opened when a figure's clock starts; ``roles`` maps a role (``zookeeper``, ``controller``,
    ``standby``, ``agents``...) to its processes' ids, read when the window opens.

    A thread reads the counters every ``period_s`` until :meth:`stop`, so a figure whose end is only
    known afterwards (the broker failure's ends when ZooKeeper applied the last write, read from the
    znodes' mtimes once the benchmark has checked them) is cut at that end by :meth:`until`: the
    reading nearest to it, within a period. A reading is one ``/proc`` file per process (~30 us
    each), so at the default 20 ms the sampler costs the benchmark's process ~2 % of a core with a
    dozen processes. A process that exits inside the window counts nothing after its last reading.
    """

    def __init__(self, roles: Mapping[str, list[int]], period_s: float = 0.02) -> None:
        self.roles = {role: list(pids) for role, pids in roles.items()}
        self.period_s = period_s
        self._readings: list[tuple[float, float, dict[int, float | None]]] = [self._read()]
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="machine-cpu", daemon=True)
        self._thread.start()

    def _read(self) -> tuple[float, float, dict[int, float | None]]:
        cpu = {pid: _process_cpu_s(pid) for pids in self.roles.values() for pid in pids}
        return time.perf_counter(), machine_busy_s(), cpu

    def _sample(self) -> None:
        while not self._stopped.wait(self.period_s):
            self._readings.append(self._read())

    def stop(self) -> MachineCpu:
        """End the sampling with a last reading now; the window up to now."""
        self._stopped.set()
        self._thread.join()
        self._readings.append(self._read())
        return self.until(self._readings[-1][0])

    def until(self, end: float) -> MachineCpu:
        """The window from its opening to the reading nearest ``end`` (a ``time.perf_counter()`` value)."""
        first = self._readings[0]
        last = min(self._readings, key=lambda reading: abs(reading[0] - end))
        by_role: dict[str, float] = {}
        for role, pids in self.roles.items():
            used = 0.0
            for pid in pids:
                before, after = first[2].get(pid), last[2].get(pid)
                if before is not None and after is not None:
                    used += after - before
            by_role[role] = used
        processes = {role: len(pids) for role, pids in self.roles.items()}
        return MachineCpu(wall_s=last[0] - first[0], busy_s=last[1] - first[1], by_role=by_role, processes=processes)
