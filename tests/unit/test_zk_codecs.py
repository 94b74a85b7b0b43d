"""Kafka's ZooKeeper JSON formats and paths (reference §1.1, §1.2): exact examples and round trips."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from controller_core.model import (
    BrokerRegistration,
    EndPoint,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.zk import codecs, paths
from controller_core.zk.codecs import FeatureZNode, TopicAssignment

pytestmark = pytest.mark.unit

TP = TopicPartition


# -- /controller, /controller_epoch -------------------------------------------------------------------
def test_it_decodes_kafkas_controller_json() -> None:
    info = codecs.decode_controller(b'{"version":1,"brokerid":3,"timestamp":"1650000000000"}')
    assert (info.broker_id, info.timestamp_ms, info.version, dict(info.extra)) == (3, 1650000000000, 1, {})


def test_it_writes_the_controller_timestamp_as_a_string_and_keeps_extra_keys() -> None:
    raw = codecs.encode_controller(7, timestamp_ms=123, extra={"endpoint": "http://h:9000"})
    assert json.loads(raw) == {"version": 1, "brokerid": 7, "timestamp": "123", "endpoint": "http://h:9000"}
    assert codecs.decode_controller(raw).extra == {"endpoint": "http://h:9000"}


def test_it_reads_a_kraft_era_controller_json_and_keeps_unknown_keys() -> None:
    info = codecs.decode_controller(b'{"version":2,"brokerid":1,"timestamp":"5","kraftControllerEpoch":-1}')
    assert info.broker_id == 1 and info.extra == {"kraftControllerEpoch": -1}


def test_it_refuses_extra_keys_that_shadow_the_standard_ones() -> None:
    with pytest.raises(ValueError, match="brokerid"):
        codecs.encode_controller(1, extra={"brokerid": 2})


@pytest.mark.parametrize(
    ("raw", "message"),
    [(b"", "no data"), (b"{not json", "not valid JSON"), (b'{"version":1}', "brokerid"), (b"[]", "JSON object")],
)
def test_it_explains_a_bad_controller_znode(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        codecs.decode_controller(raw)


def test_the_controller_epoch_is_a_bare_decimal() -> None:
    assert codecs.encode_controller_epoch(5) == b"5"
    assert codecs.decode_controller_epoch(b"5") == 5
    with pytest.raises(ValueError, match="decimal"):
        codecs.decode_controller_epoch(b'{"epoch":5}')


# -- /brokers/ids/<id> -------------------------------------------------------------------------------
KAFKA_V5_EXAMPLE = (
    b'{"version":5,"host":"localhost","port":9092,"jmx_port":-1,"timestamp":"2233345666",'
    b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],'
    b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
    b'"rack":"dc1","features":{"feature1":{"min_version":1,"max_version":2}}}'
)


def test_it_decodes_kafkas_v5_registration_example() -> None:
    reg = codecs.decode_broker_registration(1, KAFKA_V5_EXAMPLE, epoch=4242)
    assert reg.id == 1 and reg.epoch == 4242 and reg.version == 5
    assert reg.endpoints == (
        EndPoint("CLIENT", "host1", 9092, "SSL"),
        EndPoint("REPLICATION", "host1", 9093, "PLAINTEXT"),
    )
    assert (reg.rack, reg.timestamp_ms, reg.jmx_port) == ("dc1", 2233345666, -1)
    assert reg.features == {"feature1": (1, 2)}


def test_it_decodes_a_version_1_registration_from_host_and_port() -> None:
    raw = b'{"version":1,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666"}'
    reg = codecs.decode_broker_registration(1, raw, epoch=1)
    assert reg.endpoints == (EndPoint("PLAINTEXT", "localhost", 9092, "PLAINTEXT"),)
    assert reg.jmx_port == 9999


def test_it_decodes_a_version_2_registration_with_the_default_protocol_map() -> None:
    raw = (
        b'{"version":2,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["PLAINTEXT://host1:9092","SSL://host1:9093"]}'
    )
    reg = codecs.decode_broker_registration(1, raw, epoch=1)
    assert [(e.listener, e.security_protocol, e.port) for e in reg.endpoints] == [
        ("PLAINTEXT", "PLAINTEXT", 9092),
        ("SSL", "SSL", 9093),
    ]
    assert reg.rack is None and reg.features == {}


def test_it_decodes_unknown_future_versions_by_the_v2_rules() -> None:
    raw = (
        b'{"version":100,"host":"localhost","port":9092,"jmx_port":9999,"timestamp":"2233345666",'
        b'"endpoints":["CLIENT://host1:9092","REPLICATION://host1:9093"],'
        b'"listener_security_protocol_map":{"CLIENT":"SSL","REPLICATION":"PLAINTEXT"},'
        b'"rack":null,"some_future_key":{"x":1}}'
    )
    reg = codecs.decode_broker_registration(2, raw, epoch=9)
    assert reg.version == 100 and reg.rack is None
    assert [e.security_protocol for e in reg.endpoints] == ["SSL", "PLAINTEXT"]


def test_it_parses_ipv6_and_empty_hosts_and_upper_cases_listeners() -> None:
    raw = b'{"version":4,"host":null,"port":-1,"jmx_port":-1,"timestamp":"1","endpoints":["plaintext://[::1]:9092","SSL://:9093"]}'
    reg = codecs.decode_broker_registration(3, raw, epoch=1)
    assert reg.endpoints == (EndPoint("PLAINTEXT", "::1", 9092, "PLAINTEXT"), EndPoint("SSL", None, 9093, "SSL"))


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"version":0,"host":"h","port":1}', "unsupported registration version 0"),
        (b'{"version":4,"endpoints":["CLIENT://h:1"]}', "no security protocol for listener 'CLIENT'"),
        (b'{"version":4,"endpoints":"PLAINTEXT://h:1"}', "'endpoints' must be a list"),
        (b'{"version":5,"endpoints":["PLAINTEXT://h:1"],"features":{"f":{"min_version":"1"}}}', "integer"),
        (b"nope", "not valid JSON"),
    ],
)
def test_it_explains_a_bad_registration(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        codecs.decode_broker_registration(1, raw, epoch=1)


def test_it_encodes_version_5_with_the_first_plaintext_endpoint_as_host_and_port() -> None:
    reg = BrokerRegistration(
        id=4,
        endpoints=(EndPoint("CONTROL", "h", 9000, "SSL"), EndPoint("INTERNAL", "h", 9092, "PLAINTEXT")),
        rack="r1",
        timestamp_ms=77,
        features={"metadata.version": (1, 3)},
    )
    body = json.loads(codecs.encode_broker_registration(reg))
    assert body == {
        "version": 5,
        "host": "h",
        "port": 9092,
        "jmx_port": -1,
        "timestamp": "77",
        "endpoints": ["CONTROL://h:9000", "INTERNAL://h:9092"],
        "listener_security_protocol_map": {"CONTROL": "SSL", "INTERNAL": "PLAINTEXT"},
        "rack": "r1",
        "features": {"metadata.version": {"min_version": 1, "max_version": 3}},
    }
    again = codecs.decode_broker_registration(4, codecs.encode_broker_registration(reg), epoch=5)
    assert again == BrokerRegistration(4, reg.endpoints, 5, "r1", 77, -1, {"metadata.version": (1, 3)}, 5)


def test_it_writes_null_host_and_port_minus_one_without_a_plaintext_endpoint_and_omits_no_rack() -> None:
    body = json.loads(codecs.encode_broker_registration(BrokerRegistration(1, (EndPoint("SSL", "h", 1, "SSL"),))))
    assert body["host"] is None and body["port"] == -1 and "rack" not in body and body["features"] == {}
    assert body["timestamp"].isdigit()


# -- /brokers/topics/<t> -----------------------------------------------------------------------------
KAFKA_TOPIC_EXAMPLE = (
    b'{"version":3,"partitions":{"0":[1,2,3,4],"1":[2,3,1]},"adding_replicas":{"0":[3]},'
    b'"removing_replicas":{"0":[4]},"topic_id":"Vx3tYpc3QyKZ1nF2t4mHkQ"}'
)


def test_it_decodes_kafkas_v3_topic_example() -> None:
    decoded = codecs.decode_topic_assignment("t", KAFKA_TOPIC_EXAMPLE)
    assert decoded.topic_id == "Vx3tYpc3QyKZ1nF2t4mHkQ"
    assert decoded.partitions == {0: ReplicaAssignment((1, 2, 3, 4), (3,), (4,)), 1: ReplicaAssignment((2, 3, 1))}
    assert decoded.partitions[0].origin_replicas == (1, 2, 4)
    assert decoded.partitions[0].target_replicas == (1, 2, 3)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}',
        b'{"version":2,"partitions":{"0":[1,2],"1":[2,1]},"adding_replicas":{},"removing_replicas":{}}',
        b'{"version":3,"partitions":{"0":[1,2],"1":[2,1]},"adding_replicas":{},"removing_replicas":{}}',
    ],
)
def test_it_decodes_versions_1_to_3_tolerantly(raw: bytes) -> None:
    assert codecs.decode_topic_assignment("t", raw) == TopicAssignment(
        None, {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1))}
    )


def test_it_always_writes_adding_and_removing_and_the_topic_id_only_when_known() -> None:
    assignment = {1: ReplicaAssignment((2, 3)), 0: ReplicaAssignment((1, 2, 3), (3,), (4,))}
    assert json.loads(codecs.encode_topic_assignment(assignment)) == {
        "version": 3,
        "partitions": {"0": [1, 2, 3], "1": [2, 3]},
        "adding_replicas": {"0": [3]},
        "removing_replicas": {"0": [4]},
    }
    plain = json.loads(codecs.encode_topic_assignment({0: ReplicaAssignment((1,))}, "abc"))
    assert plain["adding_replicas"] == {} and plain["removing_replicas"] == {} and plain["topic_id"] == "abc"
    assert codecs.decode_topic_assignment("t", codecs.encode_topic_assignment(assignment, "id")) == TopicAssignment(
        "id", assignment
    )


def test_a_topic_znode_without_data_has_no_partitions_and_bad_keys_are_explained() -> None:
    assert codecs.decode_topic_assignment("t", b"") == TopicAssignment(None, {})
    with pytest.raises(ValueError, match="decimal strings"):
        codecs.decode_topic_assignment("t", b'{"version":3,"partitions":{"a":[1]}}')
    with pytest.raises(ValueError, match="list of integers"):
        codecs.decode_topic_assignment("t", b'{"version":3,"partitions":{"0":[1,"2"]}}')


@pytest.mark.parametrize("replicas", ["[1,true]", "[1,2.0]", "[1,null]", "[[1]]", '{"1":2}', "3"])
def test_replica_lists_hold_integers_only(replicas: str) -> None:
    raw = b'{"version":3,"partitions":{"0":[1,2],"1":%s}}' % replicas.encode()
    with pytest.raises(ValueError, match=r"partitions\[1\]: expected a list of integers"):
        codecs.decode_topic_assignment("t", raw)


def test_a_bulk_decode_shares_one_assignment_per_replica_list() -> None:
    """A failover decodes 100,000 partitions: equal replica lists (most of them) share one object."""
    shared: dict[tuple[int, ...], ReplicaAssignment] = {}
    a = codecs.decode_topic_assignment("a", b'{"version":3,"partitions":{"0":[1,2],"1":[2,1],"2":[1,2]}}', shared)
    b = codecs.decode_topic_assignment("b", b'{"version":3,"partitions":{"0":[2,1]}}', shared)
    assert a.partitions == {0: ReplicaAssignment((1, 2)), 1: ReplicaAssignment((2, 1)), 2: ReplicaAssignment((1, 2))}
    assert a.partitions[0] is a.partitions[2] and b.partitions[0] is a.partitions[1]
    moving = codecs.decode_topic_assignment(
        "c", b'{"version":3,"partitions":{"0":[1,2,3]},"adding_replicas":{"0":[3]},"removing_replicas":{}}', shared
    )
    assert moving.partitions[0] == ReplicaAssignment((1, 2, 3), (3,), ())


def test_new_topic_ids_look_like_kafkas() -> None:
    for _ in range(200):
        topic_id = codecs.new_topic_id()
        assert len(topic_id) == 22 and not topic_id.startswith("-")
        assert len(base64.urlsafe_b64decode(topic_id + "==")) == 16


# -- partition state ---------------------------------------------------------------------------------
def test_it_round_trips_kafkas_partition_state_example_exactly() -> None:
    raw = b'{"controller_epoch":50,"leader":5,"version":1,"leader_epoch":7,"isr":[5,6]}'
    state = codecs.decode_partition_state(raw, zk_version=12)
    assert state == LeaderIsrAndControllerEpoch(LeaderAndIsr(5, 7, (5, 6), 12), 50)
    assert codecs.encode_partition_state(state) == raw


def test_it_ignores_the_leader_recovery_state_of_newer_kafkas() -> None:
    raw = b'{"controller_epoch":1,"leader":-1,"version":1,"leader_epoch":0,"isr":[3],"leader_recovery_state":1}'
    assert codecs.decode_partition_state(raw, 0).leader_and_isr == LeaderAndIsr(-1, 0, (3,), 0)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "no data"),
        (b"{", "not valid JSON"),
        (b'{"leader":1,"leader_epoch":1,"isr":[1]}', "controller_epoch"),
        (b'{"controller_epoch":1,"leader":"1","leader_epoch":1,"isr":[1]}', "wrong field types"),
        (b'{"controller_epoch":1,"leader":1,"leader_epoch":1,"isr":[true]}', "list of integers"),
        (b"[1]", "malformed"),
    ],
)
def test_it_explains_a_bad_partition_state(raw: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        codecs.decode_partition_state(raw, 0)


def test_the_batched_state_encoder_writes_the_same_bytes_as_the_single_one() -> None:
    states = [
        LeaderAndIsr(5, 7, (5, 6)),
        LeaderAndIsr(-1, 0, ()),
        LeaderAndIsr(6, 8, (5, 6)),  # an ISR seen before: its joined members are reused
        LeaderAndIsr(12, 2_147_483_647, (12, 3, 1000)),
    ]
    assert codecs.encode_leader_and_isr_many(states, 50) == [codecs.encode_leader_and_isr(s, 50) for s in states]
    assert codecs.encode_leader_and_isr_many(states[:1], 50) == [
        b'{"controller_epoch":50,"leader":5,"version":1,"leader_epoch":7,"isr":[5,6]}'
    ]
    assert codecs.encode_leader_and_isr_many([], 1) == []


def test_100k_partition_states_round_trip() -> None:
    """Bulk decoding at controller scale (its speed is measured by scripts/bench_store.py)."""
    raws = [
        codecs.encode_partition_state(LeaderIsrAndControllerEpoch(LeaderAndIsr(i % 7, i, (1, 2, 3)), 4))
        for i in range(100_000)
    ]
    for i, raw in enumerate(raws):
        decoded = codecs.decode_partition_state(raw, i)
        assert decoded.leader_and_isr == LeaderAndIsr(i % 7, i, (1, 2, 3), i)
        assert decoded.controller_epoch == 4


# -- admin znodes and notifications -----------------------------------------------------------------
def test_it_encodes_reassignments_exactly_as_kafka_does() -> None:
    raw = codecs.encode_reassignment({TP("foo", 0): [1, 2]})
    assert raw == b'{"version":1,"partitions":[{"topic":"foo","partition":0,"replicas":[1,2]}]}'
    assert codecs.decode_reassignment(raw) == {TP("foo", 0): (1, 2)}


def test_it_explains_a_bad_reassignment() -> None:
    with pytest.raises(ValueError, match="'partitions' must be a list"):
        codecs.decode_reassignment(b'{"version":1}')
    with pytest.raises(ValueError, match="replicas"):
        codecs.decode_reassignment(b'{"version":1,"partitions":[{"topic":"a","partition":0}]}')


def test_it_round_trips_preferred_replica_election_and_isr_change_notifications() -> None:
    raw = b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":1}]}'
    assert codecs.decode_preferred_replica_election(raw) == {TP("t", 0), TP("t", 1)}
    assert codecs.encode_preferred_replica_election([TP("t", 0), TP("t", 1), TP("t", 0)]) == raw
    isr = b'{"version":1,"partitions":[{"topic":"topic-a","partition":0},{"topic":"topic-b","partition":0}]}'
    assert codecs.decode_isr_change_notification(isr) == {TP("topic-a", 0), TP("topic-b", 0)}
    assert codecs.encode_isr_change_notification([TP("topic-a", 0), TP("topic-b", 0)]) == isr


def test_it_round_trips_log_dir_events() -> None:
    assert codecs.encode_log_dir_event(3) == b'{"version":1,"broker":3,"event":1}'
    assert codecs.decode_log_dir_event(b'{"version":1,"broker":3,"event":1}') == 3


def test_it_round_trips_configs_with_string_values_only() -> None:
    raw = b'{"version":1,"config":{"unclean.leader.election.enable":"true"}}'
    assert codecs.decode_entity_config(raw) == {"unclean.leader.election.enable": "true"}
    assert codecs.encode_entity_config({"unclean.leader.election.enable": "true"}) == raw
    assert codecs.decode_entity_config(b"") == {}
    with pytest.raises(ValueError, match="must be a string"):
        codecs.decode_entity_config(b'{"version":1,"config":{"retention.ms":100}}')
    with pytest.raises(ValueError, match="string -> string"):
        codecs.encode_entity_config({"retention.ms": 100})  # type: ignore[dict-item]
    assert codecs.encode_config_change_notification("topics/t") == b'{"version":2,"entity_path":"topics/t"}'
    assert codecs.decode_config_change_notification(b'{"version":2,"entity_path":"topics/t"}') == "topics/t"


def test_it_round_trips_cluster_id_and_feature_znodes() -> None:
    assert codecs.encode_cluster_id("abc") == b'{"version":"1","id":"abc"}'
    assert codecs.decode_cluster_id(b'{"version":"1","id":"abc"}') == "abc"
    node = FeatureZNode(True, {"f": (1, 2)})
    assert json.loads(codecs.encode_feature_znode(node)) == {
        "version": 1,
        "status": 1,
        "features": {"f": {"min_version_level": 1, "max_version_level": 2}},
    }
    assert codecs.decode_feature_znode(codecs.encode_feature_znode(node)) == node
    with pytest.raises(ValueError, match="unknown status"):
        codecs.decode_feature_znode(b'{"version":1,"status":7,"features":{}}')


# -- paths -------------------------------------------------------------------------------------------
def test_paths_are_kafkas() -> None:
    tp = TP("orders", 3)
    assert paths.topic_path("orders") == "/brokers/topics/orders"
    assert paths.partitions_path("orders") == "/brokers/topics/orders/partitions"
    assert paths.partition_path(tp) == "/brokers/topics/orders/partitions/3"
    assert paths.partition_state_path(tp) == "/brokers/topics/orders/partitions/3/state"
    assert paths.parse_partition_state_path("/brokers/topics/orders/partitions/3/state") == tp
    assert paths.parse_partition_state_path("/brokers/topics/orders") is None
    assert paths.broker_id_path(5) == "/brokers/ids/5"
    assert paths.delete_topic_path("orders") == "/admin/delete_topics/orders"
    assert paths.topic_config_path("orders") == "/config/topics/orders"
    assert paths.broker_config_path("<default>") == "/config/brokers/<default>"
    assert (
        paths.isr_change_notification_path("isr_change_0000000001") == "/isr_change_notification/isr_change_0000000001"
    )
    assert paths.sequence_number("isr_change_0000000012", paths.ISR_CHANGE_NOTIFICATION_PREFIX) == 12
    assert set(paths.PERSISTENT_PATHS) == {
        "/consumers",
        "/brokers/ids",
        "/brokers/topics",
        "/config/changes",
        "/admin/delete_topics",
        "/brokers/seqid",
        "/isr_change_notification",
        "/latest_producer_id_block",
        "/log_dir_event_notification",
        "/config/topics",
        "/config/clients",
        "/config/users",
        "/config/brokers",
        "/config/ips",
    }


def test_requests_we_encode_ourselves_add_the_chroot_as_kazoo_does() -> None:
    under = paths.under_chroot("/kafka")
    assert under("/brokers/ids/1") == "/kafka/brokers/ids/1"
    assert under("/") == "/kafka"  # the chroot itself, never "/kafka/"
    for none in (None, ""):
        assert paths.under_chroot(none)("/") == "/"
        assert paths.under_chroot(none)("/controller") == "/controller"


@pytest.mark.parametrize("bad", ["", "a/b", ".."])
def test_path_builders_refuse_names_that_escape_their_subtree(bad: str) -> None:
    with pytest.raises(ValueError, match="topic name"):
        paths.topic_path(bad)
    with pytest.raises(ValueError, match="topic name"):
        paths.partition_state_path(TP(bad, 0))
    with pytest.raises(ValueError, match="topic name"):
        paths.delete_topic_path(bad)


@pytest.mark.parametrize(
    ("name", "ok"), [("orders.v1_x-2", True), ("", False), ("..", False), ("a b", False), ("x" * 250, False)]
)
def test_topic_names_are_validated_as_kafka_does(name: str, ok: bool) -> None:
    if ok:
        paths.validate_topic_name(name)
    else:
        with pytest.raises(ValueError):
            paths.validate_topic_name(name)


@pytest.mark.parametrize(
    "raw",
    [
        KAFKA_TOPIC_EXAMPLE,
        b'{"version":1,"partitions":{"0":[1,2],"1":[2,1]}}',
        b'{"version":3,"partitions":null,"topic_id":null}',
        b'{"version":3,"partitions":{"01":[1]}}',  # Kafka's reader takes it as 1; msgspec leaves it to the checks
        b'{"version":3,"partitions":{"-1":[1]}}',
        b'{"version":3,"partitions":{"0":[1]},"adding_replicas":{"-2":[1]}}',
        b'{"version":3,"partitions":{"0":[1,true]}}',
        b'{"version":3,"partitions":{"0":[1]},"topic_id":7}',
        b"[1]",
        b"{",
    ],
)
def test_the_msgspec_topic_decoder_accepts_and_rejects_exactly_what_the_checked_one_does(raw: bytes) -> None:
    def outcome(decode: Any) -> object:
        try:
            return decode()
        except ValueError as exc:
            return ("error", str(exc))

    checked = outcome(lambda: codecs._decode_topic_assignment_checked("t", raw, None))
    assert outcome(lambda: codecs.decode_topic_assignment("t", raw)) == checked


def test_a_bulk_state_decode_shares_equal_isrs_and_names_each_unreadable_one() -> None:
    raws = [
        b'{"controller_epoch":4,"leader":1,"version":1,"leader_epoch":2,"isr":[1,2,3]}',
        b'{"controller_epoch":4,"leader":"2","version":1,"leader_epoch":2,"isr":[2,3]}',
        None,
        b'{"controller_epoch":5,"leader":2,"version":1,"leader_epoch":0,"isr":[1,2,3]}',
    ]
    isrs: dict[tuple[int, ...], tuple[int, ...]] = {}
    states, failed = codecs.decode_partition_states(raws, [7, 8, -1, 9], isrs)
    first, fourth = states[0], states[3]
    assert first == LeaderIsrAndControllerEpoch(LeaderAndIsr(1, 2, (1, 2, 3), 7), 4)
    assert fourth == LeaderIsrAndControllerEpoch(LeaderAndIsr(2, 0, (1, 2, 3), 9), 5)
    assert first.leader_and_isr.isr is fourth.leader_and_isr.isr
    assert states[1] is None and states[2] is None
    assert set(failed) == {1, 2}
    assert "$.leader" in str(failed[1]) and "no data" in str(failed[2])
