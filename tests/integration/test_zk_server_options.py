"""ZooKeeper's ``java_options`` reach its JVM, before the main class (where the JVM reads them)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from scripts.devservices import ZooKeeperServer
from tests.support.processes import jvm_arguments

MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"


def test_the_options_are_split_as_a_shell_would_and_come_before_the_main_class(tmp_path: Path) -> None:
    server = ZooKeeperServer(host="127.0.0.1", port=1, base_dir=tmp_path, java_options="-Da=1 '-Db=two words'")
    argv = server.command()
    main = argv.index(MAIN_CLASS)
    assert "-Da=1" in argv[:main] and "-Db=two words" in argv[:main]
    plain = ZooKeeperServer(host="127.0.0.1", port=1, base_dir=tmp_path).command()
    assert len(argv) == len(plain) + 2  # nothing else changed


def test_the_suites_server_runs_with_its_java_options(zk_server: ZooKeeperServer) -> None:
    pid = zk_server.recorded_pid()
    assert pid is not None
    options = shlex.split(zk_server.java_options)
    if not options:
        pytest.skip("this server was started with no JVM options (TEST_REUSE_SERVICES=1: the product's)")
    before_main = jvm_arguments(pid, MAIN_CLASS)
    for option in options:
        assert option in before_main, (option, before_main)
