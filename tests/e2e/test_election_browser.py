"""Browser test: an operator rebalances leaders after a broker restart with the preferred-election button.

Real everything: broker agent processes, a controller candidate, the dashboard under daphne and a
Celery worker running the task, with Debian's chromium clicking preview, reason and execute, then
watching the action page turn *succeeded* without a reload.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from controller_core.model import TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from scripts.devservices import REPO_ROOT, RedisServer, free_port, port_open
from tests.e2e.browser import CHROMIUM, CHROMIUM_ARGS, log_in
from tests.e2e.live_stack import PASSWORD
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates
from tests.support.dashboard_db import install_migrated, register_cluster_and_user
from tests.support.processes import terminate_all
from tests.support.zk import wait_for

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
]

ORDERS = {0: [1, 2], 1: [2, 1]}


def leader_and_isr(zk: KazooClient, partition: int) -> tuple[int, list[int]]:
    """The partition's leader and ISR; (-1, []) before the controller created its state znode."""
    try:
        data, _ = zk.get(paths.partition_state_path(TopicPartition("orders", partition)))
    except NoNodeError:
        return -1, []
    lai = codecs.decode_partition_state(data, 0).leader_and_isr
    return lai.leader, list(lai.isr)


@dataclass
class Web:
    url: str


@pytest.fixture
def imbalanced(zk: KazooClient, zk_chroot: str, tmp_path: Path) -> Iterator[KazooClient]:
    """Brokers 1 and 2 and a controller; broker 1 killed and restarted, so broker 2 leads orders-0."""
    agents = Agents(zk_chroot, tmp_path / "agents")
    (tmp_path / "agents").mkdir()
    candidates = Candidates(zk_chroot)
    try:
        agents.start_all((1, 2))
        ZkStore(zk).create_topic("orders", ORDERS)
        candidates.start(100)
        wait_for(lambda: all(sorted(leader_and_isr(zk, p)[1]) == [1, 2] for p in ORDERS), timeout=40, what="in sync")
        agents.started[0].signal(signal.SIGKILL)
        wait_for(lambda: leader_and_isr(zk, 0)[0] == 2, timeout=30, what="orders-0 leader moves to 2")
        agents.start(1)
        wait_for(lambda: 1 in leader_and_isr(zk, 0)[1], timeout=40, what="broker 1 back in the ISR")
        yield zk
    finally:
        candidates.stop_all()
        agents.close()


@pytest.fixture
def web(
    imbalanced: KazooClient, zk_chroot: str, redis_server: RedisServer, tmp_path: Path, migrated_db_template: Path
) -> Iterator[Web]:
    """daphne and a Celery worker (its own Redis database as the task queue) on one SQLite file."""
    base = redis_server.url.rsplit("/", 1)[0]
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": f"{base}/9",
        "CELERY_BROKER_URL": f"{base}/9",
        "CELERY_RESULT_BACKEND": f"{base}/9",
        "ZOOKEEPER_CONNECT": zk_chroot,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "ACTION_RATE_LIMIT": "0",
        "WORKER_ROLES": "",
        "PYTHONUNBUFFERED": "1",
    }
    install_migrated(migrated_db_template, env)
    logs = tmp_path / "logs"
    logs.mkdir()
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "dashboard.asgi:application"],
            env=env, cwd=REPO_ROOT, stdout=(logs / "web.log").open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True,
        ),
        subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "dashboard", "worker", "--pool", "solo", "--concurrency", "1",
             "--without-heartbeat", "--without-gossip", "--without-mingle", "-l", "info"],
            env=env, cwd=REPO_ROOT, stdout=(logs / "worker.log").open("wb"), stderr=subprocess.STDOUT,
            start_new_session=True,
        ),
    ]  # fmt: skip
    try:
        register_cluster_and_user(
            env, cluster="e2e", zookeeper=zk_chroot, mode="managed", user="otto", password=PASSWORD, group="operator"
        )
        deadline = time.monotonic() + 30
        while not port_open("127.0.0.1", port):
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise AssertionError("daphne did not start:\n" + (logs / "web.log").read_text())
            time.sleep(0.1)
        yield Web(f"http://127.0.0.1:{port}")
    finally:
        terminate_all(procs)
        for name in ("web.log", "worker.log"):
            sys.stderr.write(f"--- {name} (tail) ---\n{(logs / name).read_text(errors='replace')[-3000:]}\n")


def test_operator_clicks_a_preferred_election_through_to_completion(web: Web, imbalanced: KazooClient) -> None:
    from playwright.sync_api import sync_playwright

    zk = imbalanced
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            log_in(page, web.url, "otto", PASSWORD)

            page.goto(web.url + "/actions/clusters/e2e/preferred-election/")
            page.select_option("#preview-form select[name=scope]", "imbalanced")
            page.click("#preview-form button[type=submit]")
            page.wait_for_selector("#electable")
            assert "orders-0" in (page.text_content("#electable") or "")
            page.fill("#execute-form textarea[name=reason]", "broker 1 restarted: give its leaderships back")
            page.click("#execute-form button[type=submit]")
            page.wait_for_url("**/actions/*/")
            page.evaluate("window.__sameDocument = true")
            page.wait_for_function(
                "() => document.documentElement.dataset.actionStatus === 'succeeded'", timeout=60_000
            )
            assert page.evaluate("window.__sameDocument") is True  # progress came live, not from a reload
            outcome = page.text_content("#outcome") or ""
            assert "orders-0" in outcome and "elected" in outcome
            assert "broker 1 restarted" in (page.text_content("#action-summary") or "")

            # before shutting broker 2 down, the operator looks at what a controlled shutdown would do
            page.goto(web.url + "/actions/clusters/e2e/impact/")
            page.fill("#impact-form input[name=broker]", "2")
            page.select_option("#impact-form select[name=mode]", "shutdown")
            page.click("#impact-form button[type=submit]")
            page.wait_for_selector("#impact-summary")
            assert (page.text_content('[data-count="leader_moves"]') or "").strip() == "1"  # orders-1 moves to 1
            assert (page.text_content('[data-count="offline"]') or "").strip() == "0"
            assert "orders-1" in (page.text_content("#impact-moves") or "")
        finally:
            browser.close()
    assert leader_and_isr(zk, 0)[0] == 1
    assert zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None
