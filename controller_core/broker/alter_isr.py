"""Send a leader's ISR proposals to the controller (Kafka's ``AlterIsrManager``, reference §8.9).

Guarantees:

* Proposals queue per partition; a second proposal for a partition that already has one waiting is
  refused (``submit`` returns False) and the partition keeps its committed ISR. The partition itself
  proposes nothing while one of its proposals is in flight.
* One AlterIsr request is in flight at a time, carrying every waiting proposal (a short linger lets
  the proposals of one ISR check travel together).
* A request that fails as a whole (no controller, connection lost, NOT_CONTROLLER,
  STALE_BROKER_EPOCH, any top-level error, a partition missing from the answer) is retried after a
  back-off, with the controller's address re-read from ``/controller``; proposals that no longer
  match their partition's state (a LeaderAndIsr replaced it meanwhile) are not resent.
* Per-partition answers go to ``on_result`` on this sender's thread; the partition decides whether to
  commit, give up (the controller has moved on and will send a LeaderAndIsr) or propose again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Protocol

from controller_core.broker.controller_client import ControllerUnavailableError
from controller_core.broker.partition import IsrProposal
from controller_core.model import TopicPartition
from controller_core.protocol.messages import (
    AlterIsrPartition,
    AlterIsrPartitionResult,
    AlterIsrRequest,
    AlterIsrResponse,
    ErrorCode,
)

logger = logging.getLogger(__name__)

ResultCallback = Callable[[IsrProposal, AlterIsrPartitionResult], None]


class ControllerApi(Protocol):
    """The part of ``ControllerClient`` the sender uses."""

    @property
    def controller_id(self) -> int | None: ...

    def alter_isr(self, request: AlterIsrRequest) -> AlterIsrResponse:
        """Send one request; ``ControllerUnavailableError`` when it could not be delivered."""
        ...

    def refresh(self) -> str | None: ...


class AlterIsrManager:
    """Batch and deliver ISR proposals; see the module docstring.

    Example::

        manager = AlterIsrManager(broker_id, lambda: rm.broker_epoch, controller_client, rm.handle_alter_isr_result)
        manager.start()
        manager.submit(proposal)
    """

    def __init__(
        self,
        broker_id: int,
        broker_epoch: Callable[[], int],
        controller: ControllerApi,
        on_result: ResultCallback,
        *,
        is_current: Callable[[IsrProposal], bool] = lambda proposal: True,
        retry_backoff_s: float = 0.2,
        linger_s: float = 0.05,
    ) -> None:
        self._broker_id = broker_id
        self._broker_epoch = broker_epoch
        self._controller = controller
        self._on_result = on_result
        self._is_current = is_current
        self._retry_backoff_s = retry_backoff_s
        self._linger_s = linger_s
        self._unsent: dict[TopicPartition, IsrProposal] = {}
        self._cond = threading.Condition()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"alter-isr-{broker_id}", daemon=True)
        self.requests_sent = 0
        self.failures = 0
        self.last_error: str | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        with self._cond:
            self._cond.notify_all()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(timeout=5.0)

    def submit(self, proposal: IsrProposal) -> bool:
        """Queue ``proposal``; False when one for the same partition is already waiting."""
        with self._cond:
            if proposal.topic_partition in self._unsent:
                return False
            self._unsent[proposal.topic_partition] = proposal
            self._cond.notify()
            return True

    def pending(self) -> int:
        with self._cond:
            return len(self._unsent)

    def stats(self) -> dict[str, object]:
        return {
            "pending": self.pending(),
            "requests_sent": self.requests_sent,
            "failures": self.failures,
            "last_error": self.last_error,
            "controller_id": self._controller.controller_id,
        }

    # -- sender thread ---------------------------------------------------------------------------

    def _take(self) -> dict[TopicPartition, IsrProposal] | None:
        with self._cond:
            while not self._unsent and not self._stopped.is_set():
                self._cond.wait()
        if self._stopped.wait(self._linger_s):
            return None
        with self._cond:
            batch, self._unsent = self._unsent, {}
        return batch

    def _requeue(self, proposals: list[IsrProposal]) -> None:
        # Ask before taking our lock: is_current takes the replica manager's lock, which callers of
        # submit() hold while they take ours.
        current = [p for p in proposals if self._is_current(p)]
        with self._cond:
            for proposal in current:
                self._unsent.setdefault(proposal.topic_partition, proposal)

    def _run(self) -> None:
        while not self._stopped.is_set():
            batch = self._take()
            if batch is None:
                return
            try:
                retry = self._send(batch)
            except Exception:  # never let one bad answer stop ISR propagation for good
                logger.exception("AlterIsr sender failed")
                retry = list(batch.values())
            if retry:
                self.failures += 1
                self._requeue(retry)
                self._stopped.wait(self._retry_backoff_s)

    def _send(self, batch: dict[TopicPartition, IsrProposal]) -> list[IsrProposal]:
        """Send one request; return the proposals to send again."""
        request = AlterIsrRequest(
            self._broker_id,
            self._broker_epoch(),
            tuple(
                AlterIsrPartition(tp.topic, tp.partition, p.leader_epoch, p.new_isr, p.zk_version)
                for tp, p in batch.items()
            ),
        )
        try:
            response = self._controller.alter_isr(request)
        except ControllerUnavailableError as exc:
            self._note_error(str(exc))
            return list(batch.values())
        self.requests_sent += 1
        if response.error_code != ErrorCode.NONE:
            if response.error_code == ErrorCode.NOT_CONTROLLER:
                self._controller.refresh()
            self._note_error(f"AlterIsr answered {response.error_code.name}")
            return list(batch.values())
        self.last_error = None
        answered: set[TopicPartition] = set()
        for result in response.partitions:
            proposal = batch.get(result.topic_partition)
            if proposal is None:
                continue
            answered.add(result.topic_partition)
            self._on_result(proposal, result)
        missing = [p for tp, p in batch.items() if tp not in answered]
        if missing:
            self._note_error(f"the controller did not answer for {len(missing)} partitions")
        return missing

    def _note_error(self, message: str) -> None:
        if message != self.last_error:
            logger.warning(
                "AlterIsr from broker %d: %s; retrying in %.1fs", self._broker_id, message, self._retry_backoff_s
            )
        self.last_error = message
