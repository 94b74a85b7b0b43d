"""Preferred elections that wait for catch-up, against real ZooKeeper, the project's controller and
real broker agents under a produce load: a preferred replica that has just come back is not made
leader until it has been in the ISR for T seconds and is at most N messages behind; then it is,
by itself; an election that cannot be satisfied times out and says so; bad T or N are refused."""

from __future__ import annotations

import contextlib
import json
import signal
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from kazoo.client import KazooClient

from controller_core.model import TopicPartition as TP
from controller_core.zk import paths
from controller_core.zk.store import ZkStore
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates
from tests.support.zk import wait_for
from workers.actions import preferred_election
from workers.catchup_election import run as legacy_catch_up_task

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

NAME = "live"
PAGE = f"/actions/clusters/{NAME}/preferred-election/"
API = f"/api/v1/clusters/{NAME}/preferred-election/"
T0 = TP("orders", 0)


#: Broker 1's ZooKeeper session: it is paused until the session expires, so every test here waits it
#: out once (the agents' 4 s otherwise; 2.5 s moves leadership away the same way).
PAUSED_BROKER_SESSION = ("--zookeeper-session-timeout-ms", "2500")


def state(zk: KazooClient) -> tuple[int, tuple[int, ...]]:
    read = ZkStore(zk).get_partition_states([T0])[T0]
    assert read.state is not None
    return read.state.leader_and_isr.leader, tuple(read.state.leader_and_isr.isr)


def submit_catch_up(operator: Client, reason: str, **option: float) -> int:
    """Submit an imbalanced-scope election that waits for catch-up (``option``: T, N, timeout)."""
    body = {"scope": "imbalanced", "reason": reason, "catch_up": True, **option}
    response = operator.post(API, json.dumps(body), content_type="application/json")
    assert response.status_code == 201, response.content
    return int(response.json()["id"])


def leader_moved_away(zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates) -> None:
    """orders-0 on [1, 2], its preferred replica 1 paused until its session expires: 2 leads, and
    broker 1 comes back far behind."""
    agents.start(1, "--produce-rate", "200", *PAUSED_BROKER_SESSION)
    agents.start(2, "--produce-rate", "200")
    candidates.start(100)
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    ZkStore(zk).create_topic("orders", {0: [1, 2]})
    wait_for(lambda: zk.exists(paths.partition_state_path(T0)) is not None, what="the partition state")
    wait_for(lambda: state(zk) == (1, (1, 2)), timeout=30, what="both in the ISR")
    agents.started[0].signal(signal.SIGSTOP)
    wait_for(lambda: state(zk)[0] == 2, timeout=30, what="leadership moved to 2")
    time.sleep(2.0)  # broker 2 keeps appending: broker 1 will come back behind
    agents.started[0].signal(signal.SIGCONT)
    wait_for(lambda: zk.exists(paths.broker_id_path(1)) is not None, timeout=30, what="broker 1 registered again")
    Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)


def task_thread(body: Callable[[], object]) -> threading.Thread:
    """A thread that runs a task's body as a Celery worker would, then closes the thread's database
    connection, as Celery's Django fixup does after each task (left open, it outlived the test and
    kept PostgreSQL from dropping the test database at the session's end)."""

    def run() -> None:
        try:
            body()
        finally:
            connection.close()

    return threading.Thread(target=run)


@contextlib.contextmanager
def reads_that_never_lock_out_the_task() -> Iterator[None]:
    """This thread's reads take no table locks in SQLite's shared-cache test database.

    Django's SQLite test database is in memory with a shared cache: a write that meets another
    connection's read in progress fails at once ("database table is locked"), without the busy wait
    of a database file or PostgreSQL. A test polling the action while the task writes it made the
    task fail that way (seen on a loaded machine). A read-uncommitted connection takes no table read
    locks; on any other database this changes nothing."""
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA read_uncommitted = true")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA read_uncommitted = false")


