"""The broker agent: one process hosting one broker's replicas, registered in ZooKeeper.

Start-up (``start``), in order:

1. Restore the logs of the data directory's checkpoint, if any.
2. Bind the HTTP port (so the registration can advertise it even when 0 was asked for) and start
   serving; control requests and fetches are answered 503 until step 4.
3. Connect to ZooKeeper (creating the chroot first if the connect string names one that does not
   exist, as Kafka's brokers do), create Kafka's persistent paths if missing, watch ``/controller``.
4. Register ``/brokers/ids/<id>`` (JSON v5, listeners ``PLAINTEXT`` and ``CONTROL`` on the same
   port); its czxid becomes the broker epoch. Refuse to start if another live session holds the id.
5. Start the AlterIsr sender, and unless ``lightweight``: fetchers (on demand), the synthetic
   producer and the periodic ISR check; the checkpoint writer if there is a data directory.

Shutdown (``shutdown``), as Kafka's ``KafkaServer.shutdown`` with controlled shutdown enabled:

1. Controlled shutdown: ask the controller to move leaderships away; success is NONE with no
   remaining partitions; otherwise wait ``controlled.shutdown.retry.backoff.ms`` and try again, up to
   ``controlled.shutdown.max.retries`` attempts, then go on regardless (an unclean shutdown). The
   HTTP endpoint keeps serving meanwhile: the controller's LeaderAndIsr/StopReplica must get through.
2. Stop the producer, the fetchers, the AlterIsr sender and the periodic tasks; write the checkpoint.
3. Deregister and close the ZooKeeper session.
4. Stop serving HTTP.

SIGKILL skips all of that, by nature: the registration lasts until ZooKeeper expires the session.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from kazoo.client import KazooClient
from kazoo.retry import KazooRetry

from controller_core.broker.alter_isr import AlterIsrManager
from controller_core.broker.api import BrokerApi
from controller_core.broker.checkpoint import load_logs, save_logs
from controller_core.broker.config import BrokerConfig
from controller_core.broker.controller_client import ControllerClient, ControllerUnavailableError
from controller_core.broker.dynamic_config import ConfigChangeListener
from controller_core.broker.fetcher import ReplicaFetcherManager
from controller_core.broker.producer import SyntheticProducer
from controller_core.broker.registration import BrokerRegistrar
from controller_core.broker.replica_manager import ReplicaManager
from controller_core.model import BrokerRegistration, EndPoint
from controller_core.protocol.messages import CONTROL_LISTENER, REPLICATION_LISTENER, ControlledShutdownRequest
from controller_core.protocol.server import JsonHttpServer
from controller_core.signal_wait import wait_until_set
from controller_core.zk.client import new_client, stop_client
from controller_core.zk.store import ZkStore

logger = logging.getLogger(__name__)


def ensure_chroot(connect_string: str, timeout_s: float = 15.0) -> None:
    """Create the chroot of ``host:port[,host:port]/chroot`` if missing (kazoo cannot work without it)."""
    hosts, slash, chroot = connect_string.partition("/")
    if not slash or not chroot.strip("/"):
        return
    client = new_client(hosts, timeout=timeout_s)  # ZOOKEEPER_AUTH/ZOOKEEPER_ACL: controller_core.zk.client
    client.start(timeout=timeout_s)
    try:
        client.ensure_path("/" + chroot.strip("/"))
    finally:
        client.stop()
        client.close()


class BrokerAgent:
    """One broker. See the module docstring for the start-up and shutdown sequences.

    Example::

        agent = BrokerAgent(BrokerConfig(broker_id=1, zookeeper_connect="127.0.0.1:2181/kafka"))
        agent.start()
        ...
        agent.shutdown()
    """

    def __init__(self, config: BrokerConfig, *, registration_wait_s: float = 0.0) -> None:
        self.config = config
        self._registration_wait_s = registration_wait_s
        logs = load_logs(config.data_dir, config.broker_id) if config.data_dir is not None else {}
        self.replicas = ReplicaManager(config, logs=logs)
        self._api = BrokerApi(self.replicas, state=self.state, health=self.health)
        self.server: JsonHttpServer | None = None
        self.zk: KazooClient | None = None
        self.controller: ControllerClient | None = None
        self.registrar: BrokerRegistrar | None = None
        self.alter_isr: AlterIsrManager | None = None
        self.fetchers: ReplicaFetcherManager | None = None
        self.producer: SyntheticProducer | None = None
        self.config_listener: ConfigChangeListener | None = None
        self._tasks_stopped = threading.Event()
        self._tasks: threading.Thread | None = None
        self._abort_controlled_shutdown = threading.Event()
        self.started_at = time.time()
        self.controlled_shutdown_attempts = 0
        self.controlled_shutdown_succeeded: bool | None = None
        self._shut_down = False
        if logs:
            logger.info("broker %d: restored %d logs from %s", config.broker_id, len(logs), config.data_dir)

    # ==============================================================================================
    # start-up
    # ==============================================================================================
    @property
    def port(self) -> int:
        if self.server is None:
            raise RuntimeError("the broker agent has not started")
        return self.server.port

    def registration(self) -> BrokerRegistration:
        """What this broker writes to ``/brokers/ids/<id>``: both listeners on the one port."""
        host = self.config.registered_host
        return BrokerRegistration(
            id=self.config.broker_id,
            endpoints=(
                EndPoint(REPLICATION_LISTENER, host, self.port, "PLAINTEXT"),
                EndPoint(CONTROL_LISTENER, host, self.port, "PLAINTEXT"),
            ),
            rack=self.config.rack,
            features=dict(self.config.features),
        )

    def start(self) -> None:
        """Run start-up steps 1 to 5; raises (after cleaning up) when any fails."""
        config = self.config
        try:
            self.server = self._api.serve(config.host, config.port)
            self.server.start()
            ensure_chroot(config.zookeeper_connect)
            self.zk = new_client(
                config.zookeeper_connect,
                timeout=config.zookeeper_session_timeout_ms / 1000.0,
                # Reconnect forever (a new session after an expiry), as a Kafka broker does.
                connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=2.0),
            )
            self.zk.start(timeout=max(15.0, config.zookeeper_session_timeout_ms / 1000.0))
            store = ZkStore(self.zk)
            store.ensure_persistent_paths()
            self.controller = ControllerClient(self.zk, timeout_s=config.request_timeout_ms / 1000.0)
            self.controller.start()
            self.alter_isr = AlterIsrManager(
                config.broker_id,
                lambda: self.replicas.broker_epoch,
                self.controller,
                self.replicas.handle_alter_isr_result,
                is_current=self.replicas.is_proposal_current,
                retry_backoff_s=config.alter_isr_retry_backoff_ms / 1000.0,
            )
            self.replicas.isr_proposer = self.alter_isr
            if not config.lightweight:
                self.config_listener = ConfigChangeListener(self.zk, self.replicas.throttles)
                self.config_listener.start()
                self.fetchers = ReplicaFetcherManager(self.replicas, config, lambda: self.replicas.broker_epoch)
                self.replicas.fetchers = self.fetchers
            self.registrar = BrokerRegistrar(self.zk, store, self.registration(), self.replicas.set_broker_epoch)
            epoch = self.registrar.register(wait_s=self._registration_wait_s)
            self.alter_isr.start()
            if not config.lightweight:
                self.producer = SyntheticProducer(
                    self.replicas,
                    rate=config.produce_rate,
                    acks=config.acks,
                    min_insync_replicas=config.min_insync_replicas,
                )
                self.producer.start()
            self._tasks = threading.Thread(target=self._run_tasks, name="broker-tasks", daemon=True)
            self._tasks.start()
        except BaseException:
            self._close_everything(controlled=False)
            raise
        logger.info(
            "broker %d started: http://%s:%d, broker epoch %d, rack %s%s",
            config.broker_id,
            config.registered_host,
            self.port,
            epoch,
            config.rack,
            " (lightweight)" if config.lightweight else "",
        )

    def _run_tasks(self) -> None:
        """Periodic work: ISR expiry every lag/2 ms (as Kafka schedules it) and checkpoints."""
        config = self.config
        isr_every = config.replica_lag_time_max_ms / 2000.0
        checkpoint_every = config.checkpoint_interval_ms / 1000.0
        next_isr = float("inf") if config.lightweight else time.monotonic() + isr_every
        next_checkpoint = time.monotonic() + checkpoint_every
        while not self._tasks_stopped.wait(max(0.0, min(next_isr, next_checkpoint) - time.monotonic())):
            now = time.monotonic()
            try:
                if now >= next_isr:
                    next_isr = now + isr_every
                    self.replicas.maybe_shrink_isrs()
                if now >= next_checkpoint:
                    next_checkpoint = now + checkpoint_every
                    self._checkpoint()
            except Exception:  # a failing task must not stop the others
                logger.exception("broker %d: periodic task failed", config.broker_id)

    def _checkpoint(self) -> None:
        if self.config.data_dir is not None:
            save_logs(self.config.data_dir, self.config.broker_id, self.replicas.checkpoint())

    # ==============================================================================================
    # controlled shutdown and shutdown
    # ==============================================================================================
    def controlled_shutdown(self) -> bool:
        """Ask the controller to move this broker's leaderships away (§8.4, broker side)."""
        config = self.config
        if self.controller is None or not self.replicas.registered:
            return False
        backoff_s = config.controlled_shutdown_retry_backoff_ms / 1000.0
        for attempt in range(1, config.controlled_shutdown_max_retries + 1):
            if self._abort_controlled_shutdown.is_set():
                break
            self.controlled_shutdown_attempts = attempt
            request = ControlledShutdownRequest(config.broker_id, self.replicas.broker_epoch)
            try:
                response = self.controller.controlled_shutdown(request)
            except ControllerUnavailableError as exc:
                logger.warning("broker %d: controlled shutdown attempt %d: %s", config.broker_id, attempt, exc)
            else:
                if response.succeeded:
                    logger.info("broker %d: controlled shutdown succeeded (attempt %d)", config.broker_id, attempt)
                    return True
                logger.info(
                    "broker %d: controlled shutdown attempt %d: error %s, %d partitions still led here%s",
                    config.broker_id,
                    attempt,
                    response.error_code.name,
                    len(response.remaining_partitions),
                    ""
                    if not response.remaining_partitions
                    else f" ({', '.join(str(p.topic_partition) for p in response.remaining_partitions[:10])})",
                )
            # Kafka sleeps after every failed attempt, the last one included.
            # Not Event.wait: a second SIGTERM's handler sets this event on this (the main) thread.
            if wait_until_set(self._abort_controlled_shutdown, backoff_s):
                break
        logger.warning("broker %d: controlled shutdown failed; proceeding with an unclean shutdown", config.broker_id)
        return False

    def abort_controlled_shutdown(self) -> None:
        """Skip the remaining controlled-shutdown attempts (a second SIGTERM)."""
        self._abort_controlled_shutdown.set()

    def cancel_start(self) -> None:
        """Stop waiting for a previous session's registration to expire (SIGTERM during start-up)."""
        if self.registrar is not None:
            self.registrar.cancel()

    def shutdown(self, *, controlled: bool = True) -> None:
        """Run shutdown steps 1 to 4 (step 1 only if ``controlled`` and enabled)."""
        if self._shut_down:
            return
        self._shut_down = True
        self._close_everything(controlled=controlled and self.config.controlled_shutdown_enable)
        logger.info("broker %d stopped", self.config.broker_id)

    def _close_everything(self, *, controlled: bool) -> None:
        if controlled:
            self.controlled_shutdown_succeeded = self.controlled_shutdown()
        if self.producer is not None:
            self.producer.stop()
        if self.config_listener is not None:
            self.config_listener.stop()
        if self.fetchers is not None:
            self.fetchers.shutdown()
        if self.alter_isr is not None:
            self.alter_isr.stop()
        self._tasks_stopped.set()
        if self._tasks is not None:
            self._tasks.join(timeout=5.0)
        try:
            self._checkpoint()
        except OSError as exc:
            logger.error("broker %d: could not write the log checkpoint: %s", self.config.broker_id, exc)
        if self.registrar is not None:
            self.registrar.deregister()
        if self.controller is not None:
            self.controller.close()
        if self.zk is not None:
            stop_client(self.zk)  # bounded: with ZooKeeper unreachable there is no session to close
        if self.server is not None:
            self.server.close()

    # ==============================================================================================
    # views
    # ==============================================================================================
    def health(self) -> tuple[bool, dict[str, Any]]:
        zk_ok = self.zk is not None and self.zk.connected
        registered = self.replicas.registered
        detail: dict[str, Any] = {
            "broker_id": self.config.broker_id,
            "broker_epoch": self.replicas.broker_epoch,
            "registered": registered,
            "zookeeper_connected": zk_ok,
        }
        if not registered:
            detail["reason"] = "not registered in ZooKeeper"
        elif not zk_ok:
            detail["reason"] = "ZooKeeper connection lost"
        return registered and zk_ok, detail

    def state(self, query: Mapping[str, str]) -> dict[str, Any]:
        """``GET /v1/state``: ``?partitions=0`` leaves out per-partition lists, ``?topic=t`` filters."""
        include = query.get("partitions", "1") not in {"0", "false", "no"}
        topic = query.get("topic") or None
        config = self.config
        d: dict[str, Any] = {
            "id": config.broker_id,
            "rack": config.rack,
            "host": config.registered_host,
            "port": self.server.port if self.server is not None else config.port,
            "lightweight": config.lightweight,
            "uptime_s": round(time.time() - self.started_at, 1),
            "config": {
                "produce_rate": config.produce_rate,
                "acks": "all" if int(config.acks) == -1 else int(config.acks),
                "min_insync_replicas": config.min_insync_replicas,
                "replica_lag_time_max_ms": config.replica_lag_time_max_ms,
                "message_size_bytes": config.message_size_bytes,
            },
        }
        d.update(self.replicas.snapshot(include_partitions=include, topic=topic))
        d["epoch"] = d.pop("broker_epoch")
        d["active_controller"] = None if self.controller is None else self.controller.controller_id
        d["alter_isr"] = None if self.alter_isr is None else self.alter_isr.stats()
        d["fetchers"] = [] if self.fetchers is None else self.fetchers.stats()
        d["producer"] = None if self.producer is None else self.producer.stats()
        d["throttles"] = self.replicas.throttles.snapshot()
        return d
