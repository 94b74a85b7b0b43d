"""Every registered cluster is watched (issue #32), as an operator sees it: daphne and two real Celery
workers (mirror and controller roles) on real ZooKeeper and Redis, Debian's chromium.

One stack for the module (start-up is most of the cost): a Kafka 2.8 layout written by hand (three
brokers on racks, two topics, partition states, ``/controller`` 2 at epoch 7), a second small layout,
and an empty chroot. Registered in the browser, a cluster is mirrored within seconds with no
restart; an edited connect string re-points its mirror; removed, its mirror stops. Registered
through the API, the same. A managed cluster registered in the browser gets a candidate on each
worker, elects a controller, and survives the SIGKILL of its active candidate's worker (last test:
it kills a worker of the shared stack).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from controller_core.model import TopicPartition
from controller_core.zk import codecs, paths
from dashboard.clusters import hosting, layout
from scripts.devservices import REPO_ROOT, RedisServer, ZooKeeperServer, free_port, port_open
from scripts.support.kafka_layout import KafkaLayoutWriter
from tests.e2e.browser import CHROMIUM, log_in
from tests.e2e.live_stack import start_web
from tests.e2e.test_live_pages import page_goes_live, text_becomes
from tests.support.dashboard_db import install_migrated
from tests.support.processes import CELERY_WORKER, manage, terminate_all
from tests.support.zk import wait_for

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed")

PASSWORD = "correct horse battery"
WORKER_IDS = (601, 602)


@dataclass
class HostingStack:
    url: str
    root: str  # host:port/chroot of this module's tree
    zk: KazooClient  # at the root chroot
    redis: redis.Redis
    env: dict[str, str]
    web: subprocess.Popen[bytes]
    workers: dict[int, subprocess.Popen[bytes]]
    logs: Path

    def logs_text(self) -> str:
        files = sorted(self.logs.glob("*.log"))
        return "\n".join(f"== {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in files)


def write_kafka28(zk: KazooClient) -> None:
    """Kafka 2.8's znodes by hand: brokers 1-3 on racks, topics orders (4) and audit (2), controller 2 at epoch 7."""
    w = KafkaLayoutWriter(zk)
    w.ensure_layout()
    for b in (1, 2, 3):
        w.register_broker(b, port=9090 + b, rack=f"rack-{(b - 1) % 2}")
    w.elect_controller(2, 7)
    orders = {0: [1, 2], 1: [2, 3], 2: [3, 1], 3: [1, 3]}
    audit = {0: [2, 3], 1: [3, 2]}
    w.create_topic("orders", orders)
    w.create_topic("audit", audit)
    states = {TopicPartition("orders", p): (r[0], 0, r) for p, r in orders.items()}
    states |= {TopicPartition("audit", p): (r[0], 0, r) for p, r in audit.items()}
    w.write_states(states, 7)


def write_small(zk: KazooClient) -> None:
    w = KafkaLayoutWriter(zk)
    w.ensure_layout()
    w.register_broker(9, port=9109, rack="r9")
    w.elect_controller(9, 1)
    w.create_topic("solo", {0: [9]})


def start_worker(env: dict[str, str], logs: Path, controller_id: int) -> subprocess.Popen[bytes]:
    worker_env = dict(env, WORKER_ROLES="mirror,controller", CONTROLLER_ID=str(controller_id))
    return subprocess.Popen(
        [
            *CELERY_WORKER,
            "-l",
            "INFO",
            "-c",
            "1",
            "-n",
            f"w{controller_id}@%h",
        ],
        env=worker_env,
        cwd=REPO_ROOT,
        stdout=(logs / f"worker-{controller_id}.log").open("ab"),
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the kill takes its pool child too
    )


