"""What a live page can subscribe to: the whole cluster, one topic or one broker.

A scope is written ``cluster``, ``topic:<name>`` or ``broker:<id>``; the mirror labels every delta
with one and the consumers parse what pages ask for with ``parse_scope``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

CLUSTER: Final = "cluster"
_TOPIC = re.compile(r"[a-zA-Z0-9._-]{1,249}")


@dataclass(frozen=True, slots=True)
class Scope:
    kind: str  # "cluster" | "topic" | "broker"
    value: str = ""

    def __str__(self) -> str:
        return self.kind if self.kind == CLUSTER else f"{self.kind}:{self.value}"

    @property
    def broker(self) -> int:
        return int(self.value)


def topic_scope(topic: str) -> str:
    return f"topic:{topic}"


def broker_scope(broker: int) -> str:
    return f"broker:{broker}"


def parse_scope(text: str) -> Scope:
    """Parse a scope string; raise ``ValueError`` with the accepted forms on anything else."""
    if text == CLUSTER:
        return Scope(CLUSTER)
    kind, sep, value = text.partition(":")
    if sep and kind == "topic" and _TOPIC.fullmatch(value) and value not in {".", ".."}:
        return Scope("topic", value)
    if sep and kind == "broker" and value.isdigit() and len(value) < 10:
        return Scope("broker", str(int(value)))
    raise ValueError(f"not a live scope: {text!r} (expected 'cluster', 'topic:<name>' or 'broker:<id>')")
