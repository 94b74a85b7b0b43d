"""ReplicaLog: offsets, high watermark bounds, leader-epoch cache, truncation and checkpoints."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller_core.broker.checkpoint import load_logs, save_logs
from controller_core.broker.log import ReplicaLog
from controller_core.model import TopicPartition


def test_it_appends_and_records_each_epochs_start_offset() -> None:
    log = ReplicaLog()
    assert log.append(5, leader_epoch=0) == 0
    assert log.append(3, leader_epoch=0) == 5
    assert log.append(2, leader_epoch=2) == 8
    assert log.log_end_offset == 10
    assert log.epochs == ((0, 0), (2, 8))
    assert log.latest_epoch == 2


def test_an_empty_append_records_no_epoch() -> None:
    log = ReplicaLog()
    log.append(0, leader_epoch=4)
    assert log.epochs == ()
    assert log.latest_epoch == -1


def test_it_keeps_the_high_watermark_within_the_log() -> None:
    log = ReplicaLog()
    log.append(10, 0)
    log.high_watermark = 50
    assert log.high_watermark == 10
    log.high_watermark = -3
    assert log.high_watermark == 0


def test_truncation_drops_messages_and_the_epochs_that_wrote_only_them() -> None:
    log = ReplicaLog()
    log.append(5, 0)
    log.append(5, 1)
    log.append(5, 2)
    log.high_watermark = 12
    assert log.truncate_to(7)
    assert (log.log_end_offset, log.high_watermark) == (7, 7)
    assert log.epochs == ((0, 0), (1, 5))
    assert not log.truncate_to(9)  # nothing beyond the LEO to drop


def test_assigning_an_epoch_replaces_the_history_it_contradicts() -> None:
    log = ReplicaLog()
    log.append(5, 1)
    log.append(5, 3)
    log.assign_epoch_start_offset(2, 5)  # epoch 3's entry starting at 5 is no longer true
    assert log.epochs == ((1, 0), (2, 5))
    log.assign_epoch_start_offset(2, 7)  # same epoch, later offset: nothing to change
    assert log.epochs == ((1, 0), (2, 5))
    log.assign_epoch_start_offset(-1, 9)  # unknown epochs are ignored
    assert log.epochs == ((1, 0), (2, 5))


def test_epoch_runs_describe_a_range_of_messages() -> None:
    log = ReplicaLog()
    log.append(5, 0)
    log.append(5, 2)
    log.append(5, 4)
    assert log.epoch_runs(3, 12) == ((0, 3), (2, 5), (4, 10))
    assert log.epoch_runs(6, 8) == ((2, 6),)
    assert log.epoch_runs(8, 8) == ()


def test_a_follower_copies_the_leaders_epochs_with_the_messages() -> None:
    leader, follower = ReplicaLog(), ReplicaLog()
    leader.append(4, 1)
    leader.append(4, 3)
    follower.append_replicated(6, leader.epoch_runs(0, 6))
    follower.append_replicated(2, leader.epoch_runs(6, 8))
    assert follower.log_end_offset == 8
    assert follower.epochs == leader.epochs


def test_the_log_start_only_moves_forward() -> None:
    log = ReplicaLog()
    log.append(10, 0)
    log.append(10, 1)
    log.maybe_increment_log_start_offset(12)
    assert (log.log_start_offset, log.high_watermark) == (12, 12)
    assert log.epochs == ((1, 12),)
    log.maybe_increment_log_start_offset(5)
    assert log.log_start_offset == 12


def test_truncate_fully_restarts_the_log() -> None:
    log = ReplicaLog()
    log.append(10, 0)
    log.truncate_fully_and_start_at(40)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.epochs) == (40, 40, 40, ())


def test_it_refuses_inconsistent_offsets() -> None:
    with pytest.raises(ValueError, match="high watermark"):
        ReplicaLog(0, 5, 9)
    with pytest.raises(ValueError, match="log start offset"):
        ReplicaLog(6, 5)


def test_a_checkpoint_restores_every_log(tmp_path: Path) -> None:
    log = ReplicaLog()
    log.append(7, 0)
    log.append(3, 2)
    log.high_watermark = 9
    save_logs(tmp_path, 1, {TopicPartition("t", 0): log})
    restored = load_logs(tmp_path, 1)[TopicPartition("t", 0)]
    assert restored.to_dict() == log.to_dict()
    assert load_logs(tmp_path / "elsewhere", 1) == {}


def test_a_checkpoint_of_another_broker_is_refused(tmp_path: Path) -> None:
    save_logs(tmp_path, 1, {})
    with pytest.raises(ValueError, match="belongs to broker 1"):
        load_logs(tmp_path, 2)
    (tmp_path / "log-checkpoint.json").write_text("{not json")
    with pytest.raises(ValueError, match="not JSON"):
        load_logs(tmp_path, 1)
