"""``manage.py export_audit``: write the operator actions as daily JSON lines for the analytics job.

Examples::

    python manage.py export_audit                              # every action, to ANALYTICS_AUDIT_DIR
    python manage.py export_audit --since 2024-03-01 --out /data/audit --cluster prod

Layout: ``<out>/<cluster>/actions-YYYY-MM-DD.jsonl`` (``dashboard.analytics.audit_export``). The nightly
task and the page's "run now" button run this before the job; run it by hand before
``spark-submit workers/analytics/job.py --actions <out>``.
"""

from __future__ import annotations

from argparse import ArgumentParser
from datetime import date
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.analytics.audit_export import default_audit_dir, export_actions


class Command(BaseCommand):
    help = "Export the audit table (operator actions) as daily JSON lines per cluster for the analytics job."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--since", help="first day to export, YYYY-MM-DD (default: every day)")
        parser.add_argument("--out", type=Path, help="output directory (default: ANALYTICS_AUDIT_DIR)")
        parser.add_argument("--cluster", action="append", default=[], help="only this cluster (repeatable)")

    def handle(self, *args: Any, **options: Any) -> None:
        since: date | None = None
        if options["since"]:
            try:
                since = date.fromisoformat(options["since"].strip())
            except ValueError:
                raise CommandError(
                    f"--since {options['since']!r} is not a date: use YYYY-MM-DD, e.g. 2024-03-01"
                ) from None
        out = options["out"] or default_audit_dir()
        try:
            result = export_actions(out, since, options["cluster"])
        except (ValueError, OSError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"{result.describe()} under {out}")
