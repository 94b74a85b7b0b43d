"""The live protocol: group events the mirror sends and messages the browser receives.

Group events (channel layer, ``type`` routes them to the consumer method of the same name with
``.`` replaced by ``_``)::

    {"type": "live.delta", "scope": "topic:orders", "gen": "9f..", "seq": 412, "prev": 409, "data": {...}}
    {"type": "live.status", "status": {"zk_state": "CONNECTED", "synced_at": ..., "scope_seqs": {...}, ...}}
    {"type": "live.resync", "gen": "a1.."}

Browser messages (JSON over the WebSocket)::

    <- {"kind": "snapshot", "scope": ..., "gen": ..., "seq": ..., "data": {...}, "status": {...}}
    <- {"kind": "delta", "scope": ..., "gen": ..., "seq": ..., "prev": ..., "data": {...}}
    <- {"kind": "status", "status": {...}}
    <- {"kind": "resync"}                     the mirror rebuilt its snapshot: ask for a new one
    <- {"kind": "error", "error": "..."}
    -> {"action": "subscribe", "scope": "cluster"}
    -> {"action": "resync"}                   send me a fresh snapshot (after a gap)

Ordering rule for the browser: keep the snapshot's ``(gen, seq)``; for each delta of the same
``gen``: ``seq <= held`` -> already included, ignore; ``prev <= held`` -> apply and hold ``seq``;
``prev > held`` -> a delta was lost (channel layers drop over capacity): ask for a resync. A delta
of another ``gen`` also means resync. A lost *last* delta has no successor to reveal it, so each
``live.status`` carries ``scope_seqs`` (``{scope: seq of the last delta sent to it}``, this ``gen``,
stamped by the mirror's publisher): a page holding less than its scope's entry asks for a resync.
Deltas carry absolute values (counters, rows), so applying one that overlaps the snapshot is
harmless; transitions only animate.
"""

from __future__ import annotations

from typing import Final

DELTA: Final = "live.delta"
STATUS: Final = "live.status"
RESYNC: Final = "live.resync"

#: Above this many changed rows for one topic in one delta, send none and flag it: the page refetches.
ROW_CAP: Final = 500
