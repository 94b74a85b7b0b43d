"""``manage.py run_controller``: one controller candidate in the foreground.

The same candidate Celery workers with the ``controller`` role run; handy for debugging, tests and
hosts without Celery. Ctrl-C (or SIGTERM) resigns cleanly.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from controller_core.runner import split_chroot
from controller_core.signal_wait import wait_for
from workers.controller_host import ControllerHost


class Command(BaseCommand):
    help = "Run a controller candidate (Kafka ZooKeeper-era semantics) until interrupted."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--id", type=int, required=True, help="controller id written to /controller")
        parser.add_argument("--zookeeper", help="HOST:PORT[,HOST:PORT][/chroot] (default: the cluster's)")
        parser.add_argument(
            "--cluster", default=None, help="dashboard cluster name (default CONTROLLER_CLUSTER or demo)"
        )
        parser.add_argument("--api-port", type=int, default=None, help="port of the broker-facing API (0 = any)")
        parser.add_argument(
            "--rebalance-interval", type=float, default=None, help="leader.imbalance.check.interval.seconds"
        )
        parser.add_argument("--unclean", action="store_true", help="unclean.leader.election.enable=true")
        parser.add_argument(
            "--rebalance-min-isr",
            type=float,
            default=None,
            help="auto rebalance waits until the preferred replica has been in an unchanged ISR this many seconds",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            host = ControllerHost.from_environment(options["id"], options["cluster"])
            changes: dict[str, Any] = {}
            if options["zookeeper"]:
                split_chroot(options["zookeeper"])
                changes["zookeeper_connect"] = options["zookeeper"]
            if options["api_port"] is not None:
                changes["api_port"] = options["api_port"]
            if options["rebalance_interval"] is not None:
                changes["leader_imbalance_check_interval_seconds"] = options["rebalance_interval"]
            if options["rebalance_min_isr"] is not None:
                changes["leader_imbalance_min_isr_seconds"] = options["rebalance_min_isr"]
            if options["unclean"]:
                changes["unclean_leader_election_enable"] = True
            if changes:
                host = host.with_config(**changes)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        stop = threading.Event()
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        host.start()
        self.stdout.write(f"controller candidate {options['id']} running for {host.cluster}; Ctrl-C to stop")
        wait_for(stop)  # not stop.wait(): see controller_core.signal_wait
        self.stdout.write("resigning ...")
        host.stop()
