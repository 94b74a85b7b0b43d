"""SIGTERM makes a real agent ask the controller for a controlled shutdown (§8.4), then deregister."""

from __future__ import annotations

import signal

import pytest
from kazoo.client import KazooClient

from controller_core.protocol.messages import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
    ErrorCode,
    PartitionId,
)
from controller_core.zk import paths
from tests.integration import test_broker_harness as harness
from tests.integration.test_broker_harness import FakeController
from tests.support.broker_agents import Agents

controller = harness.controller

REMAINING = ControlledShutdownResponse(ErrorCode.NONE, (PartitionId("orders", 0),))


def test_sigterm_asks_the_controller_then_deregisters_and_exits(
    zk: KazooClient, agents: Agents, controller: FakeController
) -> None:
    controller.shutdown_answers = [REMAINING]  # the first attempt leaves a partition led here
    agent = agents.start(1)
    agent.signal(signal.SIGTERM)
    assert agent.wait_exit(timeout=30) == 0
    assert controller.shutdown_requests == [ControlledShutdownRequest(1, agent.epoch)] * 2
    assert zk.exists(paths.broker_id_path(1)) is None  # deregistered, not left to expire
    assert "controlled shutdown succeeded (attempt 2)" in agent.log()


def test_it_gives_up_after_the_configured_attempts(zk: KazooClient, agents: Agents, controller: FakeController) -> None:
    controller.shutdown_answers = [REMAINING] * 5
    agent = agents.start(2, "--controlled-shutdown-max-retries", "3")
    agent.signal(signal.SIGTERM)
    assert agent.wait_exit(timeout=30) == 0
    assert len(controller.shutdown_requests) == 3
    assert "proceeding with an unclean shutdown" in agent.log()
    assert zk.exists(paths.broker_id_path(2)) is None


def test_an_error_answer_counts_as_a_failed_attempt(agents: Agents, controller: FakeController) -> None:
    controller.shutdown_answers = [ControlledShutdownResponse(ErrorCode.NOT_CONTROLLER)]
    agent = agents.start(3)
    agent.signal(signal.SIGTERM)
    assert agent.wait_exit(timeout=30) == 0
    assert len(controller.shutdown_requests) == 2


def test_without_a_controller_it_still_stops(zk: KazooClient, agents: Agents) -> None:
    agent = agents.start(4, "--controlled-shutdown-max-retries", "2")
    agent.signal(signal.SIGTERM)
    assert agent.wait_exit(timeout=30) == 0
    assert "no active controller" in agent.log()
    assert zk.exists(paths.broker_id_path(4)) is None


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_controlled_shutdown_can_be_switched_off(
    agents: Agents, controller: FakeController, sig: signal.Signals
) -> None:
    agent = agents.start(5, "--no-controlled-shutdown")
    agent.signal(sig)
    assert agent.wait_exit(timeout=30) == 0
    assert controller.shutdown_requests == []
