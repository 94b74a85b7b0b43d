"""Broker settings: Kafka's names, validated up front with messages that say which setting is wrong."""

from __future__ import annotations

import argparse

import pytest

from controller_core.broker.config import Acks, BrokerConfig
from controller_core.broker.main import add_arguments, config_from


@pytest.mark.parametrize(("text", "acks"), [("all", Acks.ALL), ("-1", Acks.ALL), ("1", Acks.LEADER), ("0", Acks.NONE)])
def test_acks_parse_like_the_producer_setting(text: str, acks: Acks) -> None:
    assert Acks.parse(text) is acks


def test_bad_acks_are_refused() -> None:
    with pytest.raises(ValueError, match="acks must be 0, 1 or all"):
        Acks.parse("2")


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"broker_id": -1}, "broker id must be >= 0"),
        ({"port": 70000}, "port must be within"),
        ({"produce_rate": -1.0}, "produce rate"),
        ({"min_insync_replicas": 0}, "min.insync.replicas"),
        ({"replica_lag_time_max_ms": 0}, "replica.lag.time.max.ms must be positive"),
        ({"controlled_shutdown_max_retries": 0}, "controlled.shutdown.max.retries"),
        ({"rack": ""}, "rack must be a non-empty string"),
    ],
)
def test_invalid_settings_name_the_setting(overrides: dict[str, object], message: str) -> None:
    settings: dict[str, object] = {"broker_id": 1, "zookeeper_connect": "127.0.0.1:2181/kafka"}
    settings.update(overrides)
    with pytest.raises(ValueError, match=message):
        BrokerConfig(**settings)  # type: ignore[arg-type]


def test_the_command_line_maps_to_the_config() -> None:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = parser.parse_args(
        [
            "--id",
            "3",
            "--zookeeper",
            "zk:2181/k",
            "--rack",
            "r1",
            "--acks",
            "all",
            "--produce-rate",
            "5",
            "--lightweight",
            "--ready-file",
            "/tmp/ready",
        ]
    )
    config = config_from(options)
    assert (config.message_size_bytes, config.controlled_shutdown_enable) == (512, True)
    other = config_from(parser.parse_args(["--id", "1", "--message-size", "100", "--no-controlled-shutdown"]))
    assert (other.message_size_bytes, other.controlled_shutdown_enable) == (100, False)
    assert (config.broker_id, config.zookeeper_connect, config.rack) == (3, "zk:2181/k", "r1")
    assert (config.acks, config.produce_rate, config.lightweight) == (Acks.ALL, 5.0, True)
    assert config.registered_host == "127.0.0.1"
    assert config.records_per_partition_fetch == 2048  # 1 MiB of 512-byte messages