def test_bad_catch_up_settings_are_refused_with_nothing_written(
    zk: KazooClient, zk_chroot: str, operator: Client, sent: list[Any]
) -> None:
    ZkStore(zk).ensure_persistent_paths()
    Cluster.objects.create(name=NAME, zookeeper_connect=zk_chroot)
    base = {"scope": "imbalanced", "reason": "r", "catch_up": True, "min_isr_s": 5, "max_lag": 10}
    for field, value, message in (
        ("min_isr_s", -1, "must not be negative"),
        ("max_lag", -3, "must not be negative"),
        ("max_lag", 2.5, "whole number"),
        ("max_lag", 0, "must be at least 1"),  # the lag must be *under* N: 0 could never pass
        ("min_isr_s", "soon", "must be a number"),
        ("timeout_s", 0, "timeout must be more than 0"),
        ("catch_up", "maybe", "true or false"),
    ):
        response = operator.post(API, json.dumps({**base, field: value}), content_type="application/json")
        assert response.status_code == 400 and message in response.json()["error"], (field, response.content)
        page = operator.get(PAGE, {**{k: str(v) for k, v in base.items()}, field: str(value)})
        assert page.status_code == 400
    assert sent == [] and zk.exists(paths.PREFERRED_REPLICA_ELECTION_PATH) is None


@pytest.mark.django_db(transaction=True)  # the task runs in a thread: its connection must see the action
def test_a_waiting_election_moves_leadership_only_after_catch_up(
    zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates, operator: Client, sent: list[Any]
) -> None:
    leader_moved_away(zk, zk_chroot, agents, candidates)
    min_isr_s = 4.0
    preview = operator.get(
        API + "preview/",
        {"scope": "imbalanced", "catch_up": "1", "min_isr_s": str(min_isr_s), "max_lag": "400"},
    )
    assert preview.status_code == 200, preview.content
    catch_up = preview.json()["catch_up"]
    assert catch_up["now"] == [] and len(catch_up["waiting"]) == 1, preview.json()
    assert "not in the ISR" in catch_up["waiting"][0]["why"] or "in the ISR for" in catch_up["waiting"][0]["why"]

    response = operator.post(
        API,
        json.dumps({"scope": "imbalanced", "reason": "back to 1 once warm", "catch_up": True,
                    "min_isr_s": min_isr_s, "max_lag": 400, "timeout_s": 60}),
        content_type="application/json",
    )  # fmt: skip
    assert response.status_code == 201, response.content
    action_id = response.json()["id"]
    # the preferred election's one task, which honours the option the action carries
    assert sent == [("workers.actions.preferred_election", [action_id])]

    joined: list[float] = []
    result: list[str] = []
    worker = task_thread(lambda: result.append(preferred_election.run(action_id, connect=zk_chroot, poll_s=0.3)))
    worker.start()
    # Only ZooKeeper is watched while the task runs: a read of the action here could meet the task's
    # write in the test's shared-cache SQLite ("database table is locked") and fail the task itself.
    while worker.is_alive():
        leader, isr = state(zk)
        if 1 in isr and not joined:
            joined.append(time.time())
        if leader == 1:
            break
        time.sleep(0.1)
    worker.join(timeout=90)
    moved_at = time.time()
    assert result == ["succeeded"], Action.objects.get(pk=action_id).error
    assert state(zk)[0] == 1
    assert joined and moved_at - joined[0] >= min_isr_s - 0.5  # not before it was warm
    action = Action.objects.get(pk=action_id)
    (entry,) = action.outcome["elected"].values()
    assert entry["outcome"] == "elected" and entry["leader"] == 1
    assert "in the ISR" in entry["last_waited_because"], entry  # it waited for the ISR time, and says so
    assert action.parameters["catch_up"] == {"min_isr_s": min_isr_s, "max_lag": 400, "timeout_s": 60.0}
    assert action.outcome["before"]["orders-0"]["leader"] == 2
    assert action.outcome["after"]["orders-0"]["leader"] == 1
    assert action.outcome["after"]["orders-0"]["replicas"] == [1, 2]
    audit = operator.get(f"/actions/{action_id}/").content.decode()
    assert "Partitions before and after" in audit


