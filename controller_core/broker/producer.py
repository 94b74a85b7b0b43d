"""A synthetic produce load on every partition this broker leads.

Why: the controller's decisions only become visible (ISR shrinking under lag, NotEnoughReplicas when
the ISR is too small, catch-up after a restart) when leaders keep taking writes. Every tick the
producer sends each led partition one "produce request" of ``rate * elapsed`` messages (fractions
carry over), with the configured ``acks``; refusals are counted by the replica manager
(NotEnoughReplicas per partition) and here (per outcome).
"""

from __future__ import annotations

import logging
import threading
import time

from controller_core.broker.config import Acks
from controller_core.broker.replica_manager import AppendResult, ReplicaManager
from controller_core.model import TopicPartition

logger = logging.getLogger(__name__)


class SyntheticProducer:
    """Appends ``rate`` messages per second to each partition the broker leads.

    Example::

        producer = SyntheticProducer(rm, rate=100.0, acks=Acks.ALL, min_insync_replicas=2)
        producer.start()
    """

    def __init__(
        self,
        replicas: ReplicaManager,
        *,
        rate: float,
        acks: Acks,
        min_insync_replicas: int,
        tick_s: float = 0.1,
    ) -> None:
        if rate < 0:
            raise ValueError(f"produce rate must be >= 0, got {rate}")
        self._replicas = replicas
        self.rate = rate
        self.acks = acks
        self.min_insync_replicas = min_insync_replicas
        self._tick_s = tick_s
        self._carry: dict[TopicPartition, float] = {}
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="synthetic-producer", daemon=True)
        self.outcomes: dict[str, int] = {result.value: 0 for result in AppendResult}

    def start(self) -> None:
        if self.rate > 0:
            self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5.0)

    def tick(self, elapsed_s: float) -> int:
        """Produce ``elapsed_s`` worth of messages to every led partition; the number appended."""
        appended = 0
        leaders = self._replicas.leader_partitions()
        carry = {tp: self._carry.get(tp, 0.0) + self.rate * elapsed_s for tp in leaders}
        for tp, due in carry.items():
            count = int(due)
            carry[tp] = due - count
            if count == 0:
                continue
            result = self._replicas.append(tp, count, int(self.acks), self.min_insync_replicas)
            self.outcomes[result.value] += 1
            if result == AppendResult.APPENDED:
                appended += count
        self._carry = carry
        return appended

    def _run(self) -> None:
        last = time.monotonic()
        while not self._stopped.wait(self._tick_s):
            now = time.monotonic()
            try:
                self.tick(now - last)
            except Exception:  # keep the load going; a bug here must not stop the broker
                logger.exception("synthetic produce failed")
            last = now

    def stats(self) -> dict[str, object]:
        return {
            "rate_per_partition": self.rate,
            "acks": "all" if self.acks == Acks.ALL else int(self.acks),
            "min_insync_replicas": self.min_insync_replicas,
            "requests": dict(self.outcomes),
        }
