"""The failover's first LeaderAndIsr and UpdateMetadata partition states, kept ready by a warm standby.

A failover's replica state machine start-up (``ReplicaStateMachine.startup``) sends every online
replica a LeaderAndIsr for its partition and every broker an UpdateMetadata of every partition with a
leadership and an online replica. Built at takeover, that is two message structs and a few dictionary
writes per partition: at 100,000 partitions 85-90 % of a warm takeover (docs/performance.md). None of
those per-partition states depends on the new controller: its epoch and the recipient's broker epoch
are in the request header, stamped when the batch is sent. So the standby keeps them, next to its
kept context, changed by what changed:

* ``groups``: per recipient list (a partition's live replicas, in replica order), partition number ->
  ``LeaderAndIsrPartitionState`` (``is_new`` false) of every partition with a leadership and that
  recipient list; the start-up groups its entries the same way, and a broker's request lists its
  groups' partitions group by group (``ControllerBrokerRequestBatch.add_leader_and_isr_requests_by_id``);
* ``update_metadata``: partition number -> ``UpdateMetadataPartitionState`` of every partition with a
  leadership and at least one live replica (its offline replicas are the dead ones).

Each mapping is in the context's partition order (``ControllerContext.iter_assigned_ids``: topic by
topic) and the groups in the order of their first partition, the order in which the start-up adds
them, so the requests sent are the very bytes the start-up would send on the same context. A
partition whose leadership changed is written in place (its position kept); a topic reloaded moves to
the end, as it does in the context; an entry that lands elsewhere (a broker back or gone, a first
leadership, a group's first partition leaving) marks the order for ``settle``, run on the standby after
each re-read, so that ``take`` only lists each broker's groups (``request_batch.GroupedStates``: no
loop per partition in Python, no per-broker dict unless the batch needs one).

Not kept: what the failover decides before the start-up (topics queued for deletion are sent with
leader -2, replicas on failed log directories are offline): ``ControllerBrokerRequestBatch.add_kept``
builds those partitions as usual. No I/O and no locking: the owner (``WarmContext``) calls in.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TypeVar

from controller_core.context import ControllerContext
from controller_core.protocol.messages import LeaderAndIsrPartitionState, SharedList, UpdateMetadataPartitionState
from controller_core.request_batch import GroupedStates, leader_and_isr_state

LeaderAndIsrStates = dict[int, GroupedStates]
"""Per recipient broker: its groups (partition number -> LeaderAndIsr partition state), in the
start-up's order; merged into one dict only if the batch needs one."""

UpdateMetadataStates = dict[int, UpdateMetadataPartitionState]
"""Partition number -> its UpdateMetadata partition state, in partition order."""

LeaderAndIsrParts = dict[int, list[SharedList[LeaderAndIsrPartitionState]]]
"""Per recipient broker: the shared lists of its groups' states, in order."""

_V = TypeVar("_V")


