"""Faults the state-machine unit tests inject into the fake partition-state store, by name.

Why one table: the partition and replica state machine tests (and the cached-state tests) check
that each of these is a per-partition result that changes nothing else; naming them in one place
keeps the fault list and what each does the same in every module that parametrizes over them.
"""

from __future__ import annotations

from typing import Final

from controller_core.model import TopicPartition
from controller_core.ports import ZkCode
from scripts.support.fakes import FakePartitionStateStore

STORE_FAULTS: Final = ("missing", "corrupt", "read_error", "write_error", "read_raises")


def inject_store_fault(store: FakePartitionStateStore, tp: TopicPartition, fault: str) -> None:
    """Make the next access to ``tp``'s state znode fail as ``fault`` (one of ``STORE_FAULTS``)."""
    if fault == "missing":
        store.delete_state(tp)
    elif fault == "corrupt":
        store.corrupt(tp)
    elif fault == "read_error":
        store.read_errors[tp] = ZkCode.CONNECTION_LOSS
    elif fault == "write_error":
        store.write_errors[tp] = ZkCode.NO_NODE
    elif fault == "read_raises":
        store.fail_next_read = TimeoutError("zk timeout")
    else:
        raise ValueError(f"unknown store fault {fault!r}; expected one of {STORE_FAULTS}")
