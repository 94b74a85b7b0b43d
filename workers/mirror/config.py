"""A mirror's tunables (``MirrorConfig``): one frozen value, checked when made."""

from __future__ import annotations

from dataclasses import dataclass

from workers.mirror.model import MANAGED, OBSERVED


@dataclass(frozen=True, slots=True)
class MirrorConfig:
    """Tunables of one mirror (defaults suit 100,000 partitions on one machine)."""

    cluster: str
    mode: str = OBSERVED
    window_s: float = 0.15
    heartbeat_s: float = 1.0
    sweep_s: float | None = None  # None: 15 s observed, 60 s managed (the stream reports changes)
    sweep_chunk: int = 2_000
    refresh_chunk: int = 2_000
    # While watched partitions may fire (observed mode, after a broker change), the work that can
    # wait (replica-only re-derivations, follow-up reads, the sweep) goes in chunks this small, so
    # a fired watch's read waits for at most one of them (~50 ms, not ~200 ms).
    background_chunk: int = 500
    # That work (and the sweep) stops adding rows to the next flush once it holds this many: a
    # flush is written whole before the next is taken, so a storm's urgent rows wait for at most a
    # flush this size (``reads.StateReads._background_room``).
    background_flush_rows: int = 4_000
    gc_interval_s: float = 300.0
    # Re-reads after a broker or controller change (seconds after it). Observed clusters have no
    # stream, so they look often; a managed cluster's controller reports its elections itself.
    followups: tuple[float, ...] = (0.3, 1.0, 2.5, 5.0)
    managed_followups: tuple[float, ...] = (10.0,)
    # Partitions the stream reported with a new leader are read back this much later (after the
    # storm: the stream is already what the page shows, the read only confirms versions).
    confirm_delay_s: float = 5.0
    default_min_isr: int = 1
    # Observed mode: at most this many partition state znodes watched at once (those seen without a
    # live leader; see ``Mirror._watch_unresolved``).
    state_watch_limit: int = 200_000
    replay_max: int = 500_000
    interest_refresh_s: float = 2.0

    def __post_init__(self) -> None:
        if self.mode not in (MANAGED, OBSERVED):
            raise ValueError(f"mode must be {MANAGED!r} or {OBSERVED!r}, not {self.mode!r}")
        if self.background_flush_rows < 1:
            raise ValueError(f"background_flush_rows={self.background_flush_rows} must be at least 1")
        if not 0.05 <= self.window_s <= 1.0:
            raise ValueError(f"window_s={self.window_s} outside 0.05..1.0 s")

    @property
    def sweep_interval_s(self) -> float:
        if self.sweep_s is not None:
            return self.sweep_s
        return 15.0 if self.mode == OBSERVED else 60.0