class KeptRequests:
    """The start-up's per-partition request states of ``ctx``, kept current (module docstring).

    Example::

        kept = KeptRequests.build(ctx)            # after the kept context's load
        kept.refresh(changed_ids); kept.settle()  # after each re-read applied to ctx
        leader_and_isr, update_metadata, parts = kept.take()   # at takeover (then dropped)
    """

    def __init__(self, ctx: ControllerContext) -> None:
        self.ctx = ctx
        self.groups: dict[tuple[int, ...], dict[int, LeaderAndIsrPartitionState]] = {}
        self.update_metadata: UpdateMetadataStates = {}
        self._recipients: list[tuple[int, ...] | None] = []
        """Partition number -> its group (the live replicas its LeaderAndIsr state is kept for), None:
        in none. A column like the table's (8 bytes a partition; a dict was ~70 MB at a million)."""
        self._groups_unsorted = False
        """The groups may be out of the order of their first partitions."""
        self._unsorted_groups: set[tuple[int, ...]] = set()
        """Groups that gained a partition possibly out of partition order."""
        self._update_metadata_unsorted = False

    @classmethod
    def build(cls, ctx: ControllerContext) -> KeptRequests:
        kept = cls(ctx)
        kept.refresh([pid for _, pid in ctx.iter_assigned_ids()], at_end=True)
        return kept

    # -- changes ------------------------------------------------------------------------------------
    def refresh(self, ids: Iterable[int], *, at_end: bool = False) -> None:
        """Make the states of partition numbers ``ids`` match the context (their leadership, assignment
        or the liveness of their replicas changed, or they were assigned or unassigned). ``at_end``:
        ``ids`` are a topic just (re)loaded, last in the context's order, given in its order."""
        table = self.ctx.table
        leadership, assignments, tps = table.leadership, table.assignment, table.tps
        assigned = table.by_topic
        live = self.ctx.live_broker_ids
        groups = self.groups
        update_metadata = self.update_metadata
        recipients_of = self._recipients
        if len(recipients_of) < len(tps):  # partitions numbered since the last refresh
            recipients_of.extend([None] * (len(tps) - len(recipients_of)))
        splits: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        for pid in ids:
            tp = tps[pid]
            info = leadership[pid]
            assignment = assignments[pid]
            before = recipients_of[pid]
            online: tuple[int, ...] = ()
            if info is not None and assignment is not None and tp in assigned.get(tp.topic, ()):
                replicas = assignment.replicas
                split = splits.get(replicas) or _split_by_liveness(splits, replicas, live)
                online, offline = split
            if online != before and before is not None:
                self._leave(pid, before)
            if not online:
                if pid in update_metadata:
                    del update_metadata[pid]
                continue
            assert info is not None and assignment is not None
            lai = info.leader_and_isr
            state = leader_and_isr_state(tp, info, assignment, False)
            if online == before:
                groups[online][pid] = state  # in place
            else:
                group = groups.get(online)
                if group is None:
                    group = groups[online] = {}
                    # A new group is last; in order only if its first partition is too.
                    self._groups_unsorted = self._groups_unsorted or not at_end
                elif not at_end:
                    self._unsorted_groups.add(online)
                group[pid] = state
                recipients_of[pid] = online
            if not at_end and pid not in update_metadata and update_metadata:
                self._update_metadata_unsorted = True
            update_metadata[pid] = UpdateMetadataPartitionState(
                tp.topic,
                tp.partition,
                info.controller_epoch,
                lai.leader,
                lai.leader_epoch,
                lai.isr,
                lai.zk_version,
                assignment.replicas,
                offline,
            )

    def add_loaded(self, ids: Sequence[int]) -> None:
        """``refresh(ids, at_end=True)`` for assigned partitions this holds nothing of yet, loaded last in
        the context's order: the same entries, without looking for what they would replace. A cold
        failover's read builds a million this way, a batch of state znodes at a time
        (``controller_core.failover_read``)."""
        table = self.ctx.table
        leadership, assignments, tps = table.leadership, table.assignment, table.tps
        live = self.ctx.live_broker_ids
        groups = self.groups
        update_metadata = self.update_metadata
        recipients_of = self._recipients
        if len(recipients_of) < len(tps):
            recipients_of.extend([None] * (len(tps) - len(recipients_of)))
        splits: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        leader_and_isr, metadata = LeaderAndIsrPartitionState, UpdateMetadataPartitionState
        for pid in ids:
            info = leadership[pid]
            assignment = assignments[pid]
            if info is None or assignment is None:
                continue
            replicas = assignment.replicas
            split = splits.get(replicas) or _split_by_liveness(splits, replicas, live)
            online, offline = split
            if not online:
                continue
            tp = tps[pid]
            lai = info.leader_and_isr
            group = groups.get(online)
            if group is None:
                group = groups[online] = {}
            # leader_and_isr_state(tp, info, assignment, False), inlined: once per partition.
            group[pid] = leader_and_isr(
                tp.topic,
                tp.partition,
                info.controller_epoch,
                lai.leader,
                lai.leader_epoch,
                lai.isr,
                lai.zk_version,
                replicas,
                assignment.adding_replicas,
                assignment.removing_replicas,
                False,
            )
            recipients_of[pid] = online
            update_metadata[pid] = metadata(
                tp.topic,
                tp.partition,
                info.controller_epoch,
                lai.leader,
                lai.leader_epoch,
                lai.isr,
                lai.zk_version,
                replicas,
                offline,
            )

    def _leave(self, pid: int, recipients: tuple[int, ...]) -> None:
        """Take ``pid`` out of its group (a group's first partition leaving may move the group)."""
        self._recipients[pid] = None
        group = self.groups[recipients]
        if next(iter(group)) == pid:
            self._groups_unsorted = True
        del group[pid]
        if not group:
            del self.groups[recipients]

    def forget(self, ids: Iterable[int]) -> None:
        """Drop partition numbers ``ids`` (their topic is reloaded: it comes back at the end)."""
        recipients_of = self._recipients
        for pid in ids:
            recipients = recipients_of[pid] if pid < len(recipients_of) else None
            if recipients is not None:
                self._leave(pid, recipients)
            self.update_metadata.pop(pid, None)

    def broker_liveness_changed(self, broker_id: int) -> None:
        """``broker_id`` became live or dead: its partitions' recipients and offline replicas change."""
        self.refresh(self.ctx.table.by_broker.get(broker_id, ()))

    def settle(self) -> None:
        """Put what gained entries out of order back in the start-up's order (on the standby, after a
        re-read, so that ``take`` has nothing left to sort)."""
        unsorted_groups = self._unsorted_groups
        if not (self._groups_unsorted or unsorted_groups or self._update_metadata_unsorted):
            return
        rank = {pid: i for i, (_, pid) in enumerate(self.ctx.iter_assigned_ids())}
        groups = self.groups
        for recipients in unsorted_groups:
            group = groups.get(recipients)
            if group is not None:
                groups[recipients] = _sorted(group, rank)  # in place: the groups' order is kept
        if unsorted_groups or self._groups_unsorted:
            # A group whose first partition changed may move.
            self.groups = dict(sorted(groups.items(), key=lambda item: rank[next(iter(item[1]))]))
        if self._update_metadata_unsorted:
            self.update_metadata = _sorted(self.update_metadata, rank)
        self._groups_unsorted = self._update_metadata_unsorted = False
        unsorted_groups.clear()

    def take(self) -> tuple[LeaderAndIsrStates, UpdateMetadataStates, LeaderAndIsrParts]:
        """The kept states for the takeover's batch (this object is then spent): per broker, its
        groups, in the order the start-up adds their partitions (``GroupedStates``); and per broker its groups'
        states as lists shared by the group's recipients, whose concatenation its states are (each
        group's JSON is then made once for all of them: ``protocol.messages.PartedList``)."""
        self.settle()
        by_broker: LeaderAndIsrStates = {}
        parts: LeaderAndIsrParts = {}
        for recipients, group in self.groups.items():
            shared = SharedList(group.values())
            for broker_id in recipients:
                states = by_broker.get(broker_id)
                if states is None:
                    by_broker[broker_id] = GroupedStates([group])
                    parts[broker_id] = [shared]
                else:
                    states.groups.append(group)
                    parts[broker_id].append(shared)
        # A partition is in one group only, so each broker's states are its groups' in order; a
        # recipient list naming a broker twice would give it a group twice: merged then, no parts.
        for broker_id, states in by_broker.items():
            if len(set(map(id, states.groups))) != len(states.groups):
                by_broker[broker_id] = GroupedStates([states.merged()])
                del parts[broker_id]
        return by_broker, self.update_metadata, parts

    def release(self) -> None:
        """Let go of everything kept (once ``take``'s result is in the takeover's batch): the failover
        holds this object until it is over, through its largest transients (the requests' encodings,
        the state snapshot record)."""
        self.groups, self.update_metadata, self._recipients = {}, {}, []


def _split_by_liveness(
    splits: dict[tuple[int, ...], tuple[tuple[int, ...], tuple[int, ...]]],
    replicas: tuple[int, ...],
    live: Collection[int],
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """``replicas`` split into (online, offline) by ``live``, remembered in ``splits``: a cluster has few
    distinct replica lists, so the loops over every partition look a split up and build it once."""
    split = splits[replicas] = (
        tuple([r for r in replicas if r in live]),
        tuple([r for r in replicas if r not in live]),
    )
    return split


def _sorted(states: dict[int, _V], rank: dict[int, int]) -> dict[int, _V]:
    return {pid: states[pid] for pid in sorted(states, key=rank.__getitem__)}
