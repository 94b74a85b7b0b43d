"""Optional ZooKeeper digest ACLs: creator writes, world reads (Kafka's ``ZkAuthorizationTest`` idea).

A real controller candidate and real broker agent processes run with ``ZOOKEEPER_AUTH`` and
``ZOOKEEPER_ACL=1`` in their environment; a client without the digest can read every znode they
own but cannot change or delete one, and the cluster still does its job (controlled shutdown).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from typing import Any

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, OPEN_ACL_UNSAFE, Id, Permissions, make_digest_acl_credential

from controller_core.model import BrokerRegistration, EndPoint, TopicPartition
from controller_core.zk import codecs, paths
from controller_core.zk.client import ZkSecurity, new_client, world_writable_warning
from controller_core.zk.store import ZkStore
from tests.support.broker_agents import Agents
from tests.support.controllers import Candidates
from tests.support.zk import wait_for

pytestmark = pytest.mark.slow

USER, PASSWORD = "kcp", "acl-test-password"
SECURE = ZkSecurity.parse(f"digest:{USER}:{PASSWORD}", "1")


@pytest.fixture
def secured(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every controller and broker started by this test reads these (subprocesses inherit them)."""
    monkeypatch.setenv("ZOOKEEPER_AUTH", f"digest:{USER}:{PASSWORD}")
    monkeypatch.setenv("ZOOKEEPER_ACL", "1")


@pytest.fixture
def owner(zk_chroot: str, secured: None) -> Iterator[KazooClient]:
    """The digest identity's own client; removes what it owns (the open conftest client cannot)."""
    client = new_client(zk_chroot, timeout=10.0, security=SECURE)
    client.start(timeout=15)
    # conftest made the chroot with the open ACL; secured, as ensure_chroot creates it in production
    # (otherwise anyone could delete /controller: ZooKeeper checks DELETE on the parent).
    client.set_acls("/", SECURE.default_acl)
    try:
        yield client
    finally:
        for child in client.get_children("/"):
            client.delete("/" + child, recursive=True)
        client.stop()
        client.close()


def _leaders(zk: KazooClient, partitions: int) -> list[tuple[int, list[int]]]:
    out = []
    for p in range(partitions):
        data, _ = zk.get(paths.partition_state_path(TopicPartition("orders", p)))
        lai = codecs.decode_partition_state(data, 0).leader_and_isr
        out.append((lai.leader, list(lai.isr)))
    return out


def test_anyone_reads_only_the_owner_writes_and_the_cluster_still_works(
    zk: KazooClient, owner: KazooClient, agents: Agents, candidates: Candidates
) -> None:
    running = agents.start_all((1, 2))
    assignment = {0: [1, 2], 1: [2, 1]}
    ZkStore(owner).create_topic("orders", assignment)
    candidates.start(100)

    def in_sync() -> bool:
        try:
            return all(sorted(isr) == [1, 2] for _, isr in _leaders(zk, 2))
        except Exception:
            return False

    wait_for(in_sync, timeout=30, what="orders in sync under ACLs")

    # The znodes carry creator-all for the digest identity and world-read, nothing else.
    digest = Id("digest", make_digest_acl_credential(USER, PASSWORD))
    expected = {ACL(Permissions.ALL, digest), ACL(Permissions.READ, Id("world", "anyone"))}
    owned = [
        paths.CONTROLLER_PATH,
        paths.CONTROLLER_EPOCH_PATH,
        "/brokers/ids/1",
        "/brokers/topics/orders",
        paths.partition_state_path(TopicPartition("orders", 0)),
        "/admin",
    ]
    for path in owned:
        acl, _ = owner.get_acls(path)
        assert set(acl) == expected, (path, acl)
        # Others see the identity with its hash masked (ZooKeeper hides digests from non-admins).
        masked, _ = zk.get_acls(path)
        assert {(a.perms, a.id.scheme, a.id.id) for a in masked} == {
            (31, "digest", f"{USER}:x"),
            (1, "world", "anyone"),
        }
        assert zk.get(path) is not None  # the unauthenticated client reads

    # ... but cannot change, delete or create under them.
    epoch_data, epoch_stat = zk.get(paths.CONTROLLER_EPOCH_PATH)
    with pytest.raises(NoAuthError):
        zk.set(paths.CONTROLLER_EPOCH_PATH, b"99")
    with pytest.raises(NoAuthError):
        zk.delete(paths.CONTROLLER_PATH)
    with pytest.raises(NoAuthError):
        zk.set(paths.partition_state_path(TopicPartition("orders", 0)), b"{}")
    with pytest.raises(NoAuthError):
        zk.create(paths.PREFERRED_REPLICA_ELECTION_PATH, b"{}")
    with pytest.raises(NoAuthError):
        zk.create("/brokers/ids/7", b"{}", ephemeral=True)
    assert zk.get(paths.CONTROLLER_EPOCH_PATH) == (epoch_data, epoch_stat)

    # The controller and brokers, all holding the digest, still work: a controlled shutdown moves
    # broker 1's leaderships to broker 2 and shrinks the ISRs.
    running[1].signal(signal.SIGTERM)
    assert running[1].wait_exit(30) == 0
    seen: list[tuple[int, list[int]]] = []

    def moved() -> bool:
        seen[:] = _leaders(zk, 2)
        return seen == [(2, [2]), (2, [2])]

    try:
        wait_for(moved, timeout=30, what="leadership on broker 2")
    except AssertionError as e:
        logs = "\n".join(f"--- broker {b} log:\n{running[b].log_file.read_text()[-3000:]}" for b in (1, 2))
        raise AssertionError(f"{e}; (leader, ISR) per partition at the end: {seen}\n{logs}") from None


