"""Run several daphne web processes behind one address, with no proxy in front.

Why: one daphne process is one Python interpreter, so one core; many live viewers during a storm
(``scripts/bench_viewers.py``) cost the web side CPU per viewer. Daphne (Twisted) cannot set
``SO_REUSEPORT`` itself, so this binds one listening socket per process on the same address with
it set and hands each to a daphne (``daphne --fd``); the kernel spreads new connections over the
sockets by a hash of the client's address and port. Sessions live in the database and live pushes
go through the Redis channel layer, so any process serves any request or socket.

    .venv/bin/python scripts/web_processes.py --processes 2 --port 8000   # then open :8000 as usual

It runs in the foreground with the environment it was given (``DATABASE_URL``, ``REDIS_URL``,
...), as ``scripts/run`` runs one daphne; Ctrl-C (or SIGTERM) stops every process it started, and
when one process exits the others are stopped too (exit status: the first one's).
"""

from __future__ import annotations

import argparse
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def bind_shared(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` listening sockets on ``host:port`` (``port`` 0: a free one, the same for all)."""
    if count < 1:
        raise ValueError(f"need at least one web process, not {count}")
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            sock.bind((host, port))
            sock.listen(1024)
            sock.set_inheritable(True)
            port = sock.getsockname()[1]
    except OSError:
        for sock in sockets:
            sock.close()
        raise
    return sockets


def spawn(sock: socket.socket, env: dict[str, str] | None = None, log: Path | None = None) -> subprocess.Popen[bytes]:
    """A daphne serving the dashboard on ``sock`` (inherited by descriptor)."""
    fd = sock.fileno()
    return subprocess.Popen(
        [sys.executable, "-m", "daphne", "--fd", str(fd), "dashboard.asgi:application"],
        env=env,
        cwd=REPO,
        stdout=log.open("wb") if log is not None else None,
        stderr=subprocess.STDOUT if log is not None else None,
        pass_fds=(fd,),
    )


def stop_all(procs: Iterable[subprocess.Popen[bytes]], timeout: float = 15.0) -> None:
    """SIGTERM every process still running at once, then wait for each, SIGKILLing any still there
    after ``timeout`` (the benchmarks' rig and the tests' servers stop the same way)."""
    procs = list(procs)
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=2, help="daphne processes (default 2)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    if args.processes < 1:
        parser.error("--processes must be at least 1")
    try:
        sockets = bind_shared(args.host, args.port, args.processes)
    except OSError as exc:
        print(f"web_processes: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    procs = [spawn(sock) for sock in sockets]
    print(f"web_processes: {len(procs)} daphne processes on http://{args.host}:{args.port}/", flush=True)
    stopping = False

    def stop(_signum: int, _frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    status = 0
    while not stopping:
        ended = [p for p in procs if p.poll() is not None]
        if ended:
            status = ended[0].returncode or 0
            print(f"web_processes: daphne {ended[0].pid} exited ({status}); stopping the others", file=sys.stderr)
            break
        time.sleep(0.5)
    stop_all(procs)
    return status


if __name__ == "__main__":
    sys.exit(main())
