"""``manage.py demo_cluster``: start, topics through the admin path, status, kill/start/stop, Ctrl-C.

The foreground cluster runs as the real ``manage.py`` process (its Ctrl-C is part of the test), and
a refused command line is checked through the real CLI (exit code, stderr); the short subcommands
run in this process through ``call_command``: the same parser and code without a Django start-up
each (1-3 s apiece on the loaded 2-core box).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from controller_core.zk import codecs, paths
from scripts.devservices import REPO_ROOT
from tests.support.processes import in_process
from tests.support.zk import wait_for


def manage(*args: str, timeout: float = 90.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", "demo_cluster", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def demo_cluster(*args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py demo_cluster *args`` in this process (tests/support/processes.py ``in_process``)."""
    return in_process("demo_cluster", *args)


def pids(var_dir: Path) -> dict[int, int]:
    found = {}
    for pid_file in var_dir.glob("broker-*.pid"):
        found[int(pid_file.stem.split("-")[1])] = int(pid_file.read_text().split()[0])  # "PID START_TICKS"
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}").exists() and Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z"


@pytest.mark.slow
def test_the_demo_cluster_runs_brokers_creates_topics_and_drives_faults(
    zk_chroot: str, zk: KazooClient, tmp_path: Path
) -> None:
    var_dir = tmp_path / "demo"
    out = open(tmp_path / "demo.out", "w+")  # noqa: SIM115 - read while the process writes it
    demo = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "demo_cluster",
            "--var-dir",
            str(var_dir),
            "--zookeeper",
            zk_chroot,
            "--brokers",
            "3",
            "--racks",
            "3",
            "--topics",
            "demo-a:6:3,demo-b:2:2",
            "--produce-rate",
            "5",
            "--zookeeper-session-timeout-ms",
            "4000",
            "--controlled-shutdown-retry-backoff-ms",
            "200",
        ],
        cwd=REPO_ROOT,
        stdout=out,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(
            lambda: "Ctrl-C stops" in (tmp_path / "demo.out").read_text(), timeout=90, interval=0.2, what="the demo"
        )
        printed = (tmp_path / "demo.out").read_text()
        assert "topic demo-a: created at /brokers/topics/demo-a" in printed
        assert sorted(zk.get_children(paths.BROKER_IDS_PATH)) == ["1", "2", "3"]
        assignment = codecs.decode_topic_assignment("demo-a", zk.get(paths.topic_path("demo-a"))[0])
        assert len(assignment.partitions) == 6
        assert all(len(a.replicas) == 3 for a in assignment.partitions.values())
        assert zk.exists(paths.topic_config_path("demo-a")) is not None
        racks = {b: json.loads(zk.get(paths.broker_id_path(b))[0])["rack"] for b in (1, 2, 3)}
        assert racks == {1: "rack-a", 2: "rack-b", 3: "rack-c"}

        status = demo_cluster("--var-dir", str(var_dir), "status")
        assert status.returncode == 0, status.stderr
        assert status.stdout.count(" yes ") == 3

        killed = demo_cluster("--var-dir", str(var_dir), "kill", "2")
        assert killed.returncode == 0, killed.stderr
        assert zk.exists(paths.broker_id_path(2)) is not None  # until its session expires

        started = demo_cluster("--var-dir", str(var_dir), "start", "2")
        assert started.returncode == 0, started.stderr + started.stdout
        assert "broker 2 registered" in started.stdout

        stopped = demo_cluster("--var-dir", str(var_dir), "stop", "3")
        assert stopped.returncode == 0, stopped.stderr
        assert zk.exists(paths.broker_id_path(3)) is None  # deregistered at once
        assert demo_cluster("--var-dir", str(var_dir), "stop", "3").returncode != 0  # not running any more

        running = pids(var_dir)
        demo.send_signal(signal.SIGINT)
        assert demo.wait(timeout=60) == 0
        assert not any(alive(pid) for pid in running.values())
        assert zk.get_children(paths.BROKER_IDS_PATH) == []
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        for pid in pids(var_dir).values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        out.close()


def test_status_without_a_demo_explains_how_to_start_one(tmp_path: Path) -> None:
    result = demo_cluster("--var-dir", str(tmp_path), "status")
    assert result.returncode != 0
    assert "start one with `manage.py demo_cluster`" in result.stderr


def test_bad_topic_specs_are_refused_before_anything_starts(tmp_path: Path) -> None:
    result = manage("--var-dir", str(tmp_path), "--brokers", "2", "--topics", "demo:4:3")
    assert result.returncode != 0
    assert "replication factor 3 > 2 brokers" in result.stderr
    assert not (tmp_path / "cluster.json").exists()
