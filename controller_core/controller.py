"""The controller: election, failover, resignation and the handling of every controller event.

This is Kafka's ``KafkaController`` re-implemented with the same order of operations
(reference §7 to §10), split so that this module only dispatches and sequences:

* ``process`` receives every event on the single event thread (``event_manager``) and sends it to
  the one ``_on_<event>`` method that ``EVENT_HANDLERS`` names for its class;
  ``ControllerMovedError`` is answered in one place, by resigning.
* the state machines (``replica_state_machine``, ``partition_state_machine``) do the transitions,
  ``reassignment`` and ``topic_deletion`` the two long-running procedures;
* ZooKeeper is reached only through the store (fenced, batched writes) and the watch registry
  (one-shot watches re-armed on every read, callbacks that only enqueue).

Controller candidates here are processes of their own (Celery workers with the controller role or
``manage.py run_controller``), not brokers: ``/controller``'s ``brokerid`` is the candidate's id,
and an extra ``endpoint`` key tells brokers where to send AlterIsr and ControlledShutdown.

Session handling: on SUSPENDED the event thread stops taking events until the connection returns
(nothing is acted on while leadership may not hold); on LOST every queued event is preempted, the
controller resigns, and once kazoo has a new session it re-arms its watch and competes again.

Departures for speed (docs/performance.md), each as safe as Kafka's way: elections and ISR shrinks
decide on the cached state first and write conditionally on its version, reading ZooKeeper only for
the partitions that conflict or could not be decided (``cached_states``; ``decide_from_cache=False``
restores Kafka's read-first); the collector is paused during events (``gc_policy``).
"""

from __future__ import annotations

import logging
import operator
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from itertools import islice
from operator import itemgetter
from typing import Any, Protocol

from controller_core import failover_read, malloc_policy, memory_probe
from controller_core.answer_digest import LeaderAndIsrAnswer
from controller_core.config import ControllerConfig
from controller_core.context import ControllerContext
from controller_core.controlled_shutdown import move_off_broker
from controller_core.controller_state import ControllerState
from controller_core.election import OfflineStrategy, PreferredStrategy
from controller_core.errors import (
    BrokerNotAvailableError,
    ControllerMovedError,
    IllegalStateError,
    StaleBrokerEpochError,
    StateChangeFailedError,
)
from controller_core.event_manager import ControllerEventManager
from controller_core.events import (
    AlterIsrReceived,
    ApiPartitionReassignment,
    AutoPreferredReplicaLeaderElection,
    BrokerChange,
    BrokerModifications,
    ControlledShutdown,
    ControllerChange,
    ControllerEvent,
    ElectionTrigger,
    ElectionType,
    Expire,
    IsrChangeNotification,
    LeaderAndIsrResponseReceived,
    LogDirEventNotification,
    PartitionModifications,
    PartitionReassignmentIsrChange,
    Probe,
    Reconnected,
    Reelect,
    RegisterAndReelect,
    ReplicaLeaderElection,
    ShutdownEventThread,
    Startup,
    StateSnapshotDue,
    Suspend,
    TopicChange,
    TopicConfigChange,
    TopicDeletion,
    TopicDeletionStopReplicaResponseReceived,
    ZkPartitionReassignment,
)
from controller_core.failover_read import ColdStartUp
from controller_core.model import (
    BrokerRegistration,
    LeaderAndIsr,
    LeaderIsrAndControllerEpoch,
    PartitionAndReplica,
    ReplicaAssignment,
    TopicPartition,
)
from controller_core.partition_state_machine import PartitionStateMachine, parse_config_bool
from controller_core.ports import RequestTransport, StateChangeSink, ZkCode
from controller_core.protocol.messages import ErrorCode, LeaderAndIsrResponse
from controller_core.reassignment import ReassignmentManager
from controller_core.rebalance_catchup import IsrTenure
from controller_core.record_kinds import RecordKind
from controller_core.replica_state_machine import ReplicaStateMachine
from controller_core.request_batch import ControllerBrokerRequestBatch
from controller_core.standby import FailoverSource, StandbyFollower
from controller_core.standby.kept_requests import KeptRequests
from controller_core.standby.warm_context import adopt, start_partition_state_machine, start_replica_state_machine
from controller_core.state_change_log import DEFERRED_RECORDS, StateChangeLogger
from controller_core.state_snapshot import snapshot_json_fields
from controller_core.states import PartitionState, ReplicaState
from controller_core.topic_deletion import ControllerDeletionClient, TopicDeletionManager
from controller_core.zk import paths
from controller_core.zk.store import ZkStore
from controller_core.zk.watchers import WatchEvent, WatchEventType, WatchRegistry

logger = logging.getLogger(__name__)

_R = ReplicaState
_P = PartitionState


def suspension_grace_s(session_timeout_s: float, servers: int) -> float:
    """How long a candidate stays SUSPENDED before it gives its session up (``Controller._watch_suspension``).

    kazoo reports SUSPENDED after two thirds of the session timeout without an answer and at once
    starts reconnecting, one server after another, each attempt lasting ``session_timeout_s /
    servers``; the connect request of every attempt that reaches the server renews the session there.
    So the candidate gives up halfway through the first attempt, never on an attempt boundary: with
    three servers the first attempt ends exactly a third of a session timeout after SUSPENDED, and a
    give-up timed there raced kazoo's next attempt, whose request kept the session alive one attempt
    longer (a failover 1.5 s later than usual under a one-way partition: F7, 7.97 s against 7 s).
    Never later than a whole session timeout after the last answer.
    """
    attempt_s = session_timeout_s / max(1, servers)
    return min(session_timeout_s / 3, attempt_s) / 2


class BrokerChannel(RequestTransport, Protocol):
    """The controller-to-broker channel (``channel_manager.ControllerChannelManager``)."""

    def add_broker(self, broker: BrokerRegistration) -> None: ...

    def remove_broker(self, broker_id: int) -> None: ...

    def shutdown(self) -> None: ...


class _ChannelTransport:
    """The transport the request batches hold: forwards to the channel of the current term.

    The channel is created at failover and torn down at resignation; the batches are created once.

    While the event thread handles an event, requests are held and handed to the channel's sender
    threads when the event ends (``release``), or earlier where availability waits on them
    (``send_held``: the new leaders' LeaderAndIsr after the elections of a broker failure or
    controlled shutdown, before their ISR shrinks), in the order they were sent, each to the channel
    of the term that sent it. Kafka's controller queues them for its send threads as it goes; here the
    senders share the interpreter with the event thread, and a sender encoding a 30,000-partition
    LeaderAndIsr holds the interpreter lock for tens of milliseconds at a time. Released as it went,
    a failover at 100,000 partitions spent up to half a second of its replica state machine waiting
    for the senders encoding the requests it had just queued (py-spy, interpreter-lock samples).

    Event thread only, like the request batches that send through it.
    """

    def __init__(self) -> None:
        self.channel: BrokerChannel | None = None
        self._held: list[tuple[BrokerChannel, int, Any, Callable[[Any], None] | None]] | None = None

    def send(self, broker_id: int, request: Any, callback: Callable[[Any], None] | None = None) -> None:
        channel = self.channel
        if channel is None:
            logger.warning("dropping %s for broker %d: not the active controller", type(request).__name__, broker_id)
            return
        if self._held is not None:
            self._held.append((channel, broker_id, request, callback))
        else:
            channel.send(broker_id, request, callback)

    def hold(self) -> None:
        """Keep what is sent from now on until ``release`` (the start of an event)."""
        if self._held is None:
            self._held = []

    def release(self) -> None:
        """Hand every held request over (``send_held``) and stop holding (the end of an event)."""
        self.send_held()
        self._held = None

    def send_held(self, on_answered: Callable[[], None] | None = None) -> None:
        """Hand every held request to its channel, in order, and go on holding if it was. Requests of
        a channel torn down meanwhile (the controller resigned during the event) are dropped.

        ``on_answered``: called once every request handed over here has been answered (after its
        own callback, on the sender thread that got the last answer; at once when none was handed
        over). A request its channel drops (a broker removed meanwhile) is never answered: whoever
        waits on this needs a deadline of its own."""
        held = self._held
        if not held:
            if on_answered is not None:
                on_answered()
            return
        self._held = []
        current = self.channel
        sending = [item for item in held if item[0] is current]
        countdown = None if on_answered is None else _Countdown(len(sending), on_answered)
        for channel, broker_id, request, callback in sending:
            channel.send(broker_id, request, callback if countdown is None else countdown.wrap(callback))
        if len(sending) < len(held):
            logger.info("dropped %d requests of a channel closed while they were held", len(held) - len(sending))
        if countdown is not None and not sending:
            on_answered()  # type: ignore[misc]  # not None with a countdown


