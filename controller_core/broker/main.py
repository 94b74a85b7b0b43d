"""Command-line entry point of the broker agent (``python -m controller_core.broker.main``).

``manage.py run_broker`` wraps the same ``add_arguments`` / ``run``. Signals, as a Kafka broker
handles them:

* SIGTERM or SIGINT: controlled shutdown, then deregister and exit 0. A second one skips the
  remaining controlled-shutdown attempts.
* SIGKILL: the process dies; its registration lives until the ZooKeeper session times out.

Exit codes: 0 clean stop, 1 start-up failure, 2 bad arguments, 3 the broker id is registered by
another live session.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from types import FrameType

from controller_core.broker.agent import BrokerAgent
from controller_core.broker.config import Acks, BrokerConfig
from controller_core.broker.registration import BrokerIdTakenError
from controller_core.signal_wait import wait_for

logger = logging.getLogger(__name__)

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_ID_TAKEN = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Declare the broker agent's options (shared with ``manage.py run_broker``)."""
    parser.add_argument("--id", dest="broker_id", type=int, required=True, help="broker id (>= 0)")
    parser.add_argument(
        "--zookeeper",
        dest="zookeeper_connect",
        default=os.environ.get("ZOOKEEPER_CONNECT", "127.0.0.1:21810/kafka"),
        help="ZooKeeper connect string HOST:PORT[,HOST:PORT][/chroot] (default: $ZOOKEEPER_CONNECT)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=0, help="port of both listeners (default 0: any free port)")
    parser.add_argument("--advertised-host", default=None, help="host to register (default: --host)")
    parser.add_argument("--rack", default=None, help="rack id, used by rack-aware replica assignment")
    parser.add_argument("--zookeeper-session-timeout-ms", type=int, default=18_000)
    parser.add_argument("--produce-rate", type=float, default=0.0, help="messages/s on each led partition (0: none)")
    parser.add_argument("--acks", type=Acks.parse, default=Acks.LEADER, help="0, 1 or all (default 1)")
    parser.add_argument(
        "--message-size", dest="message_size_bytes", type=int, default=512, help="bytes per synthetic message"
    )
    parser.add_argument("--min-insync-replicas", type=int, default=1)
    parser.add_argument("--replica-lag-time-max-ms", type=int, default=10_000)
    parser.add_argument("--replica-fetch-max-bytes", type=int, default=1024 * 1024)
    parser.add_argument("--replica-fetch-wait-ms", type=int, default=100)
    parser.add_argument("--replica-fetch-backoff-ms", type=int, default=500)
    parser.add_argument("--request-timeout-ms", type=int, default=30_000)
    parser.add_argument("--controlled-shutdown-max-retries", type=int, default=3)
    parser.add_argument("--controlled-shutdown-retry-backoff-ms", type=int, default=5_000)
    parser.add_argument("--alter-isr-retry-backoff-ms", type=int, default=200)
    parser.add_argument(
        "--no-controlled-shutdown",
        dest="controlled_shutdown_enable",
        action="store_false",
        help="on SIGTERM just deregister and exit",
    )
    parser.add_argument(
        "--lightweight", action="store_true", help="no replication or produce load; requests still answered"
    )
    parser.add_argument("--data-dir", type=Path, default=None, help="keep a log checkpoint here across restarts")
    parser.add_argument("--checkpoint-interval-ms", type=int, default=5_000)
    parser.add_argument(
        "--registration-wait-s",
        type=float,
        default=0.0,
        help="wait this long for a previous session's registration of this id to expire (default: refuse at once)",
    )
    parser.add_argument(
        "--ready-file", type=Path, default=None, help="write {id, host, port, epoch, pid} here once registered"
    )
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])


def config_from(options: argparse.Namespace) -> BrokerConfig:
    """Build the broker's config from parsed options (``ValueError`` on invalid values). Each option
    that configures the broker is stored under its ``BrokerConfig`` field's name (``dest``), so the
    mapping is declared once, in ``add_arguments``; the others (``--ready-file``...) run the process."""
    given = vars(options)
    return BrokerConfig(**{f.name: given[f.name] for f in fields(BrokerConfig) if f.name in given})


def _write_ready_file(path: Path, agent: BrokerAgent) -> None:
    info = {
        "id": agent.config.broker_id,
        "host": agent.config.registered_host,
        "port": agent.port,
        "epoch": agent.replicas.broker_epoch,
        "pid": os.getpid(),
    }
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(info))
    os.replace(tmp, path)


def run(options: argparse.Namespace) -> int:
    """Run one broker until SIGTERM/SIGINT; return the exit code."""
    try:
        config = config_from(options)
    except ValueError as exc:
        logger.error("invalid broker settings: %s", exc)
        return EXIT_USAGE
    stop = threading.Event()
    agent: BrokerAgent | None = None

    def on_signal(signum: int, frame: FrameType | None) -> None:
        if stop.is_set():
            logger.warning("second %s: skipping the rest of the controlled shutdown", signal.Signals(signum).name)
            if agent is not None:
                agent.abort_controlled_shutdown()
            return
        logger.info("%s received: shutting down", signal.Signals(signum).name)
        stop.set()
        if agent is not None:
            agent.cancel_start()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        try:
            agent = BrokerAgent(config, registration_wait_s=options.registration_wait_s)
            agent.start()
        except BrokerIdTakenError as exc:
            if stop.is_set():
                logger.info("stopped while waiting to register: %s", exc)
                return EXIT_OK
            logger.error("refusing to start: %s", exc)
            return EXIT_ID_TAKEN
        except ValueError as exc:  # e.g. an unreadable checkpoint
            logger.error("cannot start broker %d: %s", config.broker_id, exc)
            return EXIT_FAILED
        except Exception:
            logger.exception("broker %d failed to start", config.broker_id)
            return EXIT_FAILED
        if options.ready_file is not None:
            _write_ready_file(options.ready_file, agent)
        wait_for(stop)
        agent.shutdown(controlled=True)
        return EXIT_OK
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m controller_core.broker.main", description="Run one broker agent (see docs/broker-agent.md)."
    )
    add_arguments(parser)
    options = parser.parse_args(argv)
    logging.basicConfig(
        level=options.log_level,
        format=f"%(asctime)s %(levelname)s [broker {options.broker_id}] %(name)s: %(message)s",
    )
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    return run(options)


if __name__ == "__main__":
    sys.exit(main())
