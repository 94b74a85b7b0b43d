"""The analytics benchmark's small mode runs to the end and prints every figure it promises."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts import bench_analytics
from scripts.devservices import SparkConnectServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]  # may start the shared Spark server first


def test_the_quick_benchmark_reports_each_figure(
    spark_connect: SparkConnectServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert bench_analytics.main(["--quick", "--json", "--remote", spark_connect.remote, "--dir", str(tmp_path)]) == 0
    figures = json.loads(capsys.readouterr().out)
    for key in (
        "incremental_small_s",
        "incremental_small_spark_s",
        "incremental_day_s",
        "full_s",
        "full_json_s",
        "compaction_s",
        "compact_day_s",
        "field_scan_s",
        "full_ratio",
        "full_json_ratio",
    ):
        assert isinstance(figures[key], float) and figures[key] > 0, key
    assert figures["profile"] == "quick" and figures["records"] == figures["full_records"]
    assert figures["full_cold_s"] is None and figures["full_cold_ratio"] is None  # large histories only
    # The full recompute read the compacted days (both of them, compacted by this run) and counted
    # the same records as the one from the JSON.
    assert figures["compacted_days"] == 2 and figures["full_json_records"] == figures["full_records"]
    assert 0 < figures["incremental_day_records"] < figures["full_records"]
    assert figures["incremental_day_warm_up_days"] == {"demo": 0}  # from the previous day's checkpoint
    # The 5-minute run is a cursor run: it read only the records after the cursor, not the day so far.
    assert 0 < figures["incremental_small_records"] == figures["small_records_in_window"]
    assert figures["incremental_small_engine"] == "python"  # tiny: no Spark
    assert figures["incremental_day_engine"] in ("python", "spark")
    # By server CPU too when the benchmark started the server (here it did not: no CPU figures).
    assert figures["full_cpu_ratio"] is None and figures["full_json_cpu_ratio"] is None
    assert set(figures["meets_targets"]) == {"incremental_small_s", "incremental_day_s", "full_s", "full_ratio"}
