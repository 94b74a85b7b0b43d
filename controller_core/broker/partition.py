"""One partition as a broker hosts it: its role, leader epoch, ISR and what the leader knows of followers.

The semantics are Kafka's (``Partition`` / ``Replica``, 2.2 to 2.8):

* **Becoming leader** (``make_leader``) records the controller epoch of the decision, the assigned
  replicas and the ISR, the new leader epoch and its *start offset* (the LEO at that moment, also
  written into the log's epoch cache), and resets what the leader knows of each follower: its
  "last caught up" time becomes now for ISR members and 0 for the others; when leadership moved
  here from another broker, follower LEOs become unknown (-1) until they fetch. The HW is kept:
  a new leader's HW is what it knew as a follower, and it only moves forward from there.
* **Becoming follower** (``make_follower``) records the new leader and epoch, clears the ISR (only
  leaders track it) and, when the leader changed, truncates the log to its HW: what is beyond the HW
  may never have been committed, and the new leader's log decides.
* **HW** (leader) = the lowest LEO among the ISR (while an ISR change is in flight, among the
  larger of the two ISRs, so the HW never runs ahead of a replica that may still be in sync). It
  never goes backwards.
* **ISR shrink**: an ISR follower whose LEO differs from the leader's and that has not been caught
  up for ``replica.lag.time.max.ms`` is out of sync. A follower is *caught up* at a fetch when it
  asks for the leader's LEO, or for at least the LEO the leader had at its previous fetch (it then
  counts as caught up as of that previous fetch).
* **ISR expand**: an assigned follower outside the ISR joins when its LEO reaches the HW and the
  current leader epoch's start offset.
* ISR changes are *proposals* (AlterIsr, reference §8.9): the partition keeps its committed ISR,
  remembers the proposal as pending, proposes nothing else meanwhile, and applies the controller's
  answer only if it still concerns the current leader epoch and ISR version.
* **acks=all** appends are refused with NotEnoughReplicas while the committed ISR is smaller than
  ``min.insync.replicas``.

Time is passed in (``now_ms``, monotonic milliseconds), so all of this is pure and unit-testable.
Not thread-safe: the replica manager's lock guards every partition.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final, NamedTuple

from controller_core.broker.log import ReplicaLog
from controller_core.model import TopicPartition
from controller_core.protocol.messages import AlterIsrPartitionResult, ErrorCode, LeaderAndIsrPartitionState

UNKNOWN_OFFSET = -1


class Role(StrEnum):
    """What this broker does for the partition."""

    LEADER = "leader"
    FOLLOWER = "follower"
    #: StopReplica without delete: the replica keeps its log but neither leads nor fetches.
    STOPPED = "stopped"


class NotEnoughReplicasError(Exception):
    """acks=all with an ISR smaller than ``min.insync.replicas`` (Kafka: NOT_ENOUGH_REPLICAS, 19)."""


class NotLeaderError(Exception):
    """An append or a follower fetch reached a replica that is not the leader (NOT_LEADER_OR_FOLLOWER)."""


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one remote replica (Kafka's remote ``Replica``)."""

    broker_id: int
    log_end_offset: int = UNKNOWN_OFFSET
    log_start_offset: int = UNKNOWN_OFFSET
    last_fetch_time_ms: float = 0.0
    last_fetch_leader_log_end_offset: int = 0
    last_caught_up_time_ms: float = 0.0

    def update_fetch_state(self, fetch_offset: int, log_start_offset: int, now_ms: float, leader_leo: int) -> None:
        """Record a fetch at ``fetch_offset`` made at ``now_ms`` while the leader's LEO was ``leader_leo``."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_start_offset = log_start_offset
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_leo
        self.last_fetch_time_ms = now_ms

    def reset(self, leader_leo: int, now_ms: float, last_caught_up_time_ms: float) -> None:
        """Restart the lag clock when this broker (re)becomes leader."""
        self.last_fetch_leader_log_end_offset = leader_leo
        self.last_fetch_time_ms = now_ms
        self.last_caught_up_time_ms = last_caught_up_time_ms


class IsrState(NamedTuple):
    """The committed ISR and, while an AlterIsr is in flight, the proposed one.

    Compared by identity (``is``) to tell whether an AlterIsr answer still concerns the current
    state; a NamedTuple because 100,000 of them are built per large LeaderAndIsr.
    """

    isr: tuple[int, ...]
    proposed: tuple[int, ...] | None = None

    @property
    def inflight(self) -> bool:
        return self.proposed is not None

    @property
    def maximal(self) -> tuple[int, ...]:
        """The committed ISR plus any replica being added (the set the HW must wait for)."""
        if self.proposed is None:
            return self.isr
        extra = tuple(r for r in self.proposed if r not in self.isr)
        return self.isr + extra


_NO_ISR: Final = IsrState(())


@dataclass(frozen=True, slots=True)
class IsrProposal:
    """An ISR change to send to the controller; ``state`` identifies it when the answer comes."""

    topic_partition: TopicPartition
    leader_epoch: int
    new_isr: tuple[int, ...]
    zk_version: int
    state: IsrState
    expand: bool


class Partition:
    """One hosted partition. See the module docstring for the rules it keeps.

    Slotted and lazy about followers (their state is created at their first fetch, from the values
    the last ``make_leader`` reset them to), because a benchmark broker hosts 100,000 of these and
    a LeaderAndIsr for all of them must take well under a second.
    """

    __slots__ = (
        "_reset",
        "adding_replicas",
        "controller_epoch",
        "controller_isr",
        "followers",
        "isr_expands",
        "isr_shrinks",
        "isr_state",
        "isr_update_failures",
        "leader_epoch",
        "leader_epoch_start_offset",
        "leader_id",
        "local_broker_id",
        "log",
        "remote_replicas",
        "removing_replicas",
        "replicas",
        "role",
        "topic_partition",
        "zk_version",
    )

    def __init__(self, topic_partition: TopicPartition, local_broker_id: int, log: ReplicaLog) -> None:
        self.topic_partition = topic_partition
        self.local_broker_id = local_broker_id
        self.log = log
        self.role = Role.FOLLOWER
        self.leader_id: int | None = None
        #: Kafka starts at initial epoch - 1, so that epoch 0 from the controller is newer.
        self.leader_epoch = -1
        self.leader_epoch_start_offset: int | None = None
        self.controller_epoch = -1
        self.zk_version = -1
        self.replicas: tuple[int, ...] = ()
        self.adding_replicas: tuple[int, ...] = ()
        self.removing_replicas: tuple[int, ...] = ()
        self.isr_state = _NO_ISR
        #: The ISR as the controller last stated it (what followers display; leaders use isr_state).
        self.controller_isr: tuple[int, ...] = ()
        #: The assigned replicas other than this broker, while leading.
        self.remote_replicas: tuple[int, ...] = ()
        #: Followers that have fetched since this broker became leader (see ``follower``).
        self.followers: dict[int, FollowerState] = {}
        #: (leader LEO, time, ISR) of the last make_leader: what a follower's state starts from.
        self._reset: tuple[int, float, tuple[int, ...]] = (0, 0.0, ())
        self.isr_shrinks = 0
        self.isr_expands = 0
        self.isr_update_failures = 0

    def follower(self, replica_id: int) -> FollowerState | None:
        """What the leader knows of ``replica_id`` (None if it is not an assigned follower).

        Created on first use as ``make_leader`` would have reset it: LEO unknown, lag clock started
        at the leadership change, caught up then if it was in the ISR then.
        """
        follower = self.followers.get(replica_id)
        if follower is None and replica_id in self.remote_replicas:
            leo, now_ms, isr = self._reset
            follower = FollowerState(replica_id)
            follower.reset(leo, now_ms, now_ms if replica_id in isr else 0.0)
            self.followers[replica_id] = follower
        return follower

    # -- leadership ------------------------------------------------------------------------------

    def _update_assignment(self, state: LeaderAndIsrPartitionState) -> None:
        # The request's tuples are immutable and not shared with anything that changes them.
        self.controller_epoch = state.controller_epoch
        self.replicas = state.replicas
        self.adding_replicas = state.adding_replicas
        self.removing_replicas = state.removing_replicas
        self.controller_isr = state.isr

    def make_leader(self, state: LeaderAndIsrPartitionState, now_ms: float) -> bool:
        """Lead at ``state.leader_epoch``; return True when leadership moved here from elsewhere."""
        self._update_assignment(state)
        isr = self.controller_isr
        self.isr_state = IsrState(isr)
        leo = self.log.log_end_offset
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = leo
        self.log.assign_epoch_start_offset(state.leader_epoch, leo)
        self.zk_version = state.zk_version
        local = self.local_broker_id
        is_new_leader = self.role != Role.LEADER or self.leader_id != local
        self.remote_replicas = tuple([r for r in self.replicas if r != local])
        self._reset = (leo, now_ms, isr)
        known = self.followers
        if known:
            self.followers = {}
            if not is_new_leader:
                # Re-elected here: keep what followers reported, restart their lag clocks.
                for replica_id in self.remote_replicas:
                    follower = known.get(replica_id)
                    if follower is not None:
                        follower.reset(leo, now_ms, now_ms if replica_id in isr else 0.0)
                        self.followers[replica_id] = follower
        self.leader_id = local
        self.role = Role.LEADER
        self.maybe_increment_high_watermark()
        return is_new_leader

    def make_follower(self, state: LeaderAndIsrPartitionState) -> bool:
        """Follow ``state.leader``; return True when the leader or epoch changed (fetching restarts).

        On a change the log is truncated to the HW before the follower fetches from the new leader.
        """
        self._update_assignment(state)
        self.isr_state = _NO_ISR
        self.followers = {}
        self.remote_replicas = ()
        previous_leader, previous_epoch = self.leader_id, self.leader_epoch
        self.leader_epoch = state.leader_epoch
        self.leader_epoch_start_offset = None
        self.zk_version = state.zk_version
        was_following = self.role == Role.FOLLOWER
        self.role = Role.FOLLOWER
        self.leader_id = state.leader
        changed = not (was_following and previous_leader == state.leader and previous_epoch == state.leader_epoch)
        if changed:
            self.log.truncate_to(self.log.high_watermark)
        return changed

    def stop(self) -> None:
        """StopReplica without delete: keep the log, stop leading and following."""
        self.role = Role.STOPPED
        self.isr_state = _NO_ISR
        self.followers = {}
        self.remote_replicas = ()

    @property
    def is_leader(self) -> bool:
        return self.role == Role.LEADER

    # -- leader: appends, follower fetches, HW -----------------------------------------------------

    def append_as_leader(self, count: int, acks: int, min_insync_replicas: int) -> int:
        """Append ``count`` synthetic messages; return the first offset.

        Raises ``NotLeaderError`` on a non-leader, ``NotEnoughReplicasError`` for acks=all (-1) while
        the committed ISR is smaller than ``min_insync_replicas``.
        """
        if self.role != Role.LEADER:
            raise NotLeaderError(f"broker {self.local_broker_id} does not lead {self.topic_partition}")
        if acks == -1 and len(self.isr_state.isr) < min_insync_replicas:
            raise NotEnoughReplicasError(
                f"the ISR {list(self.isr_state.isr)} of {self.topic_partition} is smaller than "
                f"min.insync.replicas={min_insync_replicas}"
            )
        first = self.log.append(count, self.leader_epoch)
        self.maybe_increment_high_watermark()
        return first

    def check_fetch_epoch(self, replica_id: int, leader_epoch: int) -> ErrorCode:
        """Whether a follower fetch may be served here (Kafka's leader-epoch validation of fetches)."""
        if self.role != Role.LEADER:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if leader_epoch >= 0:
            if leader_epoch < self.leader_epoch:
                return ErrorCode.FENCED_LEADER_EPOCH
            if leader_epoch > self.leader_epoch:
                return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def update_follower_fetch_state(
        self, replica_id: int, fetch_offset: int, log_start_offset: int, now_ms: float
    ) -> bool:
        """Record a follower's fetch; False when ``replica_id`` is not an assigned replica (Kafka then
        serves nothing, until a LeaderAndIsr names it) or the offset is outside the leader's log."""
        if not self.log.log_start_offset <= fetch_offset <= self.log.log_end_offset:
            return False
        follower = self.follower(replica_id)
        if follower is None:
            return False
        follower.update_fetch_state(fetch_offset, log_start_offset, now_ms, self.log.log_end_offset)
        return True

    def maybe_increment_high_watermark(self) -> bool:
        """Move the HW up to the lowest LEO in the (maximal) ISR; True when it moved."""
        if self.role != Role.LEADER:
            return False
        new_hw = self.log.log_end_offset
        remote = self.remote_replicas
        for replica_id in self.isr_state.maximal:
            if replica_id not in remote:
                continue
            follower = self.followers.get(replica_id)
            leo = UNKNOWN_OFFSET if follower is None else follower.log_end_offset  # not fetched yet: unknown
            new_hw = min(new_hw, leo)
        if new_hw > self.log.high_watermark:
            self.log.high_watermark = new_hw
            return True
        return False

    # -- ISR changes -------------------------------------------------------------------------------

    def maybe_expand_isr(self, replica_id: int) -> IsrProposal | None:
        """Propose adding ``replica_id`` once it has caught up to the HW and this epoch's start."""
        if self.role != Role.LEADER or self.isr_state.inflight:
            return None
        follower = self.follower(replica_id)
        if follower is None or replica_id in self.isr_state.isr:
            return None
        start = self.leader_epoch_start_offset
        if start is None or follower.log_end_offset < self.log.high_watermark or follower.log_end_offset < start:
            return None
        return self._propose((*self.isr_state.isr, replica_id), expand=True)

    def out_of_sync_replicas(self, now_ms: float, max_lag_ms: float) -> tuple[int, ...]:
        """ISR followers that are behind the LEO and have not caught up for more than ``max_lag_ms``."""
        leo = self.log.log_end_offset
        out = []
        for replica_id in self.isr_state.isr:
            if replica_id == self.local_broker_id:
                continue
            follower = self.follower(replica_id)
            if follower is None:
                continue
            if follower.log_end_offset != leo and now_ms - follower.last_caught_up_time_ms > max_lag_ms:
                out.append(replica_id)
        return tuple(out)

    def maybe_shrink_isr(self, now_ms: float, max_lag_ms: float) -> IsrProposal | None:
        """Propose dropping the out-of-sync followers (the leader always stays)."""
        if self.role != Role.LEADER or self.isr_state.inflight:
            return None
        out = set(self.out_of_sync_replicas(now_ms, max_lag_ms))
        if not out:
            return None
        return self._propose(tuple(r for r in self.isr_state.isr if r not in out), expand=False)

    def _propose(self, new_isr: tuple[int, ...], expand: bool) -> IsrProposal:
        state = IsrState(self.isr_state.isr, new_isr)
        return IsrProposal(self.topic_partition, self.leader_epoch, new_isr, self.zk_version, state, expand)

    def mark_proposed(self, proposal: IsrProposal) -> None:
        """The proposal was accepted for sending: it is now pending."""
        self.isr_state = proposal.state

    def handle_alter_isr_error(self, proposal: IsrProposal, error: ErrorCode) -> bool:
        """Apply a failed AlterIsr answer; return True when the proposal should be sent again.

        As in Kafka, an unknown partition, a fenced leader epoch or a stale ISR version means the
        controller has moved on: give up and keep the proposal pending until the LeaderAndIsr that
        the controller sends with its decision replaces it. An ineligible replica (KIP-841) reverts
        to the committed ISR. Other errors are retried.
        """
        if self.isr_state is not proposal.state:
            return False  # a LeaderAndIsr replaced our state meanwhile: the answer is out of date
        self.isr_update_failures += 1
        if error == ErrorCode.INELIGIBLE_REPLICA:
            # Nothing was written (a proposed member is dead or shutting down): back to the committed
            # ISR, free to propose again later, as Kafka's leader does since 3.3 (KIP-841).
            self.isr_state = IsrState(proposal.state.isr)
            return False
        return error not in (
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            ErrorCode.FENCED_LEADER_EPOCH,
            ErrorCode.INVALID_UPDATE_VERSION,
        )

    def handle_alter_isr_success(self, proposal: IsrProposal, result: AlterIsrPartitionResult) -> bool:
        """Commit the ISR the controller wrote; False when the answer no longer applies."""
        if self.isr_state is not proposal.state:
            return False
        if result.leader_epoch != self.leader_epoch or result.zk_version < self.zk_version:
            self.isr_update_failures += 1
            return False
        self.isr_state = IsrState(tuple(result.isr))
        self.controller_isr = tuple(result.isr)
        self.zk_version = result.zk_version
        if proposal.expand:
            self.isr_expands += 1
        else:
            self.isr_shrinks += 1
        self.maybe_increment_high_watermark()
        return True

    def _follower_view(self, replica_id: int) -> FollowerState:
        """``follower()`` without creating it (for read-only views)."""
        known = self.followers.get(replica_id)
        if known is not None:
            return known
        leo, now_ms, isr = self._reset
        view = FollowerState(replica_id)
        view.reset(leo, now_ms, now_ms if replica_id in isr else 0.0)
        return view

    # -- follower side ----------------------------------------------------------------------------

    def fetch_position(self) -> tuple[int, int]:
        """``(fetch_offset, leader_epoch)`` for this follower's next fetch."""
        return self.log.log_end_offset, self.leader_epoch

    # -- state for operators -----------------------------------------------------------------------

    def snapshot(self, now_ms: float) -> dict[str, Any]:
        """JSON-ready state (the broker's ``GET /v1/state``)."""
        log = self.log
        d: dict[str, Any] = {
            "topic": self.topic_partition.topic,
            "partition": self.topic_partition.partition,
            "role": str(self.role),
            "leader": self.leader_id,
            "leader_epoch": self.leader_epoch,
            "leader_epoch_start_offset": self.leader_epoch_start_offset,
            "controller_epoch": self.controller_epoch,
            "zk_version": self.zk_version,
            "replicas": list(self.replicas),
            "adding_replicas": list(self.adding_replicas),
            "removing_replicas": list(self.removing_replicas),
            "isr": list(self.isr_state.isr if self.is_leader else self.controller_isr),
            "pending_isr": None if self.isr_state.proposed is None else list(self.isr_state.proposed),
            "log_start_offset": log.log_start_offset,
            "log_end_offset": log.log_end_offset,
            "high_watermark": log.high_watermark,
            "epochs": [list(e) for e in log.epochs],
        }
        if self.is_leader:
            d["isr_shrinks"] = self.isr_shrinks
            d["isr_expands"] = self.isr_expands
            d["followers"] = [
                {
                    "broker_id": f.broker_id,
                    "log_end_offset": f.log_end_offset,
                    "lag": None if f.log_end_offset < 0 else log.log_end_offset - f.log_end_offset,
                    "in_sync": f.broker_id in self.isr_state.isr,
                    "ms_since_caught_up": None
                    if f.last_caught_up_time_ms <= 0
                    else round(now_ms - f.last_caught_up_time_ms),
                    "ms_since_fetch": None if f.last_fetch_time_ms <= 0 else round(now_ms - f.last_fetch_time_ms),
                }
                for f in (self._follower_view(r) for r in self.remote_replicas)
            ]
        return d
