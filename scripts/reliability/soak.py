"""``scripts/soak``: the full reliability table on this machine (3-node ZooKeeper, F1-F22).

    scripts/soak [--seed N] [--runs N] [--scenarios F1,F7,...] [--zk-nodes 3] [--json FILE]

Starts a private ZooKeeper ensemble on free loopback ports (Debian jars), runs each scenario as many
times as the plan's pass figure says (reference section 6c: 50 for F3, 10 for F8, F9, F15 and F20, 20
for the others; ``--runs N`` for N each), each run with a fresh chroot and processes, fault, heal and
checker; prints one line per run and a summary table (scenario, runs, passes, p50 and p99 recovery
time, violations), and exits 1 when any run failed. F16, F17 (a real Celery worker) and F19 (a real
browser) run as their pytest tests, the same number of times, in a pytest of their own. Everything it
started is stopped at the end, also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from scripts.reliability.scenarios import RunResult, Scenario, Settings, run_scenario
from scripts.reliability.scenarios_soak import ALL_SCENARIOS
from scripts.reliability.soak_pytest import PYTEST_SCENARIOS, PytestScenario, run_pytest_scenario
from scripts.reliability.zkensemble import ZkEnsemble

#: Every scenario of the table, in number order: the harness's and the pytest-hosted ones.
_EVERY: dict[str, Scenario | PytestScenario] = {**ALL_SCENARIOS, **PYTEST_SCENARIOS}
TABLE: dict[str, Scenario | PytestScenario] = {name: _EVERY[name] for name in sorted(_EVERY, key=lambda n: int(n[1:]))}


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (p99 of 20 runs is the worst one)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(results: Sequence[RunResult]) -> list[dict[str, object]]:
    rows = []
    for name in dict.fromkeys(r.scenario for r in results):
        mine = [r for r in results if r.scenario == name]
        times = [r.recovery_s for r in mine if r.recovery_s is not None]
        rows.append(
            {
                "scenario": name,
                "title": TABLE[name].title,
                "figure": TABLE[name].figure,
                "runs": len(mine),
                "passes": sum(r.passed for r in mine),
                "p50_s": percentile(times, 50),
                "p99_s": percentile(times, 99),
                "safety_violations": sum(1 for r in mine for v in r.violations if v.safety),
                "liveness_violations": sum(1 for r in mine for v in r.violations if not v.safety),
            }
        )
    return rows


def format_table(rows: Sequence[dict[str, object]]) -> str:
    def t(value: object) -> str:
        return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)

    head = (
        "| Scenario | Fault | Pass figure | Runs | Passes | p50 recovery (s) | p99 recovery (s) "
        "| Safety viol. | Liveness viol. |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['title']} | {r['figure']} | {r['runs']} | {r['passes']} | {t(r['p50_s'])} | "
            f"{t(r['p99_s'])} | {r['safety_violations']} | {r['liveness_violations']} |"
        )
    return "\n".join(lines)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="scripts/soak", description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--runs",
        type=int,
        default=None,
        help="runs per scenario (default: the plan's count, 20 for most; see above)",
    )
    parser.add_argument("--scenarios", default=",".join(TABLE), help="comma-separated (default: all)")
    parser.add_argument("--zk-nodes", type=int, default=3, choices=(1, 3))
    parser.add_argument("--session-timeout", type=float, default=4.0, help="Ts in seconds (default 4)")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--json", type=Path, default=None, help="also write every run and the summary here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, histories)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("kazoo").setLevel(logging.CRITICAL)  # the harness's own clients see every fault
    names = [n.strip().upper() for n in args.scenarios.split(",") if n.strip()]
    unknown = [n for n in names if n not in TABLE]
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {', '.join(TABLE)}")
    if args.runs is not None and args.runs < 1:
        parser.error("--runs must be >= 1")
    runs_of = {n: args.runs if args.runs is not None else TABLE[n].plan_runs for n in names}
    # SIGTERM (kill, a CI timeout) stops the soak like Ctrl-C: every process it started is stopped
    # and the runs so far are summarised, instead of leaving an ensemble and a cluster running.
    signal.signal(signal.SIGTERM, _interrupt)
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    ensemble = ZkEnsemble(work / "zk", size=args.zk_nodes)
    settings = Settings(session_timeout_s=args.session_timeout, partitions=args.partitions)
    results: list[RunResult] = []
    started = time.time()
    counts = ", ".join(f"{n} x{runs_of[n]}" for n in names)
    print(f"soak: seed {args.seed}, runs {counts}, {args.zk_nodes}-node ZooKeeper, work {work}")

    def report(result: RunResult) -> None:
        results.append(result)
        recovery = "-" if result.recovery_s is None else f"{result.recovery_s:.2f}s"
        print(
            f"{result.scenario} run {result.run}: {'PASS' if result.passed else 'FAIL'} "
            f"recovery {recovery} ({result.duration_s:.0f}s)",
            flush=True,
        )
        if not result.passed:
            for v in result.violations[:20]:
                print(f"    {v}")
            for n in result.notes:
                print("    " + n.replace("\n", "\n    ")[:4000])

    try:
        if any(isinstance(TABLE[n], Scenario) for n in names):
            ensemble.start()
        for name in names:
            scenario = TABLE[name]
            if isinstance(scenario, PytestScenario):
                print(f"{name}: {runs_of[name]} runs of {scenario.test.split('::')[0]} (pytest) ...", flush=True)
                run_pytest_scenario(scenario, runs_of[name], work / "pytest", report)
                continue
            for run in range(runs_of[name]):
                ensemble.wait_quorum(60)
                report(
                    run_scenario(
                        scenario,
                        run,
                        work / "runs",
                        ensemble.addresses,
                        seed=args.seed,
                        settings=settings,
                        ensemble=ensemble,
                    )
                )
    except KeyboardInterrupt:
        print("interrupted; summarising the runs so far")
    finally:
        ensemble.stop()
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    rows = summary(results)
    print()
    print(
        f"Summary ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}, seed {args.seed}, "
        f"{'the plan' + chr(39) + 's' if args.runs is None else args.runs} runs each, "
        f"{args.zk_nodes}-node ZooKeeper, Ts = {args.session_timeout:g} s, {time.time() - started:.0f} s total):"
    )
    print(format_table(rows))
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "seed": args.seed,
                    "runs": runs_of,
                    "summary": rows,
                    "results": [
                        {
                            "scenario": r.scenario,
                            "run": r.run,
                            "passed": r.passed,
                            "recovery_s": r.recovery_s,
                            "violations": [str(v) for v in r.violations],
                            "notes": r.notes,
                        }
                        for r in results
                    ],
                },
                indent=2,
            )
        )
    return 0 if results and all(r.passed for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
