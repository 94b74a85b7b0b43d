"""``manage.py run_broker --id N [--zookeeper HOST:PORT[/chroot]] ...``: run one broker agent.

A thin wrapper around ``controller_core.broker.main`` (same options, same signals and exit codes);
the ZooKeeper connect string defaults to the ``ZOOKEEPER_CONNECT`` setting.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandParser

from controller_core.broker import main as broker_main


class Command(BaseCommand):
    help = "Run one broker agent: register in ZooKeeper, serve the controller's requests, replicate."

    def add_arguments(self, parser: CommandParser) -> None:
        broker_main.add_arguments(parser)
        parser.set_defaults(zookeeper_connect=settings.ZOOKEEPER_CONNECT)

    def handle(self, *args: Any, **options: Any) -> None:
        namespace = argparse.Namespace(**options)
        logging.basicConfig(
            level=options["log_level"],
            format=f"%(asctime)s %(levelname)s [broker {options['broker_id']}] %(name)s: %(message)s",
        )
        logging.getLogger("kazoo").setLevel(logging.WARNING)
        code = broker_main.run(namespace)
        if code != broker_main.EXIT_OK:
            sys.exit(code)
