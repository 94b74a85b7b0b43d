"""Formatting for analytics tables: durations people can read, percentages with enough digits."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django import template

register = template.Library()


@register.filter
def duration(seconds: float | None) -> str:
    """Return a duration as people read it: ``7.1 ms``, ``250 ms``, ``6.2 s``, ``42 s``, ``3 min 4 s``,
    ``2 h 4 min`` or ``3 d 2 h`` (blank for None)."""
    if seconds is None:
        return ""
    if seconds < 0:
        return "-" + duration(-seconds)
    if seconds < 1:
        ms = seconds * 1000
        if round(ms, 1) < 10:
            return f"{ms:.1f} ms".replace(".0 ms", " ms")
        return f"{round(ms)} ms" if round(ms) < 1000 else "1.0 s"
    if round(seconds, 1) < 10:
        return f"{seconds:.1f} s"
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    minutes, s = divmod(s, 60)
    if minutes < 60:
        return f"{minutes} min {s} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


@register.filter
def percent(value: float | None) -> str:
    """Availability needs many nines: show up to four decimals, trimmed."""
    if value is None:
        return ""
    return f"{value:.4f}".rstrip("0").rstrip(".") + " %"


@register.filter
def cell(value: Any, kind: str) -> str:
    """Render a table cell by column kind (see ``pages.Column``)."""
    if value is None or value == "":
        return "—" if kind in ("time", "s") and value is None else ""
    if kind == "s":
        return duration(value)
    if kind == "pct":
        return percent(value)
    if kind == "time" and isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    if kind == "num" and isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if kind == "num" and isinstance(value, int):
        return f"{value:,}"
    return str(value)
