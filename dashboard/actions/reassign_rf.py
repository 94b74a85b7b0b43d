"""Replication-factor changes as reassignments (issue #29, item 3): the fewest moves, rack-aware,
preferred leaders kept.

Kafka changes a topic's replication factor only through a reassignment naming more or fewer replicas
per partition; nobody should have to write that JSON by hand. For each partition of the chosen topics:

* **raising** keeps every current replica in its place (so the preferred leader, the first, stays)
  and appends new ones: first brokers of racks the partition does not use yet, then the broker with
  the fewest replicas of these topics (counting those already planned), lowest id on ties;
* **lowering** keeps the first replica (the preferred leader) and then, in their current order, the
  replicas that add a rack the kept ones lack, then the rest, removing from the most loaded brokers
  first; nothing else moves.

Only additions copy data, so raising copies exactly ``(new - old) x partitions`` replicas and lowering
copies none. Checked first (``ValueError`` with the reason): the factor is a whole number from 1 to
the number of live brokers, and racks are set on every live broker or on none (Kafka's
rack-aware assignment refuses a mix).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller_core.model import TopicPartition
from controller_core.reassign_plan import Move, Proposal


def check_factor(value: object, live_brokers: int) -> int:
    """The requested replication factor, or ``ValueError`` saying why it cannot be used."""
    if isinstance(value, bool) or not isinstance(value, int):
        text = str(value).strip() if isinstance(value, str) else None
        if text is None or not text.isdigit():
            raise ValueError(f"the replication factor must be a whole number, got {value!r}")
        value = int(text)
    if value < 1:
        raise ValueError(f"the replication factor must be at least 1, got {value}")
    if value > live_brokers:
        raise ValueError(
            f"the replication factor {value} is more than the {live_brokers} live broker(s): "
            "each replica needs its own broker"
        )
    return value


def check_racks(racks: Mapping[int, str | None]) -> None:
    with_rack = sorted(b for b, r in racks.items() if r)
    without = sorted(b for b, r in racks.items() if not r)
    if with_rack and without:
        raise ValueError(
            f"brokers {', '.join(map(str, without))} have no rack while {', '.join(map(str, with_rack))} do: "
            "rack-aware placement needs a rack on every live broker (or on none)"
        )


def plan(current: Mapping[TopicPartition, Sequence[int]], factor: int, racks: Mapping[int, str | None]) -> Proposal:
    """Every partition of ``current`` at replication factor ``factor`` over the live brokers ``racks``
    (broker -> rack). Replicas on brokers that are not live are kept when raising (they are the
    partition's own) but dropped first when lowering."""
    check_factor(factor, len(racks))
    check_racks(racks)
    load: dict[int, int] = dict.fromkeys(racks, 0)
    for replicas in current.values():
        for r in replicas:
            if r in load:
                load[r] += 1

    def rack(b: int) -> str:
        return racks.get(b) or f"\x00{b}"

    moves: list[Move] = []
    for tp in sorted(current, key=lambda t: (t.topic, t.partition)):
        replicas = list(current[tp])
        if len(replicas) < factor:
            proposed = list(replicas)
            while len(proposed) < factor:
                used = {rack(b) for b in proposed}
                candidates = [b for b in racks if b not in proposed]
                best = min(candidates, key=lambda b: (rack(b) in used, load[b], b))
                proposed.append(best)
                load[best] += 1
        elif len(replicas) > factor:
            keep = [replicas[0]]
            rest = replicas[1:]
            while len(keep) < factor:
                used = {rack(b) for b in keep}
                best = min(
                    rest,
                    key=lambda b: (b not in racks, rack(b) in used, load.get(b, 0), replicas.index(b)),
                )
                keep.append(best)
                rest.remove(best)
            for dropped in rest:
                if dropped in load:
                    load[dropped] -= 1
            proposed = [b for b in replicas if b in keep]
        else:
            proposed = list(replicas)
        moves.append(Move(tp.topic, tp.partition, tuple(replicas), tuple(proposed)))
    brokers = tuple(sorted(set(racks) | {r for m in moves for r in m.current}))
    return Proposal(moves, brokers)
