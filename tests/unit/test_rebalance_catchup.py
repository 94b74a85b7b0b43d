"""The auto rebalance's catch-up rule: a preferred replica leads again only after its ISR has been
unchanged for the configured time; any change restarts the count."""

from __future__ import annotations

import pytest

from controller_core.config import ControllerConfig
from controller_core.model import LeaderAndIsr, TopicPartition
from controller_core.rebalance_catchup import IsrTenure

TP = TopicPartition("orders", 0)


def test_a_rejoined_replica_waits_for_the_time_in_an_unchanged_isr() -> None:
    tenure = IsrTenure()
    rejoined = LeaderAndIsr(2, 5, (2, 1), zk_version=7)
    assert not tenure.ready(TP, rejoined, 1, 30.0, now=100.0)  # first seen now
    assert not tenure.ready(TP, rejoined, 1, 30.0, now=129.0)
    assert tenure.ready(TP, rejoined, 1, 30.0, now=130.0)
    churned = LeaderAndIsr(2, 5, (2, 1), zk_version=8)  # any ISR write restarts the count
    assert not tenure.ready(TP, churned, 1, 30.0, now=140.0)
    assert tenure.ready(TP, churned, 1, 30.0, now=170.0)
    assert not tenure.ready(TP, LeaderAndIsr(2, 6, (2,), 9), 1, 0.0, now=200.0)  # not in the ISR
    assert tenure.ready(TP, LeaderAndIsr(2, 6, (2, 1), 10), 1, 0.0, now=200.0)  # 0: Kafka's behaviour


def test_a_negative_time_is_refused() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        ControllerConfig(controller_id=1, zookeeper_connect="zk:2181", leader_imbalance_min_isr_seconds=-1)
