"""The Spark Connect server logs at WARN unless an operator asks for INFO (2.7 MB of plan text in the Spark tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.devservices.service_set import ServiceSet


def _confs(tmp_path: Path) -> list[str]:
    spark = ServiceSet(base_dir=tmp_path, zk_port=1, redis_port=2, spark_port=3).spark
    assert spark is not None
    command = spark.command()
    return [command[i + 1] for i, arg in enumerate(command) if arg == "--conf"]


def test_the_server_logs_warnings_and_errors_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SPARK_CONNECT_LOG_LEVEL", raising=False)
    assert "spark.log.level=WARN" in _confs(tmp_path)


def test_an_operator_gets_info_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SPARK_CONNECT_LOG_LEVEL", "INFO")
    assert "spark.log.level=INFO" in _confs(tmp_path)
