"""``manage.py ensure_cluster --name demo --zookeeper 127.0.0.1:21810/kafka --mode managed``.

Idempotent, for the stack runner and deploy scripts: creates the cluster, or updates its connect
string, mode and description to the given values; prints what it did.
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from dashboard.clusters.models import Cluster


class Command(BaseCommand):
    help = "Create or update a cluster registration (idempotent)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True, help="cluster name (slug)")
        parser.add_argument("--zookeeper", required=True, help="host:port[,host:port...][/chroot]")
        parser.add_argument("--mode", choices=[m.value for m in Cluster.Mode], default=Cluster.Mode.MANAGED)
        parser.add_argument("--description", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        cluster = Cluster.objects.filter(name=options["name"]).first()
        created = cluster is None
        if cluster is None:
            cluster = Cluster(name=options["name"])
        cluster.zookeeper_connect = options["zookeeper"]
        cluster.mode = options["mode"]
        if options["description"] is not None:
            cluster.description = options["description"]
        try:
            cluster.full_clean()
        except ValidationError as exc:
            problems = "; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items())
            raise CommandError(f"invalid cluster: {problems}") from None
        cluster.save()
        verb = "created" if created else "updated"
        self.stdout.write(f"cluster {cluster.name} {verb}: {cluster.zookeeper_connect} ({cluster.mode})")
