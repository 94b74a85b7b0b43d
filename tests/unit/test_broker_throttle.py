"""Replication throttles (KIP-73) in the broker agent: Kafka's config formats, the quota, and the
leader side serving only what the quota allows to replicas outside the ISR."""

from __future__ import annotations

import json

import pytest

from controller_core.broker.config import BrokerConfig
from controller_core.broker.dynamic_config import entity_of_notification
from controller_core.broker.replica_manager import AppendResult, ReplicaManager
from controller_core.broker.throttle import (
    FOLLOWER_RATE,
    FOLLOWER_REPLICAS,
    LEADER_RATE,
    LEADER_REPLICAS,
    Quota,
    ThrottledReplicas,
    ThrottleState,
    format_pairs,
    parse_rate,
)
from controller_core.model import TopicPartition
from controller_core.protocol.messages import (
    FetchPartition,
    FetchRequest,
    LeaderAndIsrPartitionState,
    LeaderAndIsrRequest,
)
from controller_core.zk import codecs

T0 = TopicPartition("orders", 0)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- Kafka's formats, as its documentation writes them ---------------------------------------------


def test_throttled_replica_lists_parse_and_format_as_kafka_writes_them() -> None:
    # kafka-reassign-partitions writes e.g. leader.replication.throttled.replicas=0:101,0:102,1:101
    parsed = ThrottledReplicas.parse("0:101,0:102,1:101")
    assert parsed.pairs == {(0, 101), (0, 102), (1, 101)}
    assert parsed.format() == "0:101,0:102,1:101"
    assert ThrottledReplicas.parse(" 1:2 , 0:3 ").format() == "0:3,1:2"
    assert ThrottledReplicas.parse("*").everything and ThrottledReplicas.parse("*").names(7, 9)
    assert not ThrottledReplicas.parse("").names(0, 1)
    assert format_pairs([(1, 5), (0, 4), (1, 5)]) == "0:4,1:5"


@pytest.mark.parametrize("bad", ["0", "a:1", "0:1,", "0:-1", "*,0:1", "0:1:2"])
def test_a_malformed_replica_list_is_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="partition:broker"):
        ThrottledReplicas.parse(bad)


@pytest.mark.parametrize("bad", ["0", "-5", "1.5", "lots", ""])
def test_a_rate_must_be_a_positive_whole_number(bad: str) -> None:
    with pytest.raises(ValueError, match="positive whole number"):
        parse_rate(bad)
    assert parse_rate("10485760") == 10485760 and parse_rate(None) is None


def test_znodes_are_byte_for_byte_what_kafka_writes() -> None:
    # /config/brokers/101 after kafka-configs --entity-type brokers --entity-name 101
    #   --alter --add-config leader.replication.throttled.rate=10485760
    assert codecs.encode_entity_config({LEADER_RATE: "10485760"}) == (
        b'{"version":1,"config":{"leader.replication.throttled.rate":"10485760"}}'
    )
    assert codecs.encode_config_change_notification("brokers/101") == b'{"version":2,"entity_path":"brokers/101"}'
    assert codecs.encode_config_change_notification("brokers/<default>") == (
        b'{"version":2,"entity_path":"brokers/<default>"}'
    )
    kafka_topic = b'{"version":1,"config":{"leader.replication.throttled.replicas":"0:101,0:102"}}'
    assert codecs.decode_entity_config(kafka_topic) == {LEADER_REPLICAS: "0:101,0:102"}


def test_notifications_of_both_versions_name_their_entity() -> None:
    assert entity_of_notification(b'{"version":2,"entity_path":"topics/orders"}') == ("topics", "orders")
    assert entity_of_notification(b'{"version":2,"entity_path":"brokers/<default>"}') == ("brokers", "<default>")
    v1 = json.dumps({"version": 1, "entity_type": "brokers", "entity_name": "3"}).encode()
    assert entity_of_notification(v1) == ("brokers", "3")
    for bad in (b"nope", b"[]", b'{"version":3}', b'{"version":2,"entity_path":"x"}'):
        with pytest.raises(ValueError):
            entity_of_notification(bad)


