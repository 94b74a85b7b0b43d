"""The browser every e2e test drives: Debian's chromium (never a downloaded one), headless."""

from __future__ import annotations

from typing import Any, Final

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


def log_in(page: Any, base_url: str, username: str, password: str) -> None:
    """Log ``page`` in through the dashboard's login form and wait for the landing page."""
    page.goto(base_url + "/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(base_url + "/")