class _Countdown:
    """Calls ``done`` once ``count`` wrapped callbacks have run (from any threads)."""

    __slots__ = ("_count", "_done", "_lock")

    def __init__(self, count: int, done: Callable[[], None]) -> None:
        self._count = count
        self._done = done
        self._lock = threading.Lock()

    def wrap(self, callback: Callable[[Any], None] | None) -> Callable[[Any], None]:
        def answered(response: Any) -> None:
            try:
                if callback is not None:
                    callback(response)
            finally:
                with self._lock:
                    self._count -= 1
                    last = self._count == 0
                if last:
                    self._done()

        return answered


class Controller:
    """One controller candidate. ``start()`` competes for ``/controller``; ``shutdown()`` leaves.

    Example::

        controller = Controller(config, client, store, channel_factory=lambda: ControllerChannelManager(...),
                                sink=JsonLinesDailySink(log_dir))
        controller.start()
        ...
        controller.shutdown()
    """

    def __init__(
        self,
        config: ControllerConfig,
        client: Any,
        store: ZkStore,
        channel_factory: Callable[[], BrokerChannel],
        sink: StateChangeSink,
        *,
        endpoint: str | None = None,
        clock: Callable[[], float] = time.time,
        standby: StandbyFollower | None = None,
    ) -> None:
        malloc_policy.give_large_blocks_back()  # a failover's large transients go back to the OS when freed
        self.config = config
        self.standby = standby  # warm standby: the failover reads from its view when it is current
        self.client = client
        self.store = store
        self.endpoint = endpoint
        self.ctx = ControllerContext(config.controller_id)
        # Records are built after each event (``Controller.process`` flushes), not in its way.
        self.scl = StateChangeLogger.for_context(self.ctx, sink, clock, defer=DEFERRED_RECORDS)
        self.events = ControllerEventManager(self.process, name=f"controller-{config.controller_id}-events")
        self.watches = WatchRegistry(client, self._enqueue, reader=store.reader)
        self._channel_factory = channel_factory
        self._transport = _ChannelTransport()
        self.replica_batch = self._new_batch()
        self.partition_batch = self._new_batch()
        self.batch = self._new_batch()
        self.replica_sm = ReplicaStateMachine(
            self.ctx, store, self.replica_batch, self.scl, decide_from_cache=config.decide_from_cache
        )
        self.partition_sm = PartitionStateMachine(
            self.ctx, store, self.partition_batch, self.scl, decide_from_cache=config.decide_from_cache
        )
        self.partition_sm.unclean_leader_election_enable = config.unclean_leader_election_enable
        self.deletion = TopicDeletionManager(
            self.ctx,
            self.replica_sm,
            self.partition_sm,
            self.scl,
            ControllerDeletionClient(self.ctx, store, self.watches.unregister, self.batch),
            delete_topic_enable=config.delete_topic_enable,
        )
        self.reassignment = ReassignmentManager(
            self.ctx, store, self.replica_sm, self.partition_sm, self.scl, self.deletion, self
        )
        self.active_controller_id = -1
        self.failover_count = 0
        self.last_failover_ms: float | None = None
        self.last_failover_path = ""
        self._clock = clock
        self._connected = threading.Event()
        self._connected.set()
        self._session_lost = False
        self._suspension_lock = threading.Lock()
        self._suspension_timer: threading.Timer | None = None
        self._rebalance_timer: threading.Timer | None = None
        #: Auto rebalance that waits for catch-up (``leader_imbalance_min_isr_seconds``).
        self._isr_tenure = IsrTenure()
        self._started = False
        #: Warm path: the zxid its per-topic watches are armed from, after the failover's requests.
        self._deferred_topic_watches: int | None = None
        self._kept_requests: KeptRequests | None = None  # the warm path's start-up requests, for one failover
        self._cold_start_up: ColdStartUp | None = None  # the cold read's, built as it read (failover_read)
        #: The failover (``failover_count``) whose state-snapshot record is still to be written, and the
        #: timer that asks for it if its requests are not all answered within a request timeout.
        self._snapshot_due: int | None = None
        self._snapshot_timer: threading.Timer | None = None

    # -- wiring ---------------------------------------------------------------------------------

    def _new_batch(self) -> ControllerBrokerRequestBatch:
        return ControllerBrokerRequestBatch(
            self.ctx,
            self._transport,
            self.scl,
            on_leader_and_isr_response=self._enqueue_response,
            on_stop_replica_response=self._on_stop_replica_response,
        )

    def _enqueue(self, event: Any) -> None:
        self.events.put(event)

    def enqueue(self, event: ControllerEvent) -> None:
        """Put ``event`` on the event queue (``ReassignmentClient``)."""
        self.events.put(event)

    def _enqueue_response(self, broker_id: int, response: LeaderAndIsrResponse) -> None:
        # Digested here, on the sender thread, so the answer's ~100 bytes a partition go with it
        # (``controller_core.answer_digest``).
        self.events.put(LeaderAndIsrResponseReceived(broker_id, LeaderAndIsrAnswer.of(response)))

    def _on_stop_replica_response(
        self, broker_id: int, top_level_error: ErrorCode, partition_errors: Mapping[TopicPartition, ErrorCode]
    ) -> None:
        # Runs on a channel sender thread: only enqueue.
        self.events.put(
            TopicDeletionStopReplicaResponseReceived(
                broker_id, int(top_level_error), {tp: int(err) for tp, err in partition_errors.items()}
            )
        )

    @property
    def is_active(self) -> bool:
        return self.active_controller_id == self.config.controller_id

    # -- lifecycle (any thread) -----------------------------------------------------------------

    def start(self) -> None:
        """Start the event thread and compete for leadership (Kafka's ``startup``)."""
        if self._started:
            return
        self._started = True
        self.client.add_listener(self._on_session_state)
        self.events.start()
        self.events.put(Startup())

    def shutdown(self) -> None:
        """Preempt queued events, stop the event thread, then resign (Kafka's §7.8)."""
        if not self._started:
            return
        self._started = False
        self.client.remove_listener(self._on_session_state)
        self.events.close()
        self._resign(delete_controller_znode=True)
        self.scl.flush()  # records made outside any event (a candidate's own) are not left behind

    def _on_session_state(self, state: str) -> None:
        """kazoo's connection listener: must not block, only flips flags and enqueues."""
        if state == "SUSPENDED":
            self._connected.clear()
            self.events.put(Suspend())
            self._watch_suspension()
        elif state == "LOST":
            self._session_lost = True
            self._connected.set()  # let a blocked event run into the Expire handling
            self.events.clear_and_put(Expire())
        elif state == "CONNECTED":
            with self._suspension_lock:
                if self._suspension_timer is not None:
                    self._suspension_timer.cancel()
                    self._suspension_timer = None
            was_lost = self._session_lost
            self._session_lost = False
            self._connected.set()
            self.events.put(RegisterAndReelect() if was_lost else Reconnected())

    def _watch_suspension(self) -> None:
        """Give up the session when the connection stays suspended past :func:`suspension_grace_s`.

        A candidate whose requests still reach ZooKeeper but whose answers are lost (a one-way
        partition) keeps its session alive on the server with every reconnection attempt, so its
        ``/controller`` stays and no other candidate takes over, while it cannot act. Once the grace
        has passed without an answer, it stops its client (no more attempts: the server expires the
        session and deletes the ephemeral) and starts a new session, competing again once connected.
        A blip that ends before then keeps the session.
        """
        with self._suspension_lock:
            if self._suspension_timer is not None:
                return
            servers = len(getattr(self.client, "hosts", None) or ()) or 1
            wait_s = suspension_grace_s(self.config.zookeeper_session_timeout_s, servers)
            timer = threading.Timer(wait_s, self._abandon_session_if_still_suspended)
            timer.daemon = True
            self._suspension_timer = timer
        timer.start()

    def _abandon_session_if_still_suspended(self) -> None:
        with self._suspension_lock:
            self._suspension_timer = None
        if not self._started or self._connected.is_set() or self._session_lost:
            return
        logger.warning(
            "controller %d: no answer from ZooKeeper for most of a session timeout (%.1f s): starting a new session",
            self.config.controller_id,
            self.config.zookeeper_session_timeout_s,
        )
        self.scl.record(RecordKind.SESSION_ABANDONED, suspended_s=self.config.zookeeper_session_timeout_s)
        threading.Thread(target=self._restart_session, name="controller-session-restart", daemon=True).start()

    def _restart_session(self) -> None:
        try:
            self.client.stop()  # LOST to the listener: the event thread resigns
            if self._started:
                self.client.start_async()  # CONNECTED (a new session) re-registers and competes again
        except Exception:
            logger.exception("restarting the ZooKeeper session failed")

    def run_on_event_thread(self, action: Callable[[], Any], timeout: float = 30.0) -> Any:
        """Run ``action`` on the event thread and return its result (status queries, tests)."""
        box: dict[str, Any] = {}
        done = threading.Event()

        def run() -> None:
            try:
                box["value"] = action()
            except Exception as exc:
                box["error"] = exc
            finally:
                self._transport.release()  # what the action sent is on its way when the caller resumes
                done.set()

        self.events.put(Probe(run))
        if not done.wait(timeout):
            raise TimeoutError("the controller's event thread did not answer")
        if "error" in box:
            raise box["error"]
        return box.get("value")

    # -- the event thread ---------------------------------------------------------------------

    _CONNECTION_EVENTS = (Expire, Suspend, Reconnected, RegisterAndReelect, ShutdownEventThread, Probe)

    def process(self, event: ControllerEvent) -> None:
        """Handle one event (event thread only)."""
        if not isinstance(event, self._CONNECTION_EVENTS):
            # While the connection is suspended, leadership may not hold: act on nothing.
            while not self._connected.wait(0.5):
                if not self._started:
                    return
            if self._session_lost:
                return
        handler = EVENT_HANDLERS.get(type(event))
        if handler is None:
            logger.warning("no handler for %s", type(event).__name__)
            return
        try:
            self._transport.hold()
            with self.scl.caused_by(type(event).__name__):
                handler(self, event)
        except ControllerMovedError:
            logger.info("controller %d moved: another controller was elected", self.config.controller_id)
            self._maybe_resign()
        except IllegalStateError:
            logger.exception("illegal state handling %s; moving the controller", type(event).__name__)
            self._handle_illegal_state()
        except Exception:
            logger.exception("error handling %s", type(event).__name__)
        finally:
            if self._deferred_topic_watches is not None and self.is_active:
                try:  # a failover that raised after the swap still watches its topics
                    self._arm_deferred_topic_watches()
                except Exception:
                    logger.exception("arming the topics' watches failed")
            self._transport.release()
            self.scl.flush()

    # -- election and resignation (§1.3, §7.4) ---------------------------------------------------

    def _on_startup(self, event: Startup) -> None:
        self.watches.watch_node(paths.CONTROLLER_PATH, _controller_event)
        self._elect()

    def _on_controller_change(self, event: ControllerChange) -> None:
        self._maybe_resign()

    def _on_reelect(self, event: Reelect) -> None:
        self._maybe_resign()
        self._elect()

    def _on_expire(self, event: Expire) -> None:
        self.active_controller_id = -1
        self._resign(delete_controller_znode=False)

    def _on_suspend(self, event: Suspend) -> None:
        logger.warning("ZooKeeper connection suspended: controller %d stops acting", self.config.controller_id)

    def _on_reconnected(self, event: Reconnected) -> None:
        # Same session: our ephemeral /controller survived if we held it; re-check anyway.
        self._maybe_resign()
        if self.active_controller_id == -1:
            self._elect()

    def _on_register_and_reelect(self, event: RegisterAndReelect) -> None:
        self.watches.watch_node(paths.CONTROLLER_PATH, _controller_event)
        self._maybe_resign()
        self._elect()

    def _on_probe(self, event: Probe) -> None:
        event.action()

    def _on_shutdown_event_thread(self, event: ShutdownEventThread) -> None:
        pass

    def _elect(self) -> None:
        current = self.store.get_controller_id()
        self.active_controller_id = self._effective_controller_id(current)
        if current is not None:
            logger.info("controller %d is active; %d stands by", current, self.config.controller_id)
            return
        extra = {"endpoint": self.endpoint} if self.endpoint else {}
        elected_at = self._clock()
        try:
            epoch, epoch_zk_version = self.store.register_controller_and_increment_epoch(
                self.config.controller_id, extra
            )
        except ControllerMovedError:
            logger.info("controller %d lost the election", self.config.controller_id)
            self._maybe_resign()
            return
        except Exception:
            logger.exception("election failed; moving the controller")
            self._trigger_controller_move()
            return
        self.ctx.epoch = epoch
        self.ctx.epoch_zk_version = epoch_zk_version
        self.active_controller_id = self.config.controller_id
        logger.info("controller %d elected with epoch %d", self.config.controller_id, epoch)
        self._on_controller_failover(elected_at)

    def _maybe_resign(self) -> None:
        was_active = self.is_active
        current = self.store.get_controller_id()
        self.active_controller_id = self._effective_controller_id(current)
        if was_active and not self.is_active:
            self._resign(delete_controller_znode=False)

    def _effective_controller_id(self, current: int | None) -> int:
        """The active controller's id (-1: none) given the id ``/controller`` names.

        A ``/controller`` naming this candidate but owned by an earlier session of it (after a
        client-side expiry the server keeps that session and its ephemeral until it times out) is
        nobody's: taking it for "me, active" would leave a headless controller with no epoch
        (KAFKA-7165, KAFKA-13407). Its deletion fires the watch and this candidate re-elects.
        """
        if current is None:
            return -1
        if current == self.config.controller_id:
            stat = self.client.exists(paths.CONTROLLER_PATH)
            session = (self.client.client_id or (None, None))[0]
            if stat is None or stat.ephemeralOwner != session:
                logger.warning("/controller names %d but an earlier session owns it; waiting for it to go", current)
                return -1
        return current

    def _trigger_controller_move(self) -> None:
        current = self.store.get_controller_id()
        if current != self.config.controller_id:
            logger.warning("controller move requested but %s holds /controller", current)
            return
        self.active_controller_id = -1
        self._resign(delete_controller_znode=True)

    def _handle_illegal_state(self) -> None:
        for batch in (self.batch, self.replica_batch, self.partition_batch):
            batch.clear()
        self._trigger_controller_move()

    def _resign(self, delete_controller_znode: bool) -> None:
        """Kafka's ``onControllerResignation``: drop watches, timers, channel and context."""
        epoch, epoch_zk_version = self.ctx.epoch, self.ctx.epoch_zk_version
        was_leading = epoch_zk_version > 0
        self._cancel_rebalance()
        self._cancel_state_snapshot()
        self.watches.unregister_all(keep=(paths.CONTROLLER_PATH,))
        channel = self._transport.channel
        self._transport.channel = None
        if channel is not None:
            channel.shutdown()
        for batch in (self.batch, self.replica_batch, self.partition_batch):
            batch.clear()
        if was_leading:
            self.scl.record(RecordKind.RESIGNATION, controller_epoch_resigned=epoch)
            self.scl.flush()
        self.ctx.reset()
        self._deferred_topic_watches = None
        self._kept_requests = None
        self._cold_start_up = None
        self.reassignment.reset()
        if self.standby is not None and self._started:
            self.standby.resume()  # follow again (from a full read) while standing by
        if delete_controller_znode and was_leading:
            try:
                self.store.delete_controller(epoch_zk_version)
            except ControllerMovedError:
                logger.warning("not deleting /controller: another controller was elected")
            except Exception as exc:
                logger.warning("could not delete /controller: %s", exc)
        if was_leading:
            logger.info("controller %d resigned (epoch %d)", self.config.controller_id, epoch)

    # -- failover (§7.5) -----------------------------------------------------------------------

    def _on_controller_failover(self, elected_at: float) -> None:
        started = time.perf_counter()
        phases = _PhaseClock(started)
        self.failover_count += 1
        self.store.ensure_persistent_paths()
        w = self.watches
        w.watch_children(paths.BROKER_IDS_PATH, lambda e: BrokerChange())
        w.watch_children(paths.TOPICS_PATH, lambda e: TopicChange())
        w.watch_children(paths.DELETE_TOPICS_PATH, lambda e: TopicDeletion())
        w.watch_children(paths.LOG_DIR_EVENT_NOTIFICATION_PATH, lambda e: LogDirEventNotification())
        w.watch_children(paths.ISR_CHANGE_NOTIFICATION_PATH, lambda e: IsrChangeNotification())
        w.watch_node(paths.PREFERRED_REPLICA_ELECTION_PATH, _on_created(_preferred_election_from_zk))
        w.watch_node(paths.REASSIGN_PARTITIONS_PATH, _on_created(ZkPartitionReassignment))
        zkv = self.ctx.epoch_zk_version
        self.store.delete_log_dir_event_notifications(self.store.get_log_dir_event_notification_names(), zkv)
        self.store.delete_isr_change_notifications(self.store.get_isr_change_notification_names(), zkv)
        phases.mark("watches_and_notifications")
        read_path = self._initialize_controller_context(phases)

        topics_to_delete = set(self.store.get_topic_deletions())
        ineligible = {
            t
            for t in topics_to_delete
            if any(not self.ctx.is_replica_online(r.replica, r.topic_partition) for r in self.ctx.replicas_for_topic(t))
        } | {tp.topic for tp in self.ctx.partitions_being_reassigned}
        self.deletion.init(topics_to_delete, ineligible)

        self._send_update_metadata(self.ctx.live_or_shutting_down_broker_ids, ())
        phases.mark("topic_deletion_and_brokers_update")
        kept, self._kept_requests = self._kept_requests, None
        cold, self._cold_start_up = self._cold_start_up, None
        # The initial states are in the context already: the standby's, or derived as the cold read read.
        derived = read_path["path"] == "warm" or (cold is not None and cold.still_valid(self.ctx))
        if derived and cold is not None:
            kept = cold.kept
        if kept is not None and derived:  # the start-up's requests were built ahead
            start_replica_state_machine(self.replica_sm, self.replica_batch, self.ctx, self.scl, kept)
        else:
            self.replica_sm.startup()
        phases.mark("replica_state_machine")
        if derived:
            start_partition_state_machine(self.partition_sm, self.ctx, self.scl)
        else:
            self.partition_sm.startup()
        phases.mark("partition_state_machine")
        self.reassignment.initialize()
        self.deletion.try_topic_deletion()
        pending = self.store.get_preferred_replica_election()
        if pending:
            self._on_replica_leader_election(ReplicaLeaderElection(frozenset(pending)))
        if self.config.auto_leader_rebalance_enable:
            self._schedule_rebalance(self.config.first_rebalance_delay_seconds)
        phases.mark("reassignments_deletions_elections")
        # "Sent its requests" (Kafka: queued for the send threads): hand them over before the clock stops.
        # The state-snapshot record waits until the senders are done with them (``_on_state_snapshot_due``).
        self._snapshot_due = failover = self.failover_count
        self._transport.send_held(on_answered=lambda: self._enqueue(StateSnapshotDue(failover)))
        self._start_state_snapshot_timer(failover)
        phases.mark("requests_handed_to_senders")
        self.last_failover_ms = (time.perf_counter() - started) * 1000
        self.last_failover_path = read_path["path"]
        self.scl.record(
            RecordKind.FAILOVER,
            elected_at_ms=elected_at * 1000,
            completed_at_ms=self._clock() * 1000,
            duration_ms=self.last_failover_ms,
            phases_ms=phases.ms,
            **read_path,
            live_brokers=sorted(self.ctx.live_broker_ids),
            partitions=self.ctx.partition_count,
            endpoint=self.endpoint,
        )
        if read_path["path"] == "cold" and self.standby is not None:
            # Right after the failover record (docs/contracts.md).
            self.scl.record(RecordKind.STANDBY_FALLBACK, reason=read_path["standby"])
            logger.warning("controller %d read everything: %s", self.config.controller_id, read_path["standby"])
        self._arm_deferred_topic_watches()
        memory_probe.failover_done()
        logger.info(
            "controller %d failover (%s) done in %.0f ms: %d brokers, %d topics, %d partitions (%s)",
            self.config.controller_id,
            read_path["path"],
            self.last_failover_ms,
            len(self.ctx.live_or_shutting_down_broker_ids),
            len(self.ctx.all_topics),
            self.ctx.partition_count,
            ", ".join(f"{name} {ms:.0f} ms" for name, ms in phases.ms.items()),
        )

    def _initialize_controller_context(self, phases: _PhaseClock | None = None) -> dict[str, Any]:
        """Load brokers, topics, assignments and partition states. Warm: the standby's kept context,
        proven current, is swapped in whole (``controller_core.standby``), with the initial states its
        state machines would derive; the per-topic watches are armed after the failover's requests
        (``_arm_deferred_topic_watches``). Cold: read from ZooKeeper. Returns how (``path``: warm or
        cold, and why), for the failover record."""
        phases = phases or _PhaseClock(time.perf_counter())
        source = FailoverSource(self.standby)
        handover = source.take_over()
        if handover is not None and handover.context is not None:
            adopt(self.ctx, handover.context.ctx)
            self._kept_requests = handover.context.kept
            self._deferred_topic_watches = handover.zxid
            brokers = self.ctx.live_or_shutting_down_brokers()
            phases.mark("warm_context")
        else:
            brokers = self._load_controller_context(phases)
        channel = self._channel_factory()
        for broker in brokers:
            channel.add_broker(broker)
        self._transport.channel = channel
        return source.finish()

    def _load_controller_context(self, phases: _PhaseClock) -> list[BrokerRegistration]:
        """Kafka's ``initializeControllerContext`` reads (the cold path); returns the registered brokers."""
        # The per-topic watches are armed after the failover's requests, relative to a zxid seen before
        # the reads (as on the warm path: every change since fires at once), not before the reads:
        # arming them reads every topic znode again (~0.4 s at 20,000 topics).
        self.client.exists("/")
        self._deferred_topic_watches = self.client.last_zxid
        brokers = list(self.store.get_all_broker_registrations().values())
        self.ctx.set_live_brokers(brokers)
        topics = set(self.store.get_all_topics())
        self.ctx.set_all_topics(topics)
        phases.mark("brokers_and_topics")
        for assignments in self.store.iter_replica_assignments(topics):  # each loaded as the next is read
            self._store_assignments(assignments)
        phases.mark("assignments")
        self.ctx.clear_partition_leadership_info()
        self.ctx.remove_shutting_down_brokers(list(self.ctx.shutting_down_broker_ids))
        for broker in brokers:
            self._watch_broker(broker.id)
        # Each batch's initial states and start-up requests are built as it lands (failover_read).
        self._cold_start_up = failover_read.read_partition_states(self.ctx, self.store)
        phases.mark("partition_states_and_start_up_states")
        return brokers

    def _arm_deferred_topic_watches(self) -> None:
        """The per-topic and per-broker watches (each topic's assignment and config, each broker's
        registration), armed once the failover's requests went out, relative to the zxid the context
        is current to (warm: the swapped-in context's; cold: one seen before its reads): a change since
        then fires at once, so none is missed (Kafka arms them while it reads)."""
        since, self._deferred_topic_watches = self._deferred_topic_watches, None
        if since is None:
            return
        started = time.perf_counter()
        brokers = sorted(self.ctx.live_or_shutting_down_broker_ids)
        self._watch_topics(self.ctx.all_topics, since=since, brokers=brokers)
        logger.info(
            "controller %d: the watches of %d topics and %d brokers armed after the failover in %.0f ms",
            self.config.controller_id,
            len(self.ctx.all_topics),
            len(brokers),
            (time.perf_counter() - started) * 1000,
        )

    def _store_assignments(self, assignments: Mapping[str, Any]) -> None:
        # ``TopicPartition``s made with ``tuple.__new__``: its Python-level constructor was ~0.3 s of a
        # cold failover's million partitions (the same tuples).
        new = tuple.__new__
        for topic, assignment in assignments.items():
            if assignment.topic_id:
                self.ctx.add_topic_id(topic, assignment.topic_id)
            by_partition = {new(TopicPartition, (topic, p)): replicas for p, replicas in assignment.partitions.items()}
            self.ctx.load_topic_assignment(topic, by_partition)
            if any(a.adding_replicas or a.removing_replicas for a in assignment.partitions.values()):
                for tp, replicas in by_partition.items():
                    if replicas.is_being_reassigned:
                        self.ctx.partitions_being_reassigned.add(tp)

    def _refresh_leadership(self, partitions: Sequence[TopicPartition]) -> None:
        """Read state znodes into the leadership cache (bulk)."""
        self.ctx.load_partition_leadership_info(self.store.get_partition_leadership(partitions))

    def _record_state_snapshot(self) -> None:
        """Full partition and replica states, so readers that start late can rebuild everything; built
        from the table's columns straight into JSON (``controller_core.state_snapshot``)."""
        self.scl.record_json(RecordKind.STATE_SNAPSHOT, snapshot_json_fields(self.ctx.table))

    def _start_state_snapshot_timer(self, failover: int) -> None:
        timer = threading.Timer(self.config.request_timeout_s, self._enqueue, (StateSnapshotDue(failover),))
        timer.daemon = True
        timer.name = f"controller-{self.config.controller_id}-snapshot-deadline"
        self._snapshot_timer = timer
        timer.start()

    def _cancel_state_snapshot(self) -> None:
        self._snapshot_due = None
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
            self._snapshot_timer = None

    def _on_state_snapshot_due(self, event: StateSnapshotDue) -> None:
        """The failover's state-snapshot record, once the senders are done with its requests (every one
        answered) or a request timeout after it, whichever comes first: at a million partitions the
        record (~50 MB of JSON, and each sink's copy) built while the senders still hold the requests'
        encodings and answers added its peak to theirs (docs/performance.md). The record holds the
        states as they are when it is written, which is its place in the stream (docs/contracts.md)."""
        if not self.is_active or self._snapshot_due != event.failover:
            return  # written already (both the answers and the deadline ask), or another term's
        self._cancel_state_snapshot()
        self._record_state_snapshot()
        memory_probe.phase_done("state_snapshot_record")

    # -- brokers (§8.1 to §8.3) ----------------------------------------------------------------

    def _on_broker_change(self, event: BrokerChange) -> None:
        if not self.is_active:
            return
        registered = self.store.get_all_broker_registrations()
        known = self.ctx.live_or_shutting_down_broker_ids
        new_ids = sorted(set(registered) - known)
        dead_ids = sorted(known - set(registered))
        bounced_ids = sorted(
            b for b in set(registered) & known if registered[b].epoch > (self.ctx.broker_epoch(b) or -1)
        )
        channel = self._transport.channel
        if channel is not None:
            for b in new_ids:
                channel.add_broker(registered[b])
            for b in bounced_ids:
                channel.remove_broker(b)
                channel.add_broker(registered[b])
            for b in dead_ids:
                channel.remove_broker(b)
        # A dead broker (not one in controlled shutdown) lost its ZooKeeper session about a session
        # timeout before its registration vanished: that, marked estimated, is when its partitions
        # really lost their leader; the record's ts is only when this controller noticed.
        expired = [b for b in dead_ids if b not in self.ctx.shutting_down_broker_ids]
        lost = (
            {
                "session_lost_brokers": expired,
                "session_lost_ms": self._clock() * 1000.0 - self.config.broker_session_timeout_s * 1000.0,
                "session_lost_estimated": True,
            }
            if expired
            else {}
        )
        self.scl.record(
            RecordKind.BROKER_CHANGE, new_brokers=new_ids, dead_brokers=dead_ids, bounced_brokers=bounced_ids, **lost
        )
        if new_ids:
            self.ctx.add_live_brokers(registered[b] for b in new_ids)
            self._on_broker_startup(new_ids)
        if bounced_ids:
            self.ctx.remove_live_brokers(bounced_ids)
            self._on_broker_failure(bounced_ids)
            self.ctx.add_live_brokers(registered[b] for b in bounced_ids)
            self._on_broker_startup(bounced_ids)
        if dead_ids:
            self.ctx.remove_live_brokers(dead_ids)
            self._on_broker_failure(dead_ids)

    def _on_broker_modifications(self, event: BrokerModifications) -> None:
        if not self.is_active:
            return
        current = self.store.get_broker_registration(event.broker_id)
        cached = self.ctx.live_or_shutting_down_broker(event.broker_id)
        if current is None or cached is None:
            return
        if current.endpoints != cached.endpoints or current.features != cached.features:
            self.ctx.update_broker_metadata(current)
            channel = self._transport.channel
            if channel is not None:
                channel.remove_broker(current.id)
                channel.add_broker(current)
            self._send_update_metadata(self.ctx.live_or_shutting_down_broker_ids, ())

    def _on_broker_startup(self, new_brokers: Sequence[int]) -> None:
        new_set = set(new_brokers)
        self.ctx.clear_replicas_on_offline_dirs(new_brokers)
        existing = self.ctx.live_or_shutting_down_broker_ids - new_set
        self._send_update_metadata(existing, ())
        self._send_update_metadata(new_set, self.ctx.partitions_with_leaders())
        replicas = self.ctx.replicas_on_brokers(new_brokers)
        self.replica_sm.handle_state_changes(replicas, _R.ONLINE)
        self.partition_sm.trigger_online_partition_state_change()
        for tp in list(self.ctx.partitions_being_reassigned):
            if new_set & set(self.ctx.partition_full_replica_assignment(tp).target_replicas):
                self.reassignment.on_partition_reassignment(tp, self.ctx.partition_full_replica_assignment(tp))
        deleting = {r.topic_partition.topic for r in replicas} & set(self.ctx.topics_to_be_deleted)
        if deleting:
            self.deletion.resume_deletion_for_topics(deleting)
        for b in new_brokers:
            self._watch_broker(b)

    def _on_broker_failure(self, dead_brokers: Sequence[int]) -> None:
        self.ctx.clear_replicas_on_offline_dirs(dead_brokers)
        self.ctx.remove_shutting_down_brokers(dead_brokers)
        # The dead brokers' replicas (30,000 for a broker of a 100,000-partition cluster at RF 3)
        # are listed after their leaderless partitions are elected and sent: the elections need
        # only the leader index, and listing them cost the broker failure ~10 % of its figure.
        elected = self._elect_offline_leaders()
        self._take_replicas_offline(self.ctx.replicas_on_brokers(dead_brokers), elected)
        for b in dead_brokers:
            self.watches.unregister(paths.broker_id_path(b))

    def on_replicas_become_offline(self, replicas: Iterable[PartitionAndReplica]) -> None:
        """Kafka's ``onReplicasBecomeOffline`` (§8.3): elect for leaderless partitions, shrink ISRs."""
        self._take_replicas_offline(replicas, self._elect_offline_leaders())

    def _elect_offline_leaders(self) -> bool:
        """Move every partition whose leader is offline to Offline and elect; False if there was none."""
        offline_leaders = self.ctx.partition_ids_with_offline_leader()
        self.partition_sm.handle_partition_ids(offline_leaders, _P.OFFLINE)
        self.partition_sm.trigger_online_partition_state_change()
        # The new leaders hear of it now, not after the ISR shrinks below: until their LeaderAndIsr
        # arrives those partitions have no leader serving, and the shrinks (twice as many writes
        # when a broker fails) change nothing for availability. Kafka sends here too.
        self._transport.send_held()
        return bool(offline_leaders)

    def _take_replicas_offline(self, replicas: Iterable[PartitionAndReplica], elected: bool) -> None:
        """The rest of ``onReplicasBecomeOffline``: replicas to Offline (ISR shrinks), failed deletions."""
        deleting = self.ctx.topics_to_be_deleted
        if deleting:
            for_deletion = {r for r in replicas if r.topic_partition.topic in deleting}
            others: Iterable[PartitionAndReplica] = [r for r in replicas if r.topic_partition.topic not in deleting]
        else:  # the usual case: no topic being deleted, nothing to split
            for_deletion, others = set(), replicas
        self.replica_sm.handle_state_changes(others, _R.OFFLINE)
        if for_deletion:
            self.deletion.fail_replica_deletion(for_deletion)
        if not elected:
            self._send_update_metadata(self.ctx.live_or_shutting_down_broker_ids, ())

    # -- topics (§8.7) --------------------------------------------------------------------------

    def _on_topic_change(self, event: TopicChange) -> None:
        if not self.is_active:
            return
        topics = self.store.get_all_topics()
        known = set(self.ctx.all_topics)
        new_topics = topics - known
        deleted = known - topics
        self.ctx.set_all_topics(topics)
        self._watch_topics(new_topics)
        for topic in deleted:
            self.ctx.remove_topic(topic)
        if not new_topics:
            return
        assignments = self.store.get_replica_assignments(new_topics)
        self._store_assignments(assignments)
        new_partitions = [tp for topic in sorted(new_topics) for tp in self.ctx.partitions_for_topic(topic)]
        self.on_new_partition_creation(new_partitions)

    def _on_partition_modifications(self, event: PartitionModifications) -> None:
        if not self.is_active:
            return
        topic = event.topic
        assignment = self.store.get_replica_assignments({topic}).get(topic)
        if assignment is None:
            return
        known = self.ctx.partition_full_replica_assignment_for_topic(topic)
        to_add = {
            TopicPartition(topic, p): a
            for p, a in assignment.partitions.items()
            if TopicPartition(topic, p) not in known
        }
        if not to_add:
            return
        if self.ctx.is_topic_queued_up_for_deletion(topic):
            # Kafka restores the topic znode: partitions can't be added to a topic being deleted.
            existing = {tp.partition: a for tp, a in known.items()}
            self.store.set_topic_assignment(topic, self.ctx.topic_id(topic), existing, self.ctx.epoch_zk_version)
            logger.info("reverted partition addition to %s: topic is being deleted", topic)
            return
        for tp, replicas in to_add.items():
            self.ctx.update_partition_full_replica_assignment(tp, replicas)
        self.on_new_partition_creation(sorted(to_add))

    def on_new_partition_creation(self, partitions: Sequence[TopicPartition]) -> None:
        replicas = self.ctx.replicas_for_partition(partitions)
        self.partition_sm.handle_state_changes(partitions, _P.NEW)
        self.replica_sm.handle_state_changes(replicas, _R.NEW)
        self.partition_sm.handle_state_changes(partitions, _P.ONLINE, OfflineStrategy(allow_unclean=False))
        self.replica_sm.handle_state_changes(replicas, _R.ONLINE)

    def _on_topic_config_change(self, event: TopicConfigChange) -> None:
        if not self.is_active or event.topic not in self.ctx.all_topics:
            return
        topic = event.topic
        config = self.store.get_topic_configs([topic]).get(topic, {})
        raw = config.get("unclean.leader.election.enable")
        try:
            enabled = raw is not None and parse_config_bool(raw)
        except ValueError:
            logger.warning("topic %s has an invalid unclean.leader.election.enable=%r", topic, raw)
            return
        if enabled:
            self.partition_sm.trigger_online_partition_state_change(topic)

    def _on_topic_deletion(self, event: TopicDeletion) -> None:
        if not self.is_active:
            return
        requested = set(self.store.get_topic_deletions())
        self.deletion.on_deletion_requested(requested)

    def _on_topic_deletion_stop_replica_response_received(
        self, event: TopicDeletionStopReplicaResponseReceived
    ) -> None:
        if not self.is_active:
            return
        self.deletion.on_stop_replica_response(event.broker_id, event.request_error, event.partition_errors)

    # -- reassignment (§9) -----------------------------------------------------------------------

    def _on_zk_partition_reassignment(self, event: ZkPartitionReassignment) -> None:
        if not self.is_active:
            return
        self.reassignment.on_zk_reassignment()

    def _on_api_partition_reassignment(self, event: ApiPartitionReassignment) -> None:
        self.reassignment.on_api_event(event)

    def _on_partition_reassignment_isr_change(self, event: PartitionReassignmentIsrChange) -> None:
        if not self.is_active:
            return
        if event.topic_partition in self.ctx.partitions_being_reassigned:
            self.reassignment.maybe_complete(event.topic_partition)

    # -- leader elections (§8.5, §8.6) -----------------------------------------------------------

    def _on_replica_leader_election(self, event: ReplicaLeaderElection) -> None:
        results: dict[TopicPartition, Any] = {}
        try:
            if not self.is_active:
                results = dict.fromkeys(event.partitions or (), "NOT_CONTROLLER")
                return
            results = self._replica_leader_election(event)
        finally:
            if event.callback is not None:
                event.callback(results)

    def _replica_leader_election(self, event: ReplicaLeaderElection) -> dict[TopicPartition, Any]:
        if event.trigger is not ElectionTrigger.ADMIN:
            self.watches.watch_node(paths.PREFERRED_REPLICA_ELECTION_PATH, _on_created(_preferred_election_from_zk))
        partitions: Iterable[TopicPartition] | None = event.partitions
        if partitions is None:
            if event.trigger is not ElectionTrigger.ZK:
                return {}
            partitions = self.store.get_preferred_replica_election_entries()  # in the request's order
            if partitions is None:
                return {}
        ordered = sorted_partitions(partitions)
        results: dict[TopicPartition, Any] = {}
        electable: list[int] = []  # partition numbers of the context's table, in the partitions' order
        # Every partition of a cluster may be named (100,000 in scripts/bench): one pass over the
        # table's columns, in sorted order as Kafka's controller goes.
        table = self.ctx.table
        ids, assignments, leadership = table.ids, table.assignment, table.leadership
        deleting = self.ctx.topics_to_be_deleted
        live = self.ctx.live_broker_ids
        preferred = event.election_type is ElectionType.PREFERRED
        for tp in ordered:
            pid = ids.get(tp)
            assignment = None if pid is None else assignments[pid]
            info = None if pid is None else leadership[pid]
            if pid is None or assignment is None or not assignment.replicas or info is None:
                results[tp] = "UNKNOWN_TOPIC_OR_PARTITION"
            elif deleting and tp.topic in deleting:
                results[tp] = "INVALID_TOPIC_EXCEPTION"
            elif preferred:
                if info.leader_and_isr.leader == assignment.replicas[0]:
                    results[tp] = "ELECTION_NOT_NEEDED"
                else:
                    electable.append(pid)
            else:
                leader = info.leader_and_isr.leader
                if leader == -1 or leader not in live:
                    electable.append(pid)
                else:
                    results[tp] = "ELECTION_NOT_NEEDED"
        strategy = (
            PreferredStrategy()
            if event.election_type is ElectionType.PREFERRED
            else OfflineStrategy(allow_unclean=event.trigger is ElectionTrigger.ADMIN)
        )
        try:
            if electable:
                for tp, outcome in self.partition_sm.handle_partition_ids(electable, _P.ONLINE, strategy).items():
                    if isinstance(outcome, LeaderAndIsr):
                        results[tp] = outcome.leader
                    elif isinstance(outcome, StateChangeFailedError):
                        results[tp] = (
                            "PREFERRED_LEADER_NOT_AVAILABLE"
                            if event.election_type is ElectionType.PREFERRED
                            else "ELIGIBLE_LEADERS_NOT_AVAILABLE"
                        )
                    else:
                        results[tp] = f"{type(outcome).__name__}: {outcome}"
        finally:
            if event.trigger is ElectionTrigger.ZK:
                try:
                    # The request is done once its znode is gone (what its writer waits for); the record
                    # of its results (a key per partition named: 100,000 and more) follows.
                    self.store.delete_preferred_replica_election(self.ctx.epoch_zk_version)
                finally:
                    self.scl.record(
                        RecordKind.PREFERRED_ELECTION_REQUEST,
                        requested=len(ordered),
                        results={str(tp): r for tp, r in results.items()},
                    )
                self.events.put(ReplicaLeaderElection(None, ElectionType.PREFERRED, ElectionTrigger.ZK))
        return results

    def _on_auto_preferred_replica_leader_election(self, event: AutoPreferredReplicaLeaderElection) -> None:
        if not self.is_active:
            return
        self._schedule_rebalance(self.config.leader_imbalance_check_interval_seconds)
        self._check_and_trigger_auto_leader_rebalance()  # may schedule the next check sooner

    def _check_and_trigger_auto_leader_rebalance(self) -> None:
        ctx = self.ctx
        deleting = ctx.topics_to_be_deleted
        by_preferred: dict[int, list[TopicPartition]] = {}
        for tp, assignment in ctx.iter_assignments():
            if tp.topic in deleting or not assignment.replicas:
                continue
            by_preferred.setdefault(assignment.replicas[0], []).append(tp)
        threshold = self.config.leader_imbalance_per_broker_percentage / 100
        online = ctx.live_broker_ids
        min_isr_s = self.config.leader_imbalance_min_isr_seconds
        held_back = False
        candidates: list[TopicPartition] = []
        for broker, partitions in by_preferred.items():
            not_preferred = [
                tp
                for tp in partitions
                if (info := ctx.partition_leadership_info(tp)) is not None and info.leader_and_isr.leader != broker
            ]
            if len(not_preferred) / len(partitions) <= threshold:
                continue
            for tp in not_preferred:
                info = ctx.partition_leadership_info(tp)
                if (
                    tp not in ctx.partitions_being_reassigned
                    and info is not None
                    and broker in online
                    and broker in info.leader_and_isr.isr
                ):
                    if min_isr_s > 0 and not self._isr_tenure.ready(
                        tp, info.leader_and_isr, broker, min_isr_s, self._clock()
                    ):
                        held_back = True  # not warm yet: the next check comes sooner
                        continue
                    candidates.append(tp)
        if held_back:
            self._schedule_rebalance(min(min_isr_s, self.config.leader_imbalance_check_interval_seconds))
        if candidates:
            self.partition_sm.handle_state_changes(candidates, _P.ONLINE, PreferredStrategy())

    def _schedule_rebalance(self, delay: float) -> None:
        self._cancel_rebalance()
        if not self.config.auto_leader_rebalance_enable or not self.is_active:
            return
        timer = threading.Timer(delay, lambda: self.events.put(AutoPreferredReplicaLeaderElection()))
        timer.daemon = True
        timer.name = f"controller-{self.config.controller_id}-rebalance"
        timer.start()
        self._rebalance_timer = timer

    def _cancel_rebalance(self) -> None:
        if self._rebalance_timer is not None:
            self._rebalance_timer.cancel()
            self._rebalance_timer = None

    # -- controlled shutdown (§8.4) --------------------------------------------------------------

    def _on_controlled_shutdown(self, event: ControlledShutdown) -> None:
        try:
            remaining = self._do_controlled_shutdown(event.broker_id, event.broker_epoch)
        except ControllerMovedError:
            event.callback(int(ErrorCode.NOT_CONTROLLER), ())
            raise
        except StaleBrokerEpochError as exc:
            self._record_shutdown_rejection(event, ErrorCode.STALE_BROKER_EPOCH, exc)
            event.callback(int(ErrorCode.STALE_BROKER_EPOCH), ())
            return
        except BrokerNotAvailableError as exc:
            self._record_shutdown_rejection(event, ErrorCode.BROKER_NOT_AVAILABLE, exc)
            event.callback(int(ErrorCode.BROKER_NOT_AVAILABLE), ())
            return
        except Exception:
            event.callback(int(ErrorCode.UNKNOWN_SERVER_ERROR), ())
            raise
        event.callback(int(ErrorCode.NONE), sorted(remaining))

    def _record_shutdown_rejection(self, event: ControlledShutdown, code: ErrorCode, error: Exception) -> None:
        """Kafka answers a refused ControlledShutdown with an error code only; the history keeps why."""
        self.scl.record(
            RecordKind.CONTROLLED_SHUTDOWN_REJECTED,
            broker_id=event.broker_id,
            broker_epoch=event.broker_epoch,
            error_code=int(code),
            error=f"{code.name}: {error}",
        )

    def _do_controlled_shutdown(self, broker_id: int, broker_epoch: int) -> set[TopicPartition]:
        if not self.is_active:
            raise ControllerMovedError("not the active controller")
        ctx = self.ctx
        if broker_epoch != -1:
            cached = ctx.broker_epoch(broker_id)
            if cached is None:
                raise BrokerNotAvailableError(f"broker {broker_id} is not registered")
            if broker_epoch < cached:
                raise StaleBrokerEpochError(f"broker {broker_id} epoch {broker_epoch} < {cached}")
        if broker_id not in ctx.live_or_shutting_down_broker_ids:
            raise BrokerNotAvailableError(f"broker {broker_id} is not registered")
        ctx.add_shutting_down_broker(broker_id)
        self.scl.record(RecordKind.CONTROLLED_SHUTDOWN, broker_id=broker_id)
        move_off_broker(ctx, self.partition_sm, self.replica_sm, self.batch, self._transport.send_held, broker_id)
        return ctx.partition_leaders_on_broker(broker_id)

    # -- ISR changes (§8.8, §8.9) -----------------------------------------------------------------

    def _on_alter_isr_received(self, event: AlterIsrReceived) -> None:
        ctx = self.ctx
        if not self.is_active:
            event.callback(int(ErrorCode.NOT_CONTROLLER), {})
            return
        cached_epoch = ctx.broker_epoch(event.broker_id)
        if event.broker_id not in ctx.live_or_shutting_down_broker_ids or cached_epoch != event.broker_epoch:
            event.callback(int(ErrorCode.STALE_BROKER_EPOCH), {})
            return
        responses: dict[TopicPartition, Any] = {}
        to_write: dict[TopicPartition, LeaderAndIsr] = {}
        live = ctx.live_broker_ids
        for tp, (leader_epoch, new_isr, zk_version) in event.partitions.items():
            info = ctx.partition_leadership_info(tp)
            if info is None:
                responses[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            current = info.leader_and_isr
            if leader_epoch < current.leader_epoch:
                responses[tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            proposed = LeaderAndIsr(event.broker_id, leader_epoch, tuple(new_isr), zk_version)
            if proposed.equals_ignore_zk(current):
                responses[tp] = current
                continue
            if not live.issuperset(new_isr):
                # KIP-841 (Kafka 3.3, KAFKA-14140; after the idempotent answer, as there): never let a
                # dead or shutting-down broker into an ISR. A leader may still see such a follower
                # fetch (a broker in controlled shutdown follows the partitions it led), and once it is
                # dead nothing takes it out again: the leader only drops followers that fall behind,
                # and a quiet partition has none.
                responses[tp] = ErrorCode.INELIGIBLE_REPLICA
                continue
            to_write[tp] = proposed
        if to_write:
            result = self.store.update_leader_and_isr(to_write, ctx.epoch, ctx.epoch_zk_version)
            for tp, outcome in result.finished.items():
                if isinstance(outcome, LeaderAndIsr):
                    before = ctx.partition_leadership_info(tp)
                    ctx.put_partition_leadership_info(tp, LeaderIsrAndControllerEpoch(outcome, ctx.epoch))
                    self.scl.isr_change(tp, None if before is None else before.leader_and_isr, outcome)
                    responses[tp] = outcome
                else:
                    responses[tp] = ErrorCode.UNKNOWN_SERVER_ERROR
            for tp in result.needs_retry:
                responses[tp] = ErrorCode.INVALID_UPDATE_VERSION
        self._send_update_metadata(ctx.live_or_shutting_down_broker_ids, list(event.partitions))
        event.callback(int(ErrorCode.NONE), responses)
        for tp, outcome in responses.items():
            if isinstance(outcome, LeaderAndIsr) and tp in ctx.partitions_being_reassigned:
                self.reassignment.maybe_complete(tp)

    def _on_isr_change_notification(self, event: IsrChangeNotification) -> None:
        if not self.is_active:
            return
        names = self.store.get_isr_change_notification_names()
        partitions = set().union(*self.store.get_isr_change_notifications(names).values()) if names else set()
        try:
            known = sorted(tp for tp in partitions if self.ctx.partition_replica_assignment(tp))
            before = {tp: self.ctx.partition_leadership_info(tp) for tp in known}
            self._refresh_leadership(known)
            # The leaders wrote these ISRs themselves (pre-AlterIsr protocol): record what changed,
            # so the history has every ISR change whichever way it was made.
            for tp in known:
                old, new = before[tp], self.ctx.partition_leadership_info(tp)
                if new is not None and (old is None or old.leader_and_isr != new.leader_and_isr):
                    self.scl.isr_change(tp, None if old is None else old.leader_and_isr, new.leader_and_isr)
            self._send_update_metadata(self.ctx.live_or_shutting_down_broker_ids, known)
            for tp in known:
                if tp in self.ctx.partitions_being_reassigned:
                    self.reassignment.maybe_complete(tp)
        finally:
            self.store.delete_isr_change_notifications(names, self.ctx.epoch_zk_version)

    # -- broker responses and log dirs (§6.5, §8.10) ---------------------------------------------

    def _on_leader_and_isr_response_received(self, event: LeaderAndIsrResponseReceived) -> None:
        if not self.is_active:
            return
        answer = event.response
        if isinstance(answer, LeaderAndIsrResponse):
            answer = LeaderAndIsrAnswer.of(answer)
        if answer.error_code != ErrorCode.NONE:
            logger.warning("broker %d answered LeaderAndIsr with %s", event.broker_id, answer.error_code)
            return
        # A response lists every partition of the request (100,000 after a failover) and almost
        # always says NONE for all: only storage errors, and partitions that were offline before,
        # need objects. (TopicPartition is a tuple, so a (topic, partition) pair finds it in a set.)
        previous = self.ctx.replicas_on_offline_dirs(event.broker_id)
        storage_error = ErrorCode.KAFKA_STORAGE_ERROR
        offline = {TopicPartition(e.topic, e.partition) for e in answer.failed if e.error_code == storage_error}
        online: set[TopicPartition] = set()
        if previous:
            for topic, numbers in answer.ok.items():
                online.update(tp for p in numbers if (tp := TopicPartition(topic, p)) in previous)
        if not previous and not offline:
            return
        current = (previous - online) | offline
        self.ctx.set_replicas_on_offline_dirs(event.broker_id, current)
        newly_offline = current - previous
        if newly_offline:
            self.on_replicas_become_offline({PartitionAndReplica(tp, event.broker_id) for tp in newly_offline})

    def _on_log_dir_event_notification(self, event: LogDirEventNotification) -> None:
        if not self.is_active:
            return
        names = self.store.get_log_dir_event_notification_names()
        brokers = set(self.store.get_log_dir_event_broker_ids(names).values())
        try:
            self.replica_sm.handle_state_changes(self.ctx.replicas_on_brokers(brokers), _R.ONLINE)
        finally:
            self.store.delete_log_dir_event_notifications(names, self.ctx.epoch_zk_version)

    # -- helpers --------------------------------------------------------------------------------

    def _watch_topics(self, topics: Iterable[str], *, since: int | None = None, brokers: Iterable[int] = ()) -> None:
        """Arm each topic's assignment and config watches in a few round trips (8,000 at a 4,000-topic
        failover), and ``brokers``' registration watches with them (``_watch_broker``); ``since``: fire
        for every change after that zxid (``WatchRegistry.watch_nodes``)."""
        handlers: dict[str, Callable[[WatchEvent], ControllerEvent | None]] = {}
        for topic in topics:
            handlers[paths.topic_path(topic)] = _partition_modifications_for(topic)
            handlers[paths.topic_config_path(topic)] = _topic_config_change_for(topic)
        for broker_id in brokers:
            handlers[paths.broker_id_path(broker_id)] = _broker_modifications_for(broker_id)
        if handlers:
            self.watches.watch_nodes(handlers, since=since)

    def _watch_broker(self, broker_id: int) -> None:
        self.watches.watch_node(paths.broker_id_path(broker_id), _broker_modifications_for(broker_id))

    def send_update_metadata(self, partitions: Sequence[TopicPartition]) -> None:
        """UpdateMetadata for ``partitions`` to every live or shutting-down broker (``ReassignmentClient``)."""
        self._send_update_metadata(self.ctx.live_or_shutting_down_broker_ids, partitions)

    def _send_update_metadata(self, brokers: Iterable[int], partitions: Iterable[TopicPartition]) -> None:
        self.batch.new_batch()
        self.batch.add_update_metadata_request_for_brokers(list(brokers), list(partitions))
        self.batch.send_requests_to_brokers(self.ctx.epoch)

    def update_leader_epoch_and_send_request(
        self, tp: TopicPartition, assignment: ReplicaAssignment, recipients_isnew: Mapping[int, bool]
    ) -> LeaderIsrAndControllerEpoch | None:
        """Bump the leader epoch (same leader and ISR) and send LeaderAndIsr (reassignment A1/B3)."""
        ctx = self.ctx
        while True:
            read = self.store.get_partition_states([tp])[tp]
            if read.code is not ZkCode.OK or read.state is None:
                raise IllegalStateError(f"no leader and ISR in ZooKeeper for {tp}")
            if read.state.controller_epoch > ctx.epoch:
                logger.warning("not bumping the leader epoch of %s: written by a newer controller", tp)
                return None
            bumped = read.state.leader_and_isr.new_epoch()
            result = self.store.update_leader_and_isr({tp: bumped}, ctx.epoch, ctx.epoch_zk_version)
            outcome = result.finished.get(tp)
            if isinstance(outcome, LeaderAndIsr):
                info = LeaderIsrAndControllerEpoch(outcome, ctx.epoch)
                ctx.put_partition_leadership_info(tp, info)
                self.batch.new_batch()
                for is_new in (False, True):
                    brokers = [b for b, n in recipients_isnew.items() if n is is_new]
                    if brokers:
                        self.batch.add_leader_and_isr_request_for_brokers(brokers, tp, info, assignment, is_new=is_new)
                self.batch.send_requests_to_brokers(ctx.epoch)
                return info
            if isinstance(outcome, Exception):
                raise outcome
            # BADVERSION: someone (a leader's AlterIsr) wrote in between; read again.

    # -- status ---------------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """A snapshot of the controller's gauges (read from any thread; values may be a moment old)."""
        m = self.events.metrics
        active = self.is_active
        return {
            "controller_id": self.config.controller_id,
            "active": "1" if active else "0",
            "active_controller_id": self.active_controller_id,
            "epoch": self.ctx.epoch if active else 0,
            "state": ControllerState(self.events.state).name,
            "event_queue_size": self.events.queue_size,
            "event_queue_time_ms_avg": round(m.queue_time_total_ms / m.queue_time_count, 3)
            if m.queue_time_count
            else 0,
            "event_queue_time_ms_max": round(m.queue_time_max_ms, 3),
            **self.events.recent_queue_time_figures(),
            "events_processed": m.events_processed,
            "offline_partitions": self.ctx.offline_partition_count if active else 0,
            "preferred_replica_imbalance": self.ctx.preferred_replica_imbalance_count if active else 0,
            "global_partition_count": self.ctx.partition_with_leaders_count if active else 0,
            "global_topic_count": len(self.ctx.all_topics) if active else 0,
            "unclean_elections_total": self.partition_sm.unclean_leader_elections,
            "topics_to_delete": len(self.ctx.topics_to_be_deleted) if active else 0,
            "failover_count": self.failover_count,
            "last_failover_ms": self.last_failover_ms or 0,
            "last_failover_path": self.last_failover_path,
            **(self.standby.status() if self.standby is not None else {"standby_state": "off", "standby_warm": "0"}),
            "per_state_ms": {
                ControllerState(s).name: {
                    "count": t.count,
                    "total_ms": round(t.total_ms, 1),
                    "max_ms": round(t.max_ms, 1),
                    "cpu_ms": round(t.cpu_ms, 1),
                }
                for s, t in m.per_state.items()
            },
        }


# Which method handles which event, written out so that a renamed event or handler is a NameError at
# import (and a missing one fails tests/unit/test_event_dispatch.py), not a warning at run time.
# Looked up by the event's exact class, as the name-built lookup it replaces did.
EVENT_HANDLERS: Mapping[type[ControllerEvent], Callable[[Controller, Any], None]] = {
    Startup: Controller._on_startup,
    ControllerChange: Controller._on_controller_change,
    Reelect: Controller._on_reelect,
    Expire: Controller._on_expire,
    Suspend: Controller._on_suspend,
    Reconnected: Controller._on_reconnected,
    RegisterAndReelect: Controller._on_register_and_reelect,
    Probe: Controller._on_probe,
    ShutdownEventThread: Controller._on_shutdown_event_thread,
    BrokerChange: Controller._on_broker_change,
    BrokerModifications: Controller._on_broker_modifications,
    TopicChange: Controller._on_topic_change,
    PartitionModifications: Controller._on_partition_modifications,
    TopicConfigChange: Controller._on_topic_config_change,
    TopicDeletion: Controller._on_topic_deletion,
    TopicDeletionStopReplicaResponseReceived: Controller._on_topic_deletion_stop_replica_response_received,
    ZkPartitionReassignment: Controller._on_zk_partition_reassignment,
    ApiPartitionReassignment: Controller._on_api_partition_reassignment,
    PartitionReassignmentIsrChange: Controller._on_partition_reassignment_isr_change,
    ReplicaLeaderElection: Controller._on_replica_leader_election,
    AutoPreferredReplicaLeaderElection: Controller._on_auto_preferred_replica_leader_election,
    ControlledShutdown: Controller._on_controlled_shutdown,
    AlterIsrReceived: Controller._on_alter_isr_received,
    IsrChangeNotification: Controller._on_isr_change_notification,
    LeaderAndIsrResponseReceived: Controller._on_leader_and_isr_response_received,
    LogDirEventNotification: Controller._on_log_dir_event_notification,
    StateSnapshotDue: Controller._on_state_snapshot_due,
}


def _controller_event(event: WatchEvent) -> ControllerEvent:
    return Reelect() if event.type is WatchEventType.DELETED else ControllerChange()


def _on_created(factory: Callable[[], ControllerEvent]) -> Callable[[WatchEvent], ControllerEvent | None]:
    """Kafka's admin-znode handlers act on creation only (the controller deletes them when done)."""
    return lambda event: factory() if event.type is WatchEventType.CREATED else None


def _preferred_election_from_zk() -> ReplicaLeaderElection:
    return ReplicaLeaderElection(None, ElectionType.PREFERRED, ElectionTrigger.ZK)


class _PhaseClock:
    """Milliseconds spent in each named step of a failover (in the "failover" record and the log)."""

    def __init__(self, started: float) -> None:
        self._last = started
        self.ms: dict[str, float] = {}
        memory_probe.phase_done("failover_started")  # off unless CONTROLLER_MEMORY_PROBE is set

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.ms[name] = round((now - self._last) * 1000, 1)
        memory_probe.phase_done(name)
        self._last = time.perf_counter()  # the probe's own time (when on) is no phase's


def _partition_modifications_for(topic: str) -> Callable[[WatchEvent], ControllerEvent | None]:
    return lambda e: PartitionModifications(topic) if e.type is WatchEventType.CHANGED else None


def _broker_modifications_for(broker_id: int) -> Callable[[WatchEvent], ControllerEvent | None]:
    return lambda e: BrokerModifications(broker_id) if e.type is WatchEventType.CHANGED else None


def _topic_config_change_for(topic: str) -> Callable[[WatchEvent], ControllerEvent | None]:
    return lambda e: TopicConfigChange(topic) if e.type is not WatchEventType.DELETED else None


def sorted_partitions(partitions: Iterable[TopicPartition]) -> list[TopicPartition]:
    """``sorted(set(partitions))``: each partition once, by topic, then partition number.

    Partitions already in that order (a request written in order, as the znode's entries come:
    ``ZkStore.get_preferred_replica_election_entries``) are checked in one pass of comparisons in C
    and kept as they are: decoded and put in order in 29 to 34 ms at 100,000 partitions, against 79
    to 92 ms decoded into a set and sorted by topic groups (five rounds each, load ~4). Otherwise
    grouped by topic first: each group is a few dozen partitions sorted by their number, so the
    100,000 partitions of an election request are not compared as tuples ~1.7 million times (three to
    four times the CPU, on the event thread)."""
    listed = list(partitions)
    if all(map(operator.lt, listed, islice(listed, 1, None))):  # strictly ascending: distinct too
        return listed
    distinct = listed if isinstance(partitions, AbstractSet) else dict.fromkeys(listed)
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in distinct:
        group = by_topic.get(tp.topic)
        if group is None:
            by_topic[tp.topic] = [tp]
        else:
            group.append(tp)
    ordered: list[TopicPartition] = []
    for topic in sorted(by_topic):
        ordered.extend(sorted(by_topic[topic], key=_PARTITION_NUMBER))
    return ordered


_PARTITION_NUMBER = itemgetter(1)
