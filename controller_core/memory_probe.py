"""Where a failover's memory goes, phase by phase and by allocation site: an opt-in probe, off in production.

The controller's peak RSS at a million partitions is set by what a failover builds after the read (the
state machines' start-up, the requests and their encodings, the snapshot record), not by the context it
keeps, and only a per-phase profile tells those apart. With ``CONTROLLER_MEMORY_PROBE=DIR`` in its
environment a controller process appends to ``DIR/memory-<pid>.txt``, at the start and the end of each
failover phase (``phase_done``) and 1, 3, 10 and 30 s after the failover (while the senders encode and
deliver its requests): its RSS now (``VmRSS``) and its peak *during the phase* (``VmHWM``, reset after
each line through ``/proc/self/clear_refs``), so a phase's transient shows as its peak minus what stays.

``CONTROLLER_MEMORY_PROBE_FRAMES=N`` (N >= 1) also starts ``tracemalloc`` when this module is imported,
and each line then adds the traced memory, its peak in the phase and the 25 source lines that hold the
most. Tracing slows the process ~2 to 3 x, ~20 s a line at 200,000 partitions, and its own tables add
to RSS (the RSS-only mode, the default, adds nothing measurable).

Off (the variable unset), ``phase_done`` is one test of a module global: the failover calls it about a
dozen times.
"""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
from pathlib import Path

ENV = "CONTROLLER_MEMORY_PROBE"
FRAMES_ENV = "CONTROLLER_MEMORY_PROBE_FRAMES"
TOP_LINES = 25
AFTER_FAILOVER_S = (1.0, 3.0, 10.0, 30.0)

_out_dir: Path | None = Path(os.environ[ENV]) if os.environ.get(ENV) else None
_frames = int(os.environ.get(FRAMES_ENV, "0") or 0)
if _out_dir is not None and _frames > 0 and not tracemalloc.is_tracing():
    tracemalloc.start(_frames)
_lock = threading.Lock()


def enabled() -> bool:
    """Whether this process profiles its failovers (``CONTROLLER_MEMORY_PROBE`` was set at import)."""
    return _out_dir is not None


def phase_done(name: str) -> None:
    """Append the memory figures at the end of phase ``name``; no-op when the probe is off."""
    if _out_dir is None:
        return
    with _lock:
        _write(_out_dir, name)


def failover_done() -> None:
    """The failover event's last phase line (its record and the topics' watches), then lines 1, 3, 10
    and 30 s later from a timer thread (the requests' encodings and deliveries happen on the senders
    after the failover, and the state-snapshot record once they are answered: its own line,
    ``state_snapshot_record``); no-op when the probe is off."""
    if _out_dir is None:
        return
    phase_done("failover_record_and_topic_watches")
    started = time.monotonic()

    def later() -> None:
        for at in AFTER_FAILOVER_S:
            time.sleep(max(0.0, started + at - time.monotonic()))
            phase_done(f"after_failover_{at:g}s")

    threading.Thread(target=later, name="memory-probe", daemon=True).start()


def _write(out_dir: Path, name: str) -> None:
    started = time.perf_counter()
    status = _proc_status()
    rss, peak_rss = status.get("VmRSS", 0) / 1024, status.get("VmHWM", 0) / 1024
    lines = [f"== {name}: VmRSS {rss:.0f} MB, VmHWM in phase {peak_rss:.0f} MB"]
    if tracemalloc.is_tracing():
        current, peak = tracemalloc.get_traced_memory()
        lines[0] += f", traced {current / 2**20:.1f} MB, traced peak in phase {peak / 2**20:.1f} MB"
        snapshot = tracemalloc.take_snapshot().filter_traces(
            (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, __file__))
        )
        for stat in snapshot.statistics("lineno")[:TOP_LINES]:
            frame = stat.traceback[0]
            lines.append(f"  {stat.size / 2**20:9.1f} MB {stat.count:9d} blocks  {frame.filename}:{frame.lineno}")
        del snapshot
        lines.append(f"  (probe took {time.perf_counter() - started:.1f} s)")
        tracemalloc.reset_peak()
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f"memory-{os.getpid()}.txt", "a") as out:
        out.write(f"{time.time():.3f} " + "\n".join(lines) + "\n")
    _reset_peak_rss()


def _reset_peak_rss() -> None:
    """Start the next phase's ``VmHWM`` from the current RSS (Linux 4.0+; ignored elsewhere)."""
    try:
        with open("/proc/self/clear_refs", "w") as clear_refs:
            clear_refs.write("5")
    except OSError:
        pass


def _proc_status() -> dict[str, int]:
    """``/proc/self/status``'s memory lines in kB (Linux; empty elsewhere)."""
    try:
        with open("/proc/self/status") as status:
            return {
                key: int(value.split()[0])
                for key, _, value in (line.partition(":") for line in status)
                if key.startswith("Vm") and value.strip().endswith("kB")
            }
    except OSError:
        return {}
