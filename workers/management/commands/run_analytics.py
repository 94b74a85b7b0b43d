"""``manage.py run_analytics``: run the analytics pipeline by hand, printing progress.

Examples::

    python manage.py run_analytics                       # yesterday (UTC), every cluster
    python manage.py run_analytics --since 2024-03-01 --until 2024-03-31 --cluster prod
    python manage.py run_analytics --remote sc://spark-connect:15002 --input /data/state-change-log
    python manage.py run_analytics --master local[*]    # a JVM in this process instead of SPARK_REMOTE's server

The run is recorded like one started from the page (``AnalyticsRun``, trigger "command"), so its
status and duration show up there too.
"""

from __future__ import annotations

from argparse import ArgumentParser
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from dashboard.analytics.models import AnalyticsRun
from workers.analytics import runner
from workers.analytics.job import JobConfig, JobInputError, discover, parse_day, yesterday_utc


class Command(BaseCommand):
    help = "Compute availability and leadership analytics from the state-change logs and load them."

    def add_arguments(self, parser: ArgumentParser) -> None:
        parser.add_argument("--since", help="first day, YYYY-MM-DD (default: yesterday, UTC)")
        parser.add_argument("--until", help="last day, YYYY-MM-DD (default: --since)")
        parser.add_argument("--remote", help="Spark Connect server, sc://host:port (default: SPARK_REMOTE)")
        parser.add_argument("--master", help="run Spark in this process on this master, not SPARK_REMOTE's server")
        parser.add_argument(
            "--input", type=Path, help="state-change log base directory (default: STATE_CHANGE_LOG_DIR)"
        )
        parser.add_argument("--output", type=Path, help="results directory (default: ANALYTICS_OUTPUT_DIR)")
        parser.add_argument("--cluster", action="append", default=[], help="only this cluster (repeatable)")
        parser.add_argument("--no-compact", action="store_true", help="do not compact closed days first")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            since = parse_day(options["since"], "--since") if options["since"] else yesterday_utc()
            until = parse_day(options["until"], "--until") if options["until"] else since
            pipeline = runner.PipelineSettings.from_django(
                input_dir=options["input"],
                output_dir=options["output"],
                master=options["master"],
                remote=options["remote"] if options["remote"] else ("" if options["master"] else None),
                compact=False if options["no_compact"] else None,
            )
            # Check the input before recording a run or starting a JVM: a typo should cost nothing.
            discover(
                JobConfig(
                    input_dir=pipeline.input_dir,
                    output_dir=pipeline.output_dir,
                    since=since,
                    until=until,
                    clusters=tuple(options["cluster"]),
                    compacted_dir=pipeline.compacted_dir,
                )
            )
            run = runner.create_run(since, until, options["cluster"], trigger=AnalyticsRun.Trigger.COMMAND)
        except JobInputError as exc:
            raise CommandError(str(exc)) from None

        engine = pipeline.remote or f"{pipeline.master} (in this process)"
        self.stdout.write(f"analytics run #{run.pk}: {since}..{until} from {pipeline.input_dir} on {engine}")
        runner.execute(run, pipeline, echo=self.stdout.write)
        run.refresh_from_db()
        if run.status != AnalyticsRun.Status.SUCCEEDED:
            raise CommandError(f"analytics run #{run.pk} failed after {run.duration_s} s: {run.error}")
        self.stdout.write(self.style.SUCCESS(f"analytics run #{run.pk} succeeded in {run.duration_s} s: {run.message}"))
