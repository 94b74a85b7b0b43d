"""The standby view's path classification and how a re-read changes it (no ZooKeeper: reads are the
multi-read result tuples the follower gets)."""

from __future__ import annotations

from kazoo.exceptions import NoAuthError, NoNodeError
from kazoo.protocol.states import ZnodeStat

from controller_core.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.standby.view import ClusterView, Kind, Target, classify
from controller_core.zk import codecs
from controller_core.zk.multiread import DataResult


def _stat(version: int = 0, czxid: int = 5, mzxid: int = 9) -> ZnodeStat:
    return ZnodeStat(czxid, mzxid, 0, 0, version, 0, 0, 0, 10, 0, mzxid)


def test_paths_are_classified_as_the_failover_reads_them() -> None:
    assert classify("/brokers/ids/3") == Target(Kind.BROKER, 3)
    assert classify("/brokers/topics/orders") == Target(Kind.TOPIC, "orders")
    assert classify("/brokers/topics/orders/partitions/2/state") == Target(Kind.STATE, TopicPartition("orders", 2))
    assert classify("/admin/delete_topics/orders") == Target(Kind.DELETION, "orders")
    assert classify("/admin/reassign_partitions") == Target(Kind.REASSIGNMENT)
    assert classify("/admin/preferred_replica_election") == Target(Kind.PREFERRED)
    ignored_paths = ["/brokers", "/brokers/ids", "/brokers/seqid", "/brokers/ids/x", "/admin", "/admin/delete_topics"]
    ignored_paths += ["/brokers/topics/orders/partitions", "/brokers/topics/orders/partitions/2"]
    ignored_paths += ["/brokers/topics/orders/partitions/x/state", "/brokers/topics//partitions/2/state"]
    ignored_paths += ["/brokers/topics/orders/partition/2/state", "/admin/topics/orders/partitions/2/state"]
    for ignored in ignored_paths:
        assert classify(ignored) is None, ignored


def test_a_re_read_sets_or_removes_the_entry() -> None:
    view = ClusterView()
    tp = TopicPartition("orders", 0)
    state = LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 4, (1, 2)), 3)
    view.apply(
        Target(Kind.TOPIC, "orders"),
        DataResult(codecs.encode_topic_assignment({0: ReplicaAssignment.of([1, 2])}, "id"), _stat()),
    )
    view.apply(Target(Kind.STATE, tp), DataResult(codecs.encode_partition_state(state), _stat(version=7, mzxid=20)))
    reg = BrokerRegistration(1, (EndPoint("PLAINTEXT", "h", 9092),))
    view.apply(Target(Kind.BROKER, 1), DataResult(codecs.encode_broker_registration(reg), _stat(czxid=42)))
    assert view.assignments_for(["orders", "gone"])["orders"].topic_id == "id"
    assert view.leadership_for([tp])[tp].leader_and_isr.zk_version == 7
    assert view.brokers[1].epoch == 42 and view.max_zxid == 20
    view.apply(Target(Kind.STATE, tp), DataResult(b"{not json", _stat(version=8)))
    assert view.leadership_for([tp]) == {}  # unreadable: left out, as the store's bulk read does
    view.apply(Target(Kind.STATE, tp), DataResult(codecs.encode_partition_state(state), _stat(version=9)))
    view.apply(Target(Kind.TOPIC, "orders"), DataResult(None, None, NoNodeError()))
    assert "orders" not in view.topics and view.leadership_for([tp]) == {}
    view.apply(Target(Kind.BROKER, 1), DataResult(None, None, NoAuthError()))
    assert 1 not in view.brokers


def test_admin_znodes_invalid_json_reads_as_an_empty_request() -> None:
    view = ClusterView()
    view.apply(Target(Kind.REASSIGNMENT), DataResult(b"[", _stat()))
    view.apply(Target(Kind.PREFERRED), DataResult(b"[", _stat()))
    assert view.reassignment == {} and view.preferred_election == set()
    view.apply(Target(Kind.REASSIGNMENT), DataResult(None, None, NoNodeError()))
    view.apply(Target(Kind.DELETION, "t"), DataResult(b"", _stat()))
    assert view.reassignment is None and view.topic_deletions == {"t"}
    view.apply(Target(Kind.DELETION, "t"), DataResult(None, None, NoNodeError()))
    assert view.topic_deletions == set()


def test_states_read_one_by_one_share_equal_isrs() -> None:
    """A standby reads states one znode at a time: equal ISRs (most of them) must still share one tuple,
    as a failover's bulk read shares them, or a million partitions keep ~64 MB of copies."""
    view = ClusterView()
    tps = [TopicPartition("orders", p) for p in range(3)]
    for p, tp in enumerate(tps):
        isr = (1, 2) if p < 2 else (2, 1)
        state = LeaderIsrAndControllerEpoch(LeaderAndIsr(isr[0], 4, isr), 3)
        view.apply(Target(Kind.STATE, tp), DataResult(codecs.encode_partition_state(state), _stat(version=p)))
    first, second, third = (view.leadership_for([tp])[tp].leader_and_isr.isr for tp in tps)
    assert first == second == (1, 2) and first is second
    assert third == (2, 1)