# -- the quota ------------------------------------------------------------------------------------------


def test_the_quota_grants_the_rate_in_whole_messages_and_banks_at_most_a_second() -> None:
    clock = Clock()
    quota = Quota(1000, clock=clock)
    assert quota.acquire(10_000, 100) == 0  # starts empty: no free burst
    clock.now += 0.55
    assert quota.acquire(10_000, 100) == 500  # 550 bytes earned, whole 100-byte messages
    clock.now += 60
    assert quota.acquire(10_000, 100) == 1000  # banked at most one second
    clock.now += 1
    quota.set_rate(200)  # lowered: the bank is capped at once
    assert quota.acquire(10_000, 100) == 200
    quota.refund(100)
    assert quota.acquire(10_000, 100) == 100
    assert Quota(None).acquire(12345, 100) == 12345


def test_broker_rates_fall_back_to_the_default_entity_and_bad_values_are_reported() -> None:
    state = ThrottleState(3)
    state.set_broker_configs({}, {LEADER_RATE: "5000", FOLLOWER_RATE: "7000"})
    assert (state.leader.rate, state.follower.rate) == (5000, 7000)
    state.set_broker_configs({FOLLOWER_RATE: "9000"}, {FOLLOWER_RATE: "7000"})
    assert (state.leader.rate, state.follower.rate) == (None, 9000)
    state.set_broker_configs({LEADER_RATE: "fast", FOLLOWER_RATE: "100"}, {})
    assert state.leader.rate is None and "brokers:" + LEADER_RATE in state.errors
    state.set_topic_config("orders", {FOLLOWER_REPLICAS: "0:3,1:4"})
    assert state.follower_throttled(TopicPartition("orders", 0))
    assert not state.follower_throttled(TopicPartition("orders", 1))  # 1:4 names broker 4
    state.set_topic_config("orders", None)
    assert not state.follower_throttled(TopicPartition("orders", 0))


# -- leader side ------------------------------------------------------------------------------------------


def _leader(clock: Clock, isr: tuple[int, ...]) -> ReplicaManager:
    config = BrokerConfig(broker_id=1, zookeeper_connect="zk:2181", message_size_bytes=100)
    rm = ReplicaManager(config, clock=clock)
    rm.set_broker_epoch(5)
    state = LeaderAndIsrPartitionState(T0.topic, T0.partition, 3, 1, 1, isr, 0, (1, 2, 3))
    rm.handle_leader_and_isr(LeaderAndIsrRequest(0, 3, 5, [state], []))
    assert rm.append(T0, 1000, acks=1, min_insync_replicas=1) == AppendResult.APPENDED
    rm.throttles.set_broker_configs({LEADER_RATE: "1000"}, {})
    rm.throttles.set_topic_config(T0.topic, {LEADER_REPLICAS: "*"})
    return rm


def _fetch(rm: ReplicaManager, replica: int, offset: int) -> int:
    request = FetchRequest(replica, 10_000_000, (FetchPartition(T0.topic, T0.partition, offset, 1),))
    return rm.handle_fetch(request).partitions[0].record_count


def test_the_leader_throttles_a_replica_outside_the_isr_to_the_rate() -> None:
    clock = Clock()
    rm = _leader(clock, isr=(1, 2))
    assert _fetch(rm, 3, 0) == 0  # outside the ISR, quota empty
    copied = 0
    for _ in range(20):
        clock.now += 0.5
        copied += _fetch(rm, 3, copied)
    assert copied * 100 == 10 * 1000  # 10 s at 1000 bytes/s
    assert rm.throttles.leader.bytes_recorded == 10_000


def test_the_leader_never_throttles_an_in_sync_replica_or_an_unlisted_partition() -> None:
    clock = Clock()
    rm = _leader(clock, isr=(1, 2))
    assert _fetch(rm, 2, 0) > 0  # 2 is in the ISR
    rm.throttles.set_topic_config(T0.topic, {LEADER_REPLICAS: "0:7"})  # names another broker
    assert _fetch(rm, 3, 0) > 0
