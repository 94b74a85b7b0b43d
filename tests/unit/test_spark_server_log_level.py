"""The Spark Connect server logs at WARN unless an operator asks for another level (2.7 MB of plan text
in the Spark tests at INFO); a level Spark does not know is refused before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from scripts.devservices import cli
from scripts.devservices.process import ServiceError
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


def test_a_level_spark_does_not_know_is_refused_before_anything_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SPARK_CONNECT_LOG_LEVEL", "VERBOSE")
    with pytest.raises(ServiceError, match=r"'VERBOSE' is not one of ALL, TRACE, DEBUG, INFO, WARN, ERROR, FATAL, OFF"):
        _confs(tmp_path)
    monkeypatch.setenv("SPARK_CONNECT_LOG_LEVEL", "debug")  # as Spark itself, in any case
    assert "spark.log.level=DEBUG" in _confs(tmp_path)


def test_the_services_command_says_what_is_wrong(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SPARK_CONNECT_LOG_LEVEL", "LOUD")
    monkeypatch.setenv("SERVICES_DIR", str(tmp_path))
    assert cli.main(["status"]) == 1
    assert "log level 'LOUD' is not one of" in capsys.readouterr().err
