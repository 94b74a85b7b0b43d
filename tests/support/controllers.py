"""Controller candidates and fake broker registrations for integration tests.

Why here: the controller, actions, controlled-shutdown, standby and reliability tests all run
in-process controller candidates (``ControllerRunner``, each with a ``MemorySink`` of its state
changes) against the test's ZooKeeper, and many register brokers without running them (a session
each, as real brokers hold their registration). The fixtures that clean them up are
``candidates`` and ``fake_brokers`` (tests/integration/controller_fixtures.py).
"""

from __future__ import annotations

from typing import Any

from kazoo.client import KazooClient

from controller_core.config import ControllerConfig
from controller_core.model import BrokerRegistration, EndPoint
from controller_core.runner import ControllerRunner
from controller_core.state_change_log import MemorySink
from controller_core.zk.store import ZkStore


class FakeBrokers:
    """Broker registrations, each in its own ZooKeeper session, as real brokers hold them."""

    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.clients: dict[int, KazooClient] = {}

    def start(self, broker_id: int, rack: str | None = None) -> int:
        client = KazooClient(hosts=self.connect, timeout=4.0)
        client.start(timeout=10)
        self.clients[broker_id] = client
        registration = BrokerRegistration(
            id=broker_id,
            endpoints=(EndPoint("PLAINTEXT", "127.0.0.1", 1),),
            rack=rack,
        )
        store = ZkStore(client)
        store.ensure_persistent_paths()  # as a Kafka broker does at start-up
        return store.register_broker(registration)

    def kill(self, broker_id: int) -> None:
        client = self.clients.pop(broker_id)
        client.stop()
        client.close()

    def stop_all(self) -> None:
        for broker_id in list(self.clients):
            self.kill(broker_id)


class Candidates:
    """In-process controller candidates for one test; ``sinks[id]`` holds each one's state changes."""

    def __init__(self, connect: str) -> None:
        self.connect = connect
        self.runners: dict[int, ControllerRunner] = {}
        self.sinks: dict[int, MemorySink] = {}

    def start(self, controller_id: int, **overrides: Any) -> ControllerRunner:
        sink = MemorySink()
        config = ControllerConfig(
            controller_id=controller_id,
            zookeeper_connect=self.connect,
            zookeeper_session_timeout_s=4.0,
            first_rebalance_delay_seconds=overrides.pop("first_rebalance_delay_seconds", 3600),
            **overrides,
        )
        runner = ControllerRunner(config, extra_sinks=[sink])
        runner.start()
        self.runners[controller_id] = runner
        self.sinks[controller_id] = sink
        return runner

    def stop(self, controller_id: int) -> None:
        self.runners.pop(controller_id).stop()

    def stop_all(self) -> None:
        for cid in list(self.runners):
            self.stop(cid)
