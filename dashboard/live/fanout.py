"""Per-socket cost of a pushed event, kept to the one ``send`` each socket needs.

A flush reaches every socket of a web process that watches its scope, so whatever a consumer does
per event is multiplied by its viewers (100 viewers: 100 times per flush, ~30 flushes in a storm).
Two things did not need to be per socket:

* Channels (4.2+) runs ``close_old_connections`` through ``sync_to_async`` before every handler:
  a hop into the single thread that all consumers' sync calls share, one socket after another,
  while that thread's GIL turns are contested by page renders. The live group handlers touch the
  database only through ``database_sync_to_async`` (the permission re-check), which closes old
  connections on its own, so ``is_group_event`` tells the consumer to skip the hop for them.
* The browser's JSON of an event is the same for every socket: ``delta_text``/``status_text`` encode
  it once and keep the text on the event. channels_redis hands one event dict to every consumer of
  the process, so the first consumer encodes and the rest reuse it; an event that is not shared
  (another layer) is simply encoded per socket, as before.

Example::

    text = delta_text({"type": "live.delta", "scope": "cluster", "gen": "g", "seq": 4, "prev": 3, "data": {}})
    # '{"kind":"delta","scope":"cluster","gen":"g","seq":4,"prev":3,"data":{}}'
"""

from __future__ import annotations

import json
from typing import Any, Final

from dashboard.live import protocol

#: Where the encoded text is kept on the event (a key no sender uses; never sent on).
TEXT_KEY: Final = "_kcp_text"
_GROUP_EVENTS: Final = frozenset({protocol.DELTA, protocol.STATUS, protocol.RESYNC})


def is_group_event(message: dict[str, Any]) -> bool:
    """Whether ``message`` is one of the mirror's pushes (handled without Channels' DB hop)."""
    return message.get("type") in _GROUP_EVENTS


def handler_name(message: dict[str, Any]) -> str:
    """The consumer method for a group event, as Channels names it (``live.delta`` -> ``live_delta``)."""
    return str(message["type"]).replace(".", "_")


def _encode(payload: dict[str, Any]) -> str:
    return json.dumps(payload, separators=(",", ":"))


def delta_text(event: dict[str, Any]) -> str:
    """The browser's ``delta`` message for ``event``, encoded once per event."""
    text = event.get(TEXT_KEY)
    if not isinstance(text, str):
        text = _encode(
            {
                "kind": "delta",
                "scope": event["scope"],
                "gen": event["gen"],
                "seq": event["seq"],
                "prev": event["prev"],
                "data": event["data"],
            }
        )
        event[TEXT_KEY] = text
    return text


def status_text(event: dict[str, Any]) -> str:
    """The browser's ``status`` message for ``event``, encoded once per event."""
    text = event.get(TEXT_KEY)
    if not isinstance(text, str):
        text = _encode({"kind": "status", "status": event.get("status", {})})
        event[TEXT_KEY] = text
    return text
