"""What the controller keeps of a broker's LeaderAndIsr answer: the partitions that did not answer NONE,
and per topic the numbers of those that did.

Why: an answer lists every partition of its request, and after a failover at a million partitions,
RF 3, each of five brokers answers for ~600,000: decoded, ~62 MB of ``PartitionError`` objects (a
topic string each) beside its 31 MB of JSON, held from the sender thread that decodes it until the
event thread has handled its ``LeaderAndIsrResponseReceived``. Several held at once were most of what
a failover's answers added to the controller's peak. The digest is made on the sender thread right
after the strict decode (``protocol.messages``: a wrongly typed field is still refused there), so the
full answer is let go at once; it holds ~8 bytes a partition answered NONE.

The event handler needs nothing else: storage errors take replicas offline, and a NONE for a partition
the broker had on a failed log directory brings it back (``Controller._on_leader_and_isr_response_received``).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller_core.protocol.messages import ErrorCode, LeaderAndIsrResponse, PartitionError


@dataclass(frozen=True, slots=True)
class LeaderAndIsrAnswer:
    """A LeaderAndIsr answer digested (``of``): its top-level error, its per-partition results other than
    NONE, and per topic the partitions answered NONE, in the answer's order."""

    error_code: ErrorCode
    failed: tuple[PartitionError, ...]
    ok: dict[str, list[int]]

    @classmethod
    def of(cls, response: LeaderAndIsrResponse) -> LeaderAndIsrAnswer:
        none = ErrorCode.NONE
        failed: list[PartitionError] = []
        ok: dict[str, list[int]] = {}
        numbers: list[int] = []
        topic: str | None = None
        for e in response.partition_errors:
            if e.error_code != none:
                failed.append(e)
                continue
            if e.topic != topic:  # an answer lists a topic's partitions together: one lookup a run
                topic = e.topic
                numbers = ok.setdefault(topic, [])
            numbers.append(e.partition)
        return cls(response.error_code, tuple(failed), ok)
