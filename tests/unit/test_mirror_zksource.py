"""The mirror's admin-znode decoding: absent or unreadable data gives an empty request, never a crash."""

from __future__ import annotations

import json

import pytest

from controller_core.model import TopicPartition
from controller_core.zk import codecs
from workers.mirror import zksource


def test_admin_data_is_decoded_and_unreadable_data_is_logged_as_empty(caplog: pytest.LogCaptureFixture) -> None:
    good = json.dumps({"version": 1, "partitions": [{"topic": "t", "partition": 0, "replicas": [2, 3]}]}).encode()
    path = "/admin/reassign_partitions"
    empty: dict[TopicPartition, tuple[int, ...]] = {}
    assert zksource._decoded((good, None), codecs.decode_reassignment, path, empty) == {TopicPartition("t", 0): (2, 3)}
    assert zksource._decoded(None, codecs.decode_reassignment, path, empty) is empty
    with caplog.at_level("WARNING"):
        assert zksource._decoded((b"{not json", None), codecs.decode_reassignment, path, empty) is empty
    assert f"unreadable {path}" in caplog.text
