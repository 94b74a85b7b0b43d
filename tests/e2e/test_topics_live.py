"""Browser test: the topics list keeps its visible rows live (counters, filter membership, paging) without a reload.

Uses the stack of ``test_live_pages`` (daphne + run_mirror subprocesses, real ZooKeeper and Redis).
"""

from __future__ import annotations

from tests.e2e.live_stack import Stack
from tests.e2e.test_live_pages import (  # noqa: F401  (pytest fixtures are found by name)
    browser_page,
    kill_broker_1,
    page_goes_live,
    pytestmark,
    restart_broker_1,
    stack,
    text_becomes,
)


def test_the_topics_list_updates_its_rows_filter_and_sort_without_reload(stack: Stack, browser_page: object) -> None:  # noqa: F811
    page = browser_page
    page.goto(stack.url + "/clusters/e2e/topics/?only=offline")  # type: ignore[attr-defined]
    page_goes_live(page)
    text_becomes(page, "[data-topics-total]", "0")
    assert page.locator("tbody[data-topics-body] tr[data-topic]").count() == 0  # type: ignore[attr-defined]
    page.evaluate("window.__noReload = true")  # type: ignore[attr-defined]

    kill_broker_1(stack)  # orders-0 and orders-3 lose their only in-sync replica
    # The topic starts matching the "offline" filter: its row appears, with its live counters.
    text_becomes(page, 'tr[data-topic="orders"] [data-tcol="offline"]', "2")
    text_becomes(page, "[data-topics-total]", "1")
    text_becomes(page, 'tr[data-topic="orders"] [data-tcol="umi"]', "2")
    assert page.text_content('tr[data-topic="orders"] [data-tcol="partitions"]').strip() == "6"  # type: ignore[attr-defined]

    # Sorting and filtering fetch the page's rows instead of reloading it, and keep the address.
    page.click('label.pill:has(input[value=""])')  # type: ignore[attr-defined]
    page.wait_for_url("**/topics/?**")  # type: ignore[attr-defined]
    page.click('a[data-sort="offline"]')  # type: ignore[attr-defined]
    page.wait_for_function("() => location.search.includes('sort=offline')")  # type: ignore[attr-defined]
    assert "active" in (page.get_attribute('a[data-sort="offline"]', "class") or "")  # type: ignore[attr-defined]
    text_becomes(page, 'tr[data-topic="orders"] [data-tcol="offline"]', "2")

    restart_broker_1(stack)
    text_becomes(page, 'tr[data-topic="orders"] [data-tcol="offline"]', "0")
    text_becomes(page, 'tr[data-topic="orders"] [data-tcol="umi"]', "0")
    page.go_back()  # type: ignore[attr-defined]
    page.go_back()  # type: ignore[attr-defined]
    # Back on "?only=offline": nothing is offline any more, so the row is gone again.
    text_becomes(page, "[data-topics-total]", "0")
    assert page.evaluate("window.__noReload") is True  # type: ignore[attr-defined]