@pytest.fixture(scope="module")
def stack(
    zk_server: ZooKeeperServer,
    redis_server: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
    migrated_db_template: Path,
) -> Iterator[HostingStack]:
    tmp = tmp_path_factory.mktemp("registry")
    root = f"/reg-{uuid.uuid4().hex[:10]}"
    admin = KazooClient(hosts=zk_server.connect_string, timeout=10.0)
    admin.start(timeout=15)
    admin.ensure_path(root)
    zk = KazooClient(hosts=zk_server.connect_string + root, timeout=10.0)
    zk.start(timeout=15)
    for sub in ("/k28", "/small", "/apicluster"):
        zk.ensure_path(sub)
    writers = []  # their sessions hold the brokers' registrations and /controller, as Kafka's would
    for sub, write in (("/k28", write_kafka28), ("/small", write_small), ("/apicluster", write_small)):
        client = KazooClient(hosts=zk_server.connect_string + root + sub, timeout=10.0)
        client.start(timeout=15)
        write(client)
        writers.append(client)
    conn = redis.Redis.from_url(redis_server.url)
    conn.flushdb()
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{tmp / 'db.sqlite3'}",
        "VAR_DIR": str(tmp / "var"),
        "REDIS_URL": redis_server.url,
        "ZOOKEEPER_CONNECT": zk_server.connect_string + root,
        "DJANGO_ALLOWED_HOSTS": "127.0.0.1",
        "MIRROR_WINDOW_MS": "100",
        "HOSTING_POLL_S": "0.5",
        "MIRROR_LOCK_TTL_S": "3",
        "CONTROLLER_SLOT_TTL_S": "3",
        "ZOOKEEPER_SESSION_TIMEOUT_S": "4",
        "ACTION_RATE_LIMIT": "0",
        "PYTHONUNBUFFERED": "1",
    }
    install_migrated(migrated_db_template, env)  # a copy of the session's migrated database
    logs = tmp / "logs"
    logs.mkdir()
    port = free_port()
    web = start_web(env, logs, port)
    workers = {cid: start_worker(env, logs, cid) for cid in WORKER_IDS}
    live = HostingStack(f"http://127.0.0.1:{port}", zk_server.connect_string + root, zk, conn, env, web, workers, logs)
    try:
        # The user, while the web process and the workers start (a Django start-up of its own, seconds
        # under load; the workers read only the empty cluster registry meanwhile).
        manage(
            env,
            "shell",
            "-c",
            f"from django.contrib.auth.models import User; User.objects.create_superuser('ada', password='{PASSWORD}')",
        )
        wait_for(lambda: port_open("127.0.0.1", port), timeout=30, what="daphne")
        wait_for(
            lambda: all(len(hosting.live_workers(conn, role)) == 2 for role in hosting.ROLES),
            timeout=90,
            interval=0.2,
            what="two workers with both roles",
        )
        yield live
    except Exception:
        print(live.logs_text())
        raise
    finally:
        terminate_all([web, *live.workers.values()], timeout=20)
        for client in writers:
            client.stop()
            client.close()
        zk.stop()
        zk.close()
        admin.delete(root, recursive=True)
        admin.stop()
        admin.close()
        conn.close()