def test_a_secured_client_without_acl_leaves_znodes_open(zk: KazooClient, zk_chroot: str) -> None:
    """ZOOKEEPER_AUTH alone authenticates but keeps the open ACL (a migration step, as in Kafka)."""
    client = new_client(zk_chroot, timeout=10.0, security=ZkSecurity.parse(f"digest:{USER}:{PASSWORD}", "0"))
    client.start(timeout=15)
    try:
        client.create("/open", b"x")
    finally:
        client.stop()
        client.close()
    zk.set("/open", b"y")
    acl, _ = zk.get_acls("/open")
    assert [(a.perms, a.id.scheme) for a in acl] == [(Permissions.ALL, "world")]


def test_an_open_chroot_is_reported_when_acls_are_on(owner: KazooClient) -> None:
    """The owner fixture secured the chroot; a fresh open child stands in for an unsecured one."""
    assert world_writable_warning(owner, "/", SECURE) is None
    owner.create("/legacy", b"", acl=OPEN_ACL_UNSAFE)  # as a client without ACLs made it: world-writable
    warning = world_writable_warning(owner, "/legacy", SECURE)
    assert warning is not None and "writable by anyone" in warning
    assert world_writable_warning(owner, "/legacy", ZkSecurity()) is None  # ACLs off: nothing to say


@pytest.mark.django_db
def test_the_dashboard_writes_with_the_same_identity_and_acl(
    zk: KazooClient, zk_chroot: str, owner: KazooClient, settings: Any
) -> None:
    """The topic API goes through ``cluster_store`` -> ``new_client`` with the settings' identity."""
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from dashboard.clusters.models import Cluster

    store = ZkStore(owner)
    store.ensure_persistent_paths()
    store.register_broker(BrokerRegistration(id=1, endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 9001),)))
    Cluster.objects.create(name="acl", zookeeper_connect=zk_chroot)
    settings.ACTION_RATE_LIMIT = "0"
    admin = User.objects.create_user("ada", password="pw-correct-horse")
    admin.groups.add(Group.objects.get(name="admin"))
    client = Client()
    client.force_login(admin)
    body = {"name": "secured", "partitions": 1, "replication_factor": 1, "reason": "r"}

    settings.ZOOKEEPER_AUTH, settings.ZOOKEEPER_ACL = "", "0"  # a dashboard without the identity
    refused = client.post("/api/v1/clusters/acl/topics/", body, content_type="application/json")
    assert refused.status_code == 503 and "NoAuth" in refused.json()["error"]
    assert zk.exists(paths.topic_path("secured")) is None

    settings.ZOOKEEPER_AUTH, settings.ZOOKEEPER_ACL = f"digest:{USER}:{PASSWORD}", "1"
    created = client.post("/api/v1/clusters/acl/topics/", body, content_type="application/json")
    assert created.status_code == 201, created.content
    acl, _ = owner.get_acls(paths.topic_path("secured"))
    assert {(a.perms, a.id.scheme) for a in acl} == {(Permissions.ALL, "digest"), (Permissions.READ, "world")}
    with pytest.raises(NoAuthError):
        zk.set(paths.topic_path("secured"), b"{}")
