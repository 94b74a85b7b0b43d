"""Browser test: an operator raises a topic's replication factor with a replication throttle, changes
the throttle while it copies, watches it finish with the throttle removed (the progress pushed by the
worker over the page's WebSocket: the page never polls), reads the audit page, and asks for a
preferred election that waits for catch-up (bad settings refused on the page).

The real stack of ``test_reassign_pages`` (daphne, a Celery worker, the project's controller, three
broker agents on three racks producing messages, ZooKeeper, Redis) and Debian's chromium.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from controller_core.model import TopicPartition
from controller_core.zk import codecs, paths
from tests.e2e.browser import CHROMIUM, CHROMIUM_ARGS, log_in
from tests.e2e.live_stack import PASSWORD
from tests.e2e.test_reassign_pages import Stack, stack

__all__ = ["stack"]
pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
    pytest.mark.slow,
]


def test_throttled_replication_factor_change_live_throttle_audit_and_catch_up_election(stack: Stack) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page: Any = browser.new_page(viewport={"width": 1400, "height": 900})
            polls: list[str] = []  # the progress page's fallback requests (there must be none)
            page.on("request", lambda r: polls.append(r.url) if "/api/v1/" in r.url else None)
            page.on("console", lambda m: polls.append(m.text) if "fetching over HTTP" in m.text else None)
            log_in(page, stack.url, "olive", PASSWORD)

            page.goto(stack.url + "/actions/clusters/e2e/reassign/")
            page.check('input[name="topics"][value="orders"]')
            page.fill("#replication_factor", "4")  # more than the 3 live brokers: refused
            page.click("#generate-rf")
            assert "more than the 3 live broker" in page.text_content("#reassign-errors")
            page.fill("#replication_factor", "3")
            page.click("#generate-rf")
            page.wait_for_selector("#proposal-table")
            assert page.text_content("#moved-replicas").strip() == "3"  # one new replica per partition
            assert page.is_checked("#change_replication_factor")

            page.fill("#throttle_mb_s", "-1")
            page.fill('textarea[name="reason"]', "three copies of orders")
            page.click("#execute")
            assert "positive number of MB/s" in page.text_content("#reassign-errors")
            assert stack.zk.exists(paths.REASSIGN_PARTITIONS_PATH) is None
            page.fill("#throttle_mb_s", "0.01")  # 10 kB/s per broker, below the 25 kB/s produced
            page.fill('textarea[name="reason"]', "three copies of orders")
            page.click("#execute")
            page.wait_for_selector("#reassign-progress[data-transport=socket]")
            page.wait_for_function(
                "() => document.querySelector('#throttle-now').textContent.includes('(applied)')", timeout=30_000
            )
            assert "10.0 kB/s per broker" in page.text_content("#throttle-now")
            page.wait_for_function(
                "() => document.querySelector('#throttle-measured').textContent.includes('measured copy rate')",
                timeout=30_000,
            )
            page.wait_for_function(
                "() => document.querySelector('#progress-table tbody').textContent.includes('copied')",
                timeout=30_000,
            )

            page.fill("#throttle-rate", "5")
            page.fill("#throttle-reason", "off-peak now")
            page.click("#throttle-change")
            page.wait_for_selector("#reassign-progress")
            page.wait_for_function(
                "() => document.querySelector('#status').textContent.trim() === 'succeeded'", timeout=90_000
            )
            page.wait_for_function(
                "() => document.querySelector('#throttle-now').textContent.trim() === 'removed'", timeout=10_000
            )
            # Everything above arrived over the WebSocket, pushed by the worker's monitor: no poll at all.
            assert page.get_attribute("#reassign-progress", "data-transport") == "socket"
            assert page.get_attribute("#reassign-progress", "data-polls") == "0"
            assert polls == [], polls
            progress_url = page.url
            events = page.text_content("#throttle-events")
            assert "set to 10000 bytes/s by olive" in events
            assert "changed to 5000000 bytes/s by olive: off-peak now" in events
            assert "removed by (system)" in events

            page.click("text=#")  # the action's audit page
            page.wait_for_selector("#movement")
            rows = page.eval_on_selector_all("#movement tbody tr", "els => els.map(e => e.dataset.partition)")
            assert rows == ["orders-0", "orders-1", "orders-2"]
            assert "off-peak now" in page.text_content("#throttle-history")

            # Without a WebSocket the progress page falls back to polling, and still shows the end.
            fallback: Any = browser.new_page()
            fallback.add_init_script("delete window.WebSocket")
            fallback.context.add_cookies(page.context.cookies())
            fallback.goto(progress_url)
            fallback.wait_for_function(
                "() => document.querySelector('#status').textContent.trim() === 'succeeded'", timeout=10_000
            )
            assert fallback.get_attribute("#reassign-progress", "data-transport") == "poll"
            assert int(fallback.get_attribute("#reassign-progress", "data-polls")) >= 1
            fallback.close()

            page.goto(stack.url + "/actions/clusters/e2e/preferred-election/")
            page.select_option('select[name="scope"]', "imbalanced")
            page.check("#catch_up")
            page.fill("#min_isr_s", "-5")
            page.click("#preview")
            assert "must not be negative" in page.text_content("#action-error")
            page.fill("#min_isr_s", "10")
            page.fill("#max_lag", "100")
            page.click("#preview")
            page.wait_for_selector("#catch-up-summary")
            assert "would wait" in page.text_content("#catch-up-summary")
        finally:
            browser.close()
    for p in range(3):
        data = stack.zk.get(paths.topic_path("orders"))[0]
        final = codecs.decode_topic_assignment("orders", data).partitions[p]
        assert len(final.replicas) == 3 and not final.is_being_reassigned
    for broker in (1, 2, 3):
        config = codecs.decode_entity_config(stack.zk.get(f"/config/brokers/{broker}")[0])
        assert config == {}


def test_a_preferred_election_that_waits_for_catch_up_then_moves(stack: Stack) -> None:
    """Reordering orders-0's replicas to [2, 1] makes 2 its preferred replica while 1 still leads,
    and rewrites its state (a new leader epoch): an election asked to wait 8 s in an unchanged ISR
    shows it waiting, then moves it by itself."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page: Any = browser.new_page(viewport={"width": 1400, "height": 900})
            log_in(page, stack.url, "olive", PASSWORD)

            page.goto(stack.url + "/actions/clusters/e2e/reassign/")
            page.fill("#reassignment", '{"version":1,"partitions":[{"topic":"orders","partition":0,"replicas":[2,1]}]}')
            page.fill('textarea[name="reason"]', "make 2 the preferred leader of orders-0")
            page.click("#execute")
            page.wait_for_function(
                "() => document.querySelector('#status').textContent.trim() === 'succeeded'", timeout=60_000
            )

            page.goto(stack.url + "/actions/clusters/e2e/preferred-election/")
            page.select_option('select[name="scope"]', "partition")
            page.fill('input[name="topic"]', "orders")
            page.fill('input[name="partition"]', "0")
            page.check("#catch_up")
            page.fill("#min_isr_s", "8")
            page.fill("#max_lag", "100000")
            page.fill("#timeout_s", "60")
            page.click("#preview")
            page.wait_for_selector("#catch-up-summary")
            assert page.text_content("#catch-up-summary").strip() == "0 would move now; 1 would wait."
            assert "of the 8 s required" in page.text_content("#catch-up")
            page.fill('textarea[name="reason"]', "leader back to 2 once warm")
            page.click("#elect")
            page.wait_for_selector("#action-summary")
            page.wait_for_function(
                "() => document.documentElement.dataset.actionStatus === 'succeeded'", timeout=60_000
            )
            page.reload()
            assert "Partitions before and after" in page.text_content("#movement-panel")
        finally:
            browser.close()
    state = codecs.decode_partition_state(stack.zk.get(paths.partition_state_path(TopicPartition("orders", 0)))[0], 0)
    assert state.leader_and_isr.leader == 2
