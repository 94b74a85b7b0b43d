"""``ControllerConfig``: refused values, and the request timeout reaching the channel manager."""

from __future__ import annotations

import pytest

from controller_core.config import ControllerConfig

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"controller_id": -1}, "controller id must be >= 0"),
        ({"leader_imbalance_per_broker_percentage": 101}, "within 0..100"),
        ({"leader_imbalance_check_interval_seconds": 0}, "must be positive"),
        ({"request_timeout_s": 0}, "request timeout must be positive"),
    ],
)
def test_bad_values_are_refused_with_the_setting_named(fields: dict[str, float], message: str) -> None:
    values: dict[str, object] = {"controller_id": 1, "zookeeper_connect": "127.0.0.1:2181/kafka", **fields}
    with pytest.raises(ValueError, match=message):
        ControllerConfig(**values)  # type: ignore[arg-type]


def test_the_request_timeout_defaults_to_kafkas_30_seconds() -> None:
    assert ControllerConfig(controller_id=1, zookeeper_connect="127.0.0.1:2181").request_timeout_s == 30.0
