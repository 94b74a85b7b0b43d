"""The browser of the e2e tests: one Debian chromium per test module, a fresh context for every test.

Why per module and not per session: Playwright's sync API marks its event loop as running in the
test thread between calls, so a browser kept alive past the e2e modules would break every later
pytest-asyncio test and Django's async-safety checks. A context per test keeps tests apart as a
new browser would (own cookies, storage and cache) without a new chromium start.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.browser import CHROMIUM, CHROMIUM_ARGS


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Debian's chromium under Playwright, for the tests of one module (never a downloaded browser)."""
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