def test_an_election_that_cannot_catch_up_times_out_and_says_why(
    zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates, operator: Client, sent: list[Any]
) -> None:
    leader_moved_away(zk, zk_chroot, agents, candidates)
    action_id = submit_catch_up(operator, "strict", min_isr_s=3600, max_lag=1, timeout_s=3)
    # sent under the task name of earlier releases: still runs the catch-up election
    assert legacy_catch_up_task.run(action_id, connect=zk_chroot, poll_s=0.3) == "failed"
    action = Action.objects.get(pk=action_id)
    assert action.error.startswith("timed out after 3 s waiting for catch-up; 1 partition(s) not moved (orders-0:")
    assert state(zk)[0] == 2  # nothing moved


@pytest.mark.django_db(transaction=True)  # the task runs in a thread: its connection must see the action
def test_a_waiting_election_says_when_another_election_moved_the_partition(
    zk: KazooClient, zk_chroot: str, agents: Agents, candidates: Candidates, operator: Client, sent: list[Any]
) -> None:
    """While it waits (T = an hour), a plain preferred election (as the auto rebalance does) moves
    orders-0: the waiting one finishes by itself and names what happened instead of a bare
    "already preferred"."""
    leader_moved_away(zk, zk_chroot, agents, candidates)
    action_id = submit_catch_up(operator, "warm only", min_isr_s=3600, max_lag=100000, timeout_s=60)
    result: list[str] = []
    worker = task_thread(lambda: result.append(preferred_election.run(action_id, connect=zk_chroot, poll_s=0.3)))
    with reads_that_never_lock_out_the_task():
        worker.start()
        wait_for(
            lambda: bool((Action.objects.get(pk=action_id).outcome or {}).get("waiting")),
            timeout=30,
            what="orders-0 seen waiting",
        )
        wait_for(lambda: 1 in state(zk)[1], timeout=30, what="broker 1 back in the ISR")
        ZkStore(zk).create_preferred_replica_election_request([T0])
        worker.join(timeout=60)
    assert result == ["succeeded"]
    (entry,) = Action.objects.get(pk=action_id).outcome["elected"].values()
    assert entry["outcome"].startswith("already preferred (moved by another election while this one waited: ")
    assert "of the 3600 s required" in entry["outcome"] or "not in the ISR" in entry["outcome"]


def test_the_auto_rebalance_waits_for_the_preferred_replica_to_be_warm(
    zk: KazooClient, agents: Agents, candidates: Candidates
) -> None:
    """``leader_imbalance_min_isr_seconds``: the controller's own rebalance (checking every second)
    moves leadership back only after the returning replica has been in an unchanged ISR that long."""
    min_isr_s = 5.0
    agents.start(1, "--produce-rate", "200", *PAUSED_BROKER_SESSION)
    agents.start(2, "--produce-rate", "200")
    candidates.start(
        100,
        first_rebalance_delay_seconds=1.0,
        leader_imbalance_check_interval_seconds=1.0,
        leader_imbalance_per_broker_percentage=0,
        leader_imbalance_min_isr_seconds=min_isr_s,
    )
    wait_for(lambda: zk.exists(paths.CONTROLLER_PATH) is not None, what="controller elected")
    ZkStore(zk).create_topic("orders", {0: [1, 2]})
    wait_for(lambda: zk.exists(paths.partition_state_path(T0)) is not None, what="the partition state")
    wait_for(lambda: state(zk) == (1, (1, 2)), timeout=30, what="both in the ISR")
    agents.started[0].signal(signal.SIGSTOP)
    wait_for(lambda: state(zk)[0] == 2, timeout=30, what="leadership moved to 2")
    agents.started[0].signal(signal.SIGCONT)
    joined = 0.0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        leader, isr = state(zk)
        if 1 in isr and not joined:
            joined = time.monotonic()
        if leader == 1:
            break
        time.sleep(0.05)
    moved = time.monotonic()
    assert state(zk)[0] == 1, "the rebalance never moved leadership back"
    assert joined and moved - joined >= min_isr_s - 0.3, f"moved {moved - joined:.1f} s after rejoining"
