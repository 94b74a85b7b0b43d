"""Run the whole stack on one machine in the foreground; Ctrl-C stops everything it started.

Why a supervisor of our own: README command one must bring up ZooKeeper, Redis, the database,
the ASGI server and the Celery workers (and, as they land, the controllers, the mirror and a demo
cluster) with one command on a fresh machine, show their logs interleaved with a name prefix, and
leave nothing running afterwards. Services that were already up before (``scripts/services up``)
are left running; the ones this run started are stopped.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO

from scripts.devservices import REPO_ROOT, ServiceError, ServiceSet, default_service_set
from scripts.support.django_manage import ManageFailed, manage

PYTHON = sys.executable
_COLOURS = ("36", "35", "33", "32", "34", "31", "96", "95")


@dataclass
class Child:
    """One long-running process of the stack, started in its own process group."""

    name: str
    argv: list[str]
    env: dict[str, str]
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self, colour: str, lock: threading.Lock) -> None:
        self.process = subprocess.Popen(
            self.argv,
            env=self.env,
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        threading.Thread(
            target=_pump, args=(self.name, colour, self.process.stdout, lock), daemon=True, name=f"log-{self.name}"
        ).start()

    def stop(self, timeout: float = 15.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        try:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        except ProcessLookupError:
            pass


def _pump(name: str, colour: str, stream: IO[bytes] | None, lock: threading.Lock) -> None:
    if stream is None:
        return
    prefix = f"\033[{colour}m{name:>12} |\033[0m " if sys.stdout.isatty() else f"{name:>12} | "
    for raw in iter(stream.readline, b""):
        line = raw.decode(errors="replace").rstrip("\n")
        with lock:
            print(prefix + line, flush=True)


CONTROLLER_IDS = (9001, 9002)


# docs/deployment.md "Slow clients": the app must answer within 60 s (503 otherwise); WebSocket frames
# and handshakes are bounded. Daphne hands a request to the app only once its body is complete.
ASGI_APP = "dashboard.asgi:application"
DAPHNE_LIMITS = ("--http-timeout", "60", "--websocket-max-message-size", "65536", "--websocket_connect_timeout", "10")


def build_children(args: argparse.Namespace, env: dict[str, str]) -> list[Child]:
    """The processes of the stack, in start order.

    Two Celery workers with both roles follow the cluster registry: each hosts a controller
    candidate for every managed cluster (one becomes active, the other stands by) and they share
    the registered clusters' mirrors (one lease holder each); both also run tasks. A cluster
    registered in the dashboard is picked up within seconds, without a restart.
    """
    children = [
        Child(
            "web",
            [PYTHON, "-m", "daphne", "-b", args.host, "-p", str(args.port), *DAPHNE_LIMITS, ASGI_APP],
            env,
        )
    ]
    for n, controller_id in enumerate(CONTROLLER_IDS, start=1):
        worker_env = dict(
            env,
            WORKER_ROLES="controller,mirror",
            CONTROLLER_ID=str(controller_id),
            CONTROLLER_REBALANCE_INTERVAL_S=str(args.rebalance_interval),
            CONTROLLER_REBALANCE_MIN_ISR_S=str(args.rebalance_min_isr),
        )
        children.append(
            Child(
                f"worker-{n}",
                [PYTHON, "-m", "celery", "-A", "dashboard", "worker", "-l", "INFO", "-n", f"worker{n}@%h", "-c", "2"]
                # One embedded beat schedules the periodic tasks (state-change ingest, nightly analytics).
                + (["-B", "-s", str(REPO_ROOT / "var" / "celerybeat-schedule")] if n == 1 else []),
                worker_env,
            )
        )
    if args.brokers > 0:
        children.append(
            Child(
                "demo",
                [
                    PYTHON,
                    "manage.py",
                    "demo_cluster",
                    "--brokers",
                    str(args.brokers),
                    "--racks",
                    "2",
                    "--zookeeper",
                    env["ZOOKEEPER_CONNECT"],
                    "--produce-rate",
                    "5",
                ],
                env,
            )
        )
    return children


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/run", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1", help="address the dashboard listens on")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--cluster", default="demo", help="name of the demo cluster in the dashboard")
    parser.add_argument("--brokers", type=int, default=5, help="demo broker agents to run (0: none)")
    parser.add_argument(
        "--rebalance-interval", type=int, default=30, help="leader.imbalance.check.interval.seconds for the demo"
    )
    parser.add_argument(
        "--rebalance-min-isr",
        type=int,
        default=30,
        help="the demo's auto rebalance moves leadership back only to a preferred replica in an unchanged ISR this "
        "many seconds (0: at once, as Kafka does; CONTROLLER_REBALANCE_MIN_ISR_S)",
    )
    args = parser.parse_args(argv)

    services = default_service_set()
    # Stop on the way out only what this run starts: a service already running (``scripts/services
    # up``) is left as it was, and PostgreSQL, which the stack never starts, is never stopped.
    ours = [s for s in (services.zookeeper, services.redis, services.spark) if s is not None and not s.running()]
    children: list[Child] = []
    exit_code = 0
    try:
        exit_code = _run(args, services, children)
    except ServiceError as exc:
        print(f"stack: cannot start services: {exc}", file=sys.stderr, flush=True)
        exit_code = 1
    except ManageFailed as exc:
        print(f"stack: {exc}", file=sys.stderr, flush=True)
        exit_code = 1
    except KeyboardInterrupt:
        exit_code = 130
    finally:
        # Whatever happened, stop what this run started (and only that): its children, and the
        # services unless they were up before it (``scripts/services up``).
        print("stack: stopping ...", flush=True)
        for child in reversed(children):
            child.stop()
        for service in reversed(ours):
            service.stop()
        print("stack: stopped", flush=True)
    time.sleep(0.1)
    return exit_code


def _run(args: argparse.Namespace, services: ServiceSet, children: list[Child]) -> int:
    """Start the services, run the set-up steps, then the children until one exits or we are told to stop."""
    services.up()
    env = dict(os.environ)
    env.setdefault("ZOOKEEPER_CONNECT", f"{services.zookeeper.connect_string}/kafka")
    env.setdefault("REDIS_URL", services.redis.url)
    if services.spark is not None:  # the analytics worker is a client of the warm Spark Connect server
        env.setdefault("SPARK_REMOTE", services.spark.remote)
    env.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
    env["PYTHONUNBUFFERED"] = "1"

    print("\n".join(services.status()), flush=True)
    # The set-up steps; one failing stops the run with everything it printed (ManageFailed).
    manage(env, "migrate", "--noinput", "-v", "0")
    credentials = manage(env, "ensure_admin").strip()
    manage(env, "ensure_cluster", "--name", args.cluster, "--zookeeper", env["ZOOKEEPER_CONNECT"], "--mode", "managed")

    lock = threading.Lock()
    stopping = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        stopping.set()

    signal.signal(signal.SIGINT, request_stop)
    signal.signal(signal.SIGTERM, request_stop)
    for i, child in enumerate(build_children(args, env)):
        children.append(child)
        child.start(_COLOURS[i % len(_COLOURS)], lock)

    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}/"
    with lock:
        print(
            "\n".join(
                [
                    "",
                    "=" * 64,
                    f"  Dashboard:  {url}   (cluster {args.cluster!r}: {url}clusters/{args.cluster}/)",
                    f"  Health:     {url}healthz",
                    "  " + credentials.replace("\n", "\n  "),
                    f"  ZooKeeper:  {env['ZOOKEEPER_CONNECT']}   Redis: {env['REDIS_URL']}"
                    f"   Spark: {env.get('SPARK_REMOTE', 'none')}",
                    f"  Controllers {CONTROLLER_IDS[0]} and {CONTROLLER_IDS[1]} (one active, one standby);"
                    f" {args.brokers} demo brokers",
                    f"  More clusters: {url}actions/admin/clusters/ (mirrored and, if managed, controlled at once)",
                    "  Faults by hand: .venv/bin/python manage.py demo_cluster kill|stop|start N",
                    "  Ctrl-C stops everything this command started.",
                    "=" * 64,
                    "",
                ]
            ),
            flush=True,
        )

    exit_code = 0
    while not stopping.is_set():
        for child in children:
            if child.process is not None and child.process.poll() is not None:
                print(f"stack: {child.name} exited with code {child.process.returncode}; stopping", flush=True)
                exit_code = 1
                stopping.set()
                break
        stopping.wait(0.5)
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
