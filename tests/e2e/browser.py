"""The browser every e2e test drives: Debian's chromium (never a downloaded one), headless."""

from __future__ import annotations

from typing import Final

CHROMIUM: Final = "/usr/bin/chromium"
CHROMIUM_ARGS: Final = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
