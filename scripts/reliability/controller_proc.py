"""One controller candidate process for the reliability harness (``python -m scripts.reliability.controller_proc``).

It runs the same ``ControllerRunner`` that ``manage.py run_controller`` and the Celery controller host
run (kazoo client, fenced store, broker channel, broker-facing API, controller), by default without
the Redis state-change stream, so a scenario needs no Django settings. With ``--redis-url`` and
``--cluster`` it plugs in the Celery host's own Redis side (``workers.controller_redis``: the
buffered stream sink and the status publisher), so Redis faults (F20) hit the product's path; with
``--state-change-dir`` it also keeps the day's JSON-lines log the hosts keep (the stream's durable
copy, which a scenario compares the stream with). SIGTERM or SIGINT resigns cleanly (the
controller deletes ``/controller`` fenced by its epoch), as the real hosts do. Once started it writes
``{"pid", "api"}`` to ``--ready-file``. The history recorder and the pause points are enabled by the
harness through ``RELIABILITY_HISTORY_DIR`` and ``CONTROLLER_PAUSE_DIR``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from controller_core.config import ControllerConfig
from controller_core.runner import ControllerRunner
from controller_core.signal_wait import wait_for
from workers.controller_redis import ControllerRedisPlugs


def _write_session(path: Path, client: Any) -> None:
    for _ in range(50):  # the id is set just after the CONNECTED callback on a reconnect
        session_id, password = client.client_id or (None, None)
        if session_id and password is not None:
            tmp = path.with_suffix(".tmp")
            tmp.write_text(json.dumps([session_id, password.hex()]))
            tmp.replace(path)
            return
        time.sleep(0.02)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--id", type=int, required=True)
    parser.add_argument("--zookeeper", required=True, help="HOST:PORT[,HOST:PORT]/chroot (the fault proxies)")
    parser.add_argument("--session-timeout-s", type=float, default=4.0)
    parser.add_argument("--ready-file", type=Path, required=True)
    parser.add_argument("--auto-rebalance", action="store_true")
    parser.add_argument("--rebalance-interval-s", type=float, default=300.0)
    parser.add_argument("--redis-url", help="plug the Celery host's stream sink and status publisher")
    parser.add_argument("--cluster", default="rel", help="the cluster name of the stream and status keys")
    parser.add_argument("--state-change-dir", type=Path, help="also write the JSON-lines state-change log here")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = ControllerConfig(
        controller_id=args.id,
        zookeeper_connect=args.zookeeper,
        zookeeper_session_timeout_s=args.session_timeout_s,
        auto_leader_rebalance_enable=args.auto_rebalance,
        leader_imbalance_check_interval_seconds=args.rebalance_interval_s,
        first_rebalance_delay_seconds=1.0 if args.auto_rebalance else 3600.0,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    plugs = ControllerRedisPlugs.connect(args.redis_url, args.cluster) if args.redis_url else None
    runner = ControllerRunner(config, log_dir=args.state_change_dir, extra_sinks=plugs.sinks if plugs else ())
    controller = runner.start()
    if plugs is not None:
        plugs.publish_status(args.id, controller.status)
    assert runner.api is not None and runner.client is not None
    session_file = os.environ.get("RELIABILITY_SESSION_FILE")
    if session_file:
        client = runner.client

        def publish_session(state: str) -> None:
            # The harness expires this session server-side with the id and password (the intruder method).
            if state == "CONNECTED":
                threading.Thread(target=_write_session, args=(Path(session_file), client), daemon=True).start()

        client.add_listener(publish_session)
        _write_session(Path(session_file), client)

        def expire_locally(*_: object) -> None:
            # Test-only (F5): kazoo's client-side expiry; the server keeps the old session (and its
            # ephemeral /controller) until its timeout, the KAFKA-4229/7165 situation.
            from kazoo.protocol.connection import _SESSION_EXPIRED

            client._call(_SESSION_EXPIRED, None)

        signal.signal(signal.SIGUSR1, expire_locally)
    tmp = args.ready_file.with_suffix(".tmp")
    tmp.write_text(json.dumps({"pid": os.getpid(), "api": runner.api.url}))
    tmp.replace(args.ready_file)
    wait_for(stop)
    if plugs is not None:
        plugs.stop_status()
    runner.stop()
    if plugs is not None:
        plugs.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
