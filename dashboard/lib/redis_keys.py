"""Redis key names that more than one process writes or reads (docs/contracts.md), defined once.

The controller hosts write them (``workers.sinks``), the mirror and the audit ingest read the stream
(``workers.mirror``, ``workers.audit``), and the web process reads the status hashes
(``dashboard.clusters``): each imports the name from here instead of spelling it again. The
mirror's own keys are ``dashboard.clusters.layout``; hosting's are ``dashboard.clusters.hosting``.
"""

from __future__ import annotations

from typing import Final

PREFIX: Final = "kcp"
"""The first part of every key the project writes (the mirror's, hosting's, the rate limiter's too)."""
STREAM_FIELD: Final = "r"
"""The stream entry field holding one state-change record's JSON."""


def state_change_stream_key(cluster: str) -> str:
    """The cluster's state-change stream: one entry per controller record, field ``r`` (JSON)."""
    return f"{PREFIX}:{cluster}:state-changes"


def controller_status_key(cluster: str, controller_id: int) -> str:
    """A controller candidate's status hash (``active``, ``updated_at``, ...)."""
    return f"{PREFIX}:{cluster}:controller:{controller_id}"
