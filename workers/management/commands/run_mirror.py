"""``manage.py run_mirror --cluster NAME``: run one cluster's mirror in the foreground.

The same ``MirrorHost`` a Celery worker runs, so it contends for the same lease: start it beside
a worker and it stands by. Ctrl-C (or SIGTERM) stops it cleanly and releases the lease.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from controller_core.signal_wait import wait_for
from dashboard.clusters.models import Cluster
from workers.mirror.host import MirrorHost


class Command(BaseCommand):
    help = "Mirror a cluster's ZooKeeper (and controller stream) into Redis and push live deltas."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", required=True, help="name of a registered cluster")

    def handle(self, *args: Any, **options: Any) -> None:
        name = options["cluster"]
        if not Cluster.objects.filter(name=name).exists():
            known = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none"
            raise CommandError(f"no cluster named {name!r} (registered: {known}); see `manage.py ensure_cluster`")
        host = MirrorHost(name)
        stopping = threading.Event()

        def _stop(signum: int, _frame: object) -> None:
            stopping.set()

        signal.signal(signal.SIGINT, _stop)
        signal.signal(signal.SIGTERM, _stop)
        host.start()
        self.stdout.write(f"mirror of {name}: contending for the lease as {host.token}")
        wait_for(stopping)
        self.stdout.write(f"mirror of {name}: stopping")
        host.stop()