@pytest.fixture(scope="module")
def page(stack: HostingStack, browser: Any) -> Iterator[Any]:
    """One logged-in page for the module's tests (the module's chromium, tests/e2e/conftest.py)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    pg = context.new_page()
    log_in(pg, stack.url, "ada", PASSWORD)
    yield pg
    context.close()


def register(page: Any, stack: HostingStack, name: str, chroot: str, mode: str) -> None:
    page.goto(stack.url + "/actions/admin/clusters/")
    page.fill("#cluster-form #id_name", name)
    page.fill("#cluster-form #id_zookeeper_connect", stack.root + chroot)
    page.select_option("#cluster-form #id_mode", mode)
    page.click("#cluster-form button[type=submit]")
    page.wait_for_url(stack.url + "/actions/admin/clusters/")
    assert f"Cluster {name} registered" in page.text_content("body")


def test_an_observed_cluster_registered_in_the_browser_is_mirrored_repointed_and_stopped(
    stack: HostingStack, page: Any
) -> None:
    started = time.monotonic()
    register(page, stack, "kafka28", "/k28", "observed")
    page.goto(stack.url + "/clusters/kafka28/")
    text_becomes(page, '.card [data-count="brokers"]', "3", timeout=15_000)
    seen_after = time.monotonic() - started
    text_becomes(page, '.card [data-count="partitions"]', "6")
    text_becomes(page, '[data-controller="id"]', "2")
    page_goes_live(page)
    # The page was rendered before the first sync: the first snapshot reloads it once, filling the tables.
    page.wait_for_selector('#broker-load tr[data-broker="3"]', timeout=10_000)
    page.goto(stack.url + "/clusters/kafka28/brokers/")
    rows = page.eval_on_selector_all("tr[data-broker]", "els => els.map(e => e.dataset.broker)")
    assert sorted(rows) == ["1", "2", "3"]
    print(f"registered in the browser -> 3 brokers on the overview in {seen_after:.1f} s")

    page.goto(stack.url + "/actions/admin/clusters/kafka28/")  # edit: another ZooKeeper tree
    page.fill("#cluster-form #id_zookeeper_connect", stack.root + "/small")
    page.click("#cluster-form button[type=submit]")
    page.wait_for_url(stack.url + "/actions/admin/clusters/")
    page.goto(stack.url + "/clusters/kafka28/")
    text_becomes(page, '.card [data-count="brokers"]', "1", timeout=15_000)
    text_becomes(page, '.card [data-count="partitions"]', "1")

    holder = stack.redis.get(layout.lock_key("kafka28"))
    assert holder is not None
    page.goto(stack.url + "/actions/admin/clusters/kafka28/")
    assert "its mirror stops" in page.text_content("#remove-effects")
    page.fill("#remove-form input[name=confirm]", "kafka28")
    page.click("#remove-form button[type=submit]")
    page.wait_for_url(stack.url + "/actions/admin/clusters/")
    wait_for(lambda: stack.redis.get(layout.lock_key("kafka28")) is None, timeout=10, what="mirror lease released")
    wait_for(lambda: not stack.redis.exists(layout.meta_key("kafka28")), timeout=10, what="snapshot deleted")
    wait_for(
        lambda: all("kafka28" not in w.held for w in hosting.live_workers(stack.redis, "mirror")),
        timeout=10,
        what="no worker holds kafka28",
    )


def test_a_cluster_registered_through_the_api_is_mirrored(stack: HostingStack, page: Any) -> None:
    page.goto(stack.url + "/actions/admin/clusters/")
    token = next(c["value"] for c in page.context.cookies() if c["name"] == "csrftoken")
    headers = {"X-CSRFToken": token, "Content-Type": "application/json", "Referer": stack.url + "/"}
    bad = page.request.post(
        stack.url + "/api/v1/clusters/",
        data=json.dumps({"name": "viaapi", "zookeeper_connect": stack.root + "/nothing-here", "mode": "observed"}),
        headers=headers,
    )
    assert bad.status == 400 and "does not exist" in json.dumps(bad.json()["errors"])
    made = page.request.post(
        stack.url + "/api/v1/clusters/",
        data=json.dumps({"name": "viaapi", "zookeeper_connect": stack.root + "/apicluster", "mode": "observed"}),
        headers=headers,
    )
    assert made.status == 201, made.text()
    page.goto(stack.url + "/clusters/viaapi/")
    text_becomes(page, '.card [data-count="brokers"]', "1", timeout=15_000)
    detail = page.request.get(stack.url + "/healthz?detail=1").json()["hosting"]
    (row,) = [c for c in detail["clusters"] if c["cluster"] == "viaapi"]
    assert row["mirror"]["holder"] in {w["worker"] for w in detail["workers"] if w["role"] == "mirror"}


def _controller(zk: KazooClient, chroot: str) -> tuple[int, int] | None:
    try:
        cid = codecs.decode_controller(zk.get(chroot + paths.CONTROLLER_PATH)[0]).broker_id
        return cid, int(zk.get(chroot + paths.CONTROLLER_EPOCH_PATH)[0])
    except NoNodeError:
        return None


def test_a_managed_cluster_registered_in_the_browser_elects_and_survives_its_active_workers_kill(
    stack: HostingStack, page: Any
) -> None:
    register(page, stack, "second", "/managed", "managed")
    wait_for(lambda: _controller(stack.zk, "/managed") is not None, timeout=60, interval=0.2, what="elected")
    first = _controller(stack.zk, "/managed")
    assert first is not None and first[0] in WORKER_IDS

    def candidates() -> list[dict[str, Any]]:
        detail = page.request.get(stack.url + "/actions/admin/hosting/?format=json").json()
        (row,) = [c for c in detail["clusters"] if c["cluster"] == "second"]
        return list(row["controller"]["candidates"])

    wait_for(lambda: len(candidates()) == 2, timeout=30, interval=0.3, what="two candidates")
    both = candidates()
    assert len({c["worker"] for c in both}) == 2, both  # on different workers
    wait_for(lambda: [c["controller_id"] for c in candidates() if c["active"]] == [first[0]], timeout=15)
    page.goto(stack.url + "/actions/admin/hosting/")
    assert "active" in page.text_content('tr[data-cluster="second"] [data-candidates]')

    victim = stack.workers.pop(first[0])
    os.killpg(victim.pid, signal.SIGKILL)
    victim.wait(10)
    survivor = next(i for i in WORKER_IDS if i != first[0])
    wait_for(
        lambda: _controller(stack.zk, "/managed") == (survivor, first[1] + 1),
        timeout=30,
        interval=0.2,
        what="the surviving worker's candidate elected with the next epoch",
    )
    wait_for(
        lambda: stack.redis.hget(layout.meta_key("second"), "controller_id") == str(survivor).encode(),
        timeout=20,
        what="the mirror sees the new controller",
    )
    page.goto(stack.url + "/clusters/second/")
    text_becomes(page, '[data-controller="id"]', str(survivor))
    text_becomes(page, '[data-controller="epoch"]', str(first[1] + 1))
