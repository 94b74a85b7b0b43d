"""``manage.py audit_retention [--dry-run] [--days N]``: the audit retention cleanup, by hand."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "Delete audit actions and state changes older than AUDIT_RETENTION_DAYS (default 365), in batches."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count what would be deleted, delete nothing")
        parser.add_argument("--days", type=int, default=None, help="override AUDIT_RETENTION_DAYS for this run")
        parser.add_argument("--batch", type=int, default=5000, help="rows deleted per transaction")

    def handle(self, *args: Any, **options: Any) -> None:
        from dashboard.audit.retention import cleanup_audit

        try:
            report = cleanup_audit(days=options["days"], dry_run=options["dry_run"], batch=options["batch"])
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        verb = "would delete" if report.dry_run else "deleted"
        self.stdout.write(
            f"{verb} {report.actions} action(s) and {report.state_changes} state change(s) older than "
            f"{report.cutoff:%Y-%m-%d %H:%M} UTC ({report.days} days); recorded as action #{report.action_id}"
        )
