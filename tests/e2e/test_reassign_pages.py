"""Browser test: an operator moves a topic to other brokers with the buttons and watches it finish.

The real stack: daphne and a Celery worker as subprocesses, the project's controller (in this
process) and three real broker agents producing messages, real ZooKeeper and Redis, Debian's
chromium. The operator generates a plan for ``orders`` onto brokers 2 and 3, executes it, and the
progress page (its progress pushed over a WebSocket) shows every partition complete.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from scripts.devservices import REPO_ROOT, free_port, port_open
from tests.e2e.browser import CHROMIUM, CHROMIUM_ARGS, log_in
from tests.e2e.live_stack import PASSWORD
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates
from tests.support.dashboard_db import install_migrated, register_cluster_and_user
from tests.support.processes import CELERY_WORKER, terminate_all
from tests.support.zk import wait_for

pytestmark = [
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed"),
    pytest.mark.slow,
]


@dataclass
class Stack:
    url: str
    zk: KazooClient
    agents: Agents
    logs: Path


def private_database(redis_url: str, db: int = 11) -> str:
    """The same Redis server, another database: the Celery queue of this stack is its own even when
    other test runs share the server (their flushes and workers use database 0)."""
    import redis

    base, _, _ = redis_url.rpartition("/")
    url = f"{base}/{db}"
    conn = redis.Redis.from_url(url)
    conn.flushdb()
    conn.close()
    return url


@pytest.fixture
def stack(zk_chroot: str, redis_url: str, tmp_path: Path, migrated_db_template: Path) -> Iterator[Stack]:
    redis_url = private_database(redis_url)
    zk = KazooClient(hosts=zk_chroot, timeout=10.0)
    zk.start(timeout=15)
    agents = Agents(zk_chroot, tmp_path / "agents")
    candidates = Candidates(zk_chroot)
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "VAR_DIR": str(tmp_path / "var"),
        "REDIS_URL": redis_url,
        "ZOOKEEPER_CONNECT": zk_chroot,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "WORKER_ROLES": "",
        "PYTHONUNBUFFERED": "1",
    }
    logs = tmp_path / "logs"
    logs.mkdir()
    procs: list[subprocess.Popen[bytes]] = []
    try:
        agents.start_all((1, 2, 3), "--produce-rate", "50", per_broker={b: ("--rack", f"rack-{b}") for b in (1, 2, 3)})
        candidates.start(100)
        wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
        ZkStore(zk).create_topic("orders", {0: [1, 2], 1: [2, 1], 2: [1, 2]})
        wait_for(lambda: zk.exists(paths.partition_state_path(TopicPartition("orders", 2))) is not None, what="states")

        install_migrated(migrated_db_template, env)
        register_cluster_and_user(
            env, cluster="e2e", zookeeper=zk_chroot, mode="managed", user="olive", password=PASSWORD, group="operator"
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "dashboard.asgi:application"],
                env=env,
                cwd=REPO_ROOT,
                stdout=(logs / "web.log").open("wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        procs.append(
            subprocess.Popen(
                [
                    *CELERY_WORKER,
                    "--pool",
                    "solo",
                    "-l",
                    "INFO",
                    "--without-gossip",
                    "--without-mingle",
                    "--without-heartbeat",
                    "-n",
                    f"reassign-e2e-{port}@%h",
                ],
                env=env,
                cwd=REPO_ROOT,
                stdout=(logs / "worker.log").open("wb"),
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        deadline = time.monotonic() + 30
        while not port_open("127.0.0.1", port):
            if time.monotonic() > deadline or procs[0].poll() is not None:
                raise AssertionError("daphne did not start:\n" + (logs / "web.log").read_text())
            time.sleep(0.1)
        yield Stack(f"http://127.0.0.1:{port}", zk, agents, logs)
    finally:
        terminate_all(procs)
        candidates.stop_all()
        agents.close()
        zk.stop()
        zk.close()


def test_generate_execute_and_watch_a_topic_move_to_other_brokers(stack: Stack) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page: Any = browser.new_page(viewport={"width": 1400, "height": 900})
            log_in(page, stack.url, "olive", PASSWORD)

            # from the cluster sub-navigation
            page.goto(stack.url + "/clusters/e2e/")
            page.click("text=Reassign partitions")
            page.wait_for_selector("#generate-form")
            page.check('input[name="topics"][value="orders"]')
            page.check('input[name="brokers"][value="2"]')
            page.check('input[name="brokers"][value="3"]')
            page.click("#generate")
            page.wait_for_selector("#proposal-table")
            assert page.text_content("#moved-replicas").strip() == "3"
            assert "messages" in page.text_content("#data-to-copy")
            assert page.input_value("#reassignment").count('"topic": "orders"') == 3

            page.fill('textarea[name="reason"]', "move orders off broker 1")
            page.click("#execute")
            page.wait_for_selector("#reassign-progress")
            page.wait_for_function(
                "() => document.querySelector('#status').textContent.trim() === 'succeeded'", timeout=90_000
            )
            states = page.eval_on_selector_all("#progress-table tbody td.state", "els => els.map(e => e.textContent)")
            assert states == ["complete", "complete", "complete"]
            # a managed cluster offers cancel while the move runs; once finished there is nothing to cancel
            assert page.is_visible("#cancel-finished") and not page.is_visible("#cancel-form")
        finally:
            browser.close()
    for p in range(3):
        data = stack.zk.get(paths.topic_path("orders"))[0]
        final = codecs.decode_topic_assignment("orders", data).partitions[p]
        assert set(final.replicas) <= {2, 3} and not final.is_being_reassigned
