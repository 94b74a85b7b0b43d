"""One queue, one thread: the controller's event loop (Kafka's ControllerEventManager).

Why a single thread: every piece of controller state (the context, the state machines, the request
batches) is touched only here, so none of it needs locks, and events are handled strictly in the
order they were enqueued. ZooKeeper watch callbacks, broker API calls and timers only ``put``.

``clear_and_put`` drains the queue, calling each drained event's ``preempt`` (so an API caller
waiting on it gets NOT_CONTROLLER at once) before enqueueing the new event: used for session
expiry and shutdown.

Metrics kept here (and read by the hosts' Prometheus exporters): queue size, time in queue
(``EventQueueTimeMs``, plus the last 20,000 samples with their times for windowed percentiles),
time and event-thread CPU spent per controller state, events processed, and the state the
controller is in right now.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from controller_core.controller_state import ControllerState
from controller_core.events import ControllerEvent, ShutdownEventThread
from controller_core.gc_policy import EventGcPolicy
from controller_core.pause_points import pause_point

logger = logging.getLogger(__name__)

#: ``EventQueueTimeMs`` is reset when the queue has been empty this long (Kafka's 300 s).
QUEUE_TIME_RESET_MS = 300_000

#: Recent queue-time samples kept for windowed percentiles (about 0.5 MB at the bound).
QUEUE_TIME_SAMPLES = 20_000

#: Windows (seconds, ending now) of the queue-time p99s in the controller's status.
STATUS_P99_WINDOWS_S = (10, 30, 60)


def percentile(values: Iterable[float], q: float) -> float | None:
    """Nearest-rank percentile ``q`` (0-100] of ``values``; None when there are none."""
    ordered = sorted(values)
    if not ordered:
        return None
    rank = max(1, math.ceil(q / 100.0 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


class QueueTimeSamples:
    """The last ``capacity`` queue-time samples as ``(monotonic time taken, ms waited)``.

    Why: count, total and max since the last reset cannot say how the loop did during one
    incident (a Redis pause, a broker bounce): the reliability plan's F20 figure is a p99 over the
    pause. Bounded, so a flood costs a fixed amount of memory; the oldest samples fall off first.
    Appended by the event thread, read by status callers on other threads (hence the lock).
    """

    def __init__(self, capacity: int = QUEUE_TIME_SAMPLES) -> None:
        self._samples: deque[tuple[float, float]] = deque(maxlen=capacity)
        self._lock = threading.Lock()

    def add(self, at: float, ms: float) -> None:
        with self._lock:
            self._samples.append((at, ms))

    def __len__(self) -> int:
        return len(self._samples)

    def between(self, since: float, until: float | None = None) -> list[float]:
        """The milliseconds of samples taken in ``[since, until]`` (monotonic seconds)."""
        out: list[float] = []
        with self._lock:
            for at, ms in reversed(self._samples):  # newest first: stop at the window's start
                if at < since:
                    break
                if until is None or at <= until:
                    out.append(ms)
        return out


class QueuedEvent:
    """An event in the queue: processed or preempted at most once; awaitable until it starts."""

    __slots__ = ("_spent", "_started", "enqueued_at", "event")

    def __init__(self, event: ControllerEvent) -> None:
        self.event = event
        self.enqueued_at = time.monotonic()
        self._started = threading.Event()
        self._spent = False

    def process(self, handler: Callable[[ControllerEvent], None]) -> None:
        if self._spent:
            return
        self._spent = True
        self._started.set()
        handler(self.event)

    def preempt(self) -> None:
        if self._spent:
            return
        self._spent = True
        try:
            self.event.preempt()
        except Exception:
            logger.exception("preempting %s failed", type(self.event).__name__)

    def await_processing(self, timeout: float | None = None) -> bool:
        """Block until processing started (True), or the timeout passed (False)."""
        return self._started.wait(timeout)


@dataclass
class StateTimer:
    """Count, cumulative/max time and cumulative CPU time of the events handled in one state.

    ``cpu_ms`` is the event thread's own CPU (``time.thread_time``): the difference between it and
    ``total_ms`` is time the events waited (ZooKeeper's answers, the interpreter lock held by the
    ZooKeeper client and request senders). An event whose time is nearly all CPU is bound by the
    controller's own work, and no batching of its I/O can make it faster.
    """

    count: int = 0
    total_ms: float = 0.0
    max_ms: float = 0.0
    cpu_ms: float = 0.0

    def observe(self, ms: float, cpu_ms: float = 0.0) -> None:
        self.count += 1
        self.total_ms += ms
        self.max_ms = max(self.max_ms, ms)
        self.cpu_ms += cpu_ms


@dataclass
class EventManagerMetrics:
    queue_time_count: int = 0
    queue_time_total_ms: float = 0.0
    queue_time_max_ms: float = 0.0
    events_processed: int = 0
    per_state: dict[ControllerState, StateTimer] = field(default_factory=dict)
    per_event: dict[str, StateTimer] = field(default_factory=dict)
    recent: QueueTimeSamples = field(default_factory=QueueTimeSamples)

    def observe_queue_time(self, ms: float, at: float | None = None) -> None:
        self.queue_time_count += 1
        self.queue_time_total_ms += ms
        self.queue_time_max_ms = max(self.queue_time_max_ms, ms)
        self.recent.add(time.monotonic() if at is None else at, ms)

    def reset_queue_time(self) -> None:
        self.queue_time_count = 0
        self.queue_time_total_ms = 0.0
        self.queue_time_max_ms = 0.0


class ControllerEventManager:
    """The controller's single event thread.

    Example::

        manager = ControllerEventManager(controller.process, name="controller-1")
        manager.start()
        manager.put(BrokerChange())
        manager.close()
    """

    def __init__(
        self,
        handler: Callable[[ControllerEvent], None],
        name: str = "controller-event-thread",
        on_idle: Callable[[], None] | None = None,
    ) -> None:
        self._handler = handler
        self._on_idle = on_idle
        self._gc = EventGcPolicy()
        self._queue: deque[QueuedEvent] = deque()
        self._cond = threading.Condition()
        self._put_lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._shutting_down = False
        self._last_nonempty = time.monotonic()
        self.state: ControllerState = ControllerState.IDLE
        self.metrics = EventManagerMetrics()
        self._pause_hook: Callable[[ControllerEvent], None] | None = None

    # -- producer side (any thread) ---------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()

    def put(self, event: ControllerEvent) -> QueuedEvent:
        queued = QueuedEvent(event)
        with self._put_lock, self._cond:
            self._queue.append(queued)
            self._cond.notify()
        return queued

    def clear_and_put(self, event: ControllerEvent) -> QueuedEvent:
        """Preempt everything queued (in the caller's thread), then enqueue ``event``."""
        with self._put_lock:
            with self._cond:
                drained = list(self._queue)
                self._queue.clear()
            for queued in drained:
                queued.preempt()
            new = QueuedEvent(event)
            with self._cond:
                self._queue.append(new)
                self._cond.notify()
            return new

    @property
    def queue_size(self) -> int:
        return len(self._queue)

    def waiting_ms(self, now: float | None = None) -> list[float]:
        """How long each event still in the queue has waited so far."""
        at = time.monotonic() if now is None else now
        with self._cond:
            return [(at - queued.enqueued_at) * 1000 for queued in self._queue]

    def queue_time_percentile(
        self, q: float, since: float, until: float | None = None, now: float | None = None
    ) -> float | None:
        """Percentile ``q`` of the queue time of events taken in ``[since, until]`` (monotonic s).

        When the window is open (``until`` None: up to now), events still waiting count with the
        time they have waited so far: a loop blocked on one event would otherwise show nothing at
        all until it resumes, which is exactly when the figure is read.
        """
        samples = self.metrics.recent.between(since, until)
        if until is None:
            samples.extend(self.waiting_ms(now))
        return percentile(samples, q)

    def recent_queue_time_figures(self) -> dict[str, float]:
        """``event_queue_time_ms_p99_<W>s`` for each status window W (0 when nothing was queued), and
        ``event_queue_time_ms_p50`` over the widest window (the overview page shows it)."""
        now = time.monotonic()
        figures = {
            f"event_queue_time_ms_p99_{w}s": round(self.queue_time_percentile(99, now - w, now=now) or 0.0, 3)
            for w in STATUS_P99_WINDOWS_S
        }
        widest = max(STATUS_P99_WINDOWS_S)
        figures["event_queue_time_ms_p50"] = round(self.queue_time_percentile(50, now - widest, now=now) or 0.0, 3)
        return figures

    def is_event_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def set_pause_hook(self, hook: Callable[[ControllerEvent], None] | None) -> None:
        """Test-only seam: called on the event thread before each event is processed."""
        self._pause_hook = hook

    def close(self, timeout: float = 30.0) -> None:
        """Stop the thread after preempting every queued event."""
        self._shutting_down = True
        self.clear_and_put(ShutdownEventThread())
        if self._thread.is_alive() and not self.is_event_thread():
            self._thread.join(timeout)

    # -- the event thread -------------------------------------------------------------------------

    def _take(self) -> QueuedEvent:
        with self._cond:
            if self._gc.collection_pending:
                if not self._queue:
                    # Let the threads the last event woke run before the collection holds the
                    # interpreter lock (controller_core.gc_policy): an answer waits for nothing else.
                    self._cond.wait(timeout=self._gc.defer_s)
                self._cond.release()
                try:
                    self._gc.collect_pending()
                finally:
                    self._cond.acquire()
            while not self._queue:
                if self._on_idle is not None:
                    self._cond.release()
                    try:
                        self._on_idle()
                    finally:
                        self._cond.acquire()
                    if self._queue:
                        break
                self._cond.wait(timeout=1.0)
            return self._queue.popleft()

    def _run(self) -> None:
        while True:
            queued = self._take()
            event = queued.event
            if isinstance(event, ShutdownEventThread):
                if self._shutting_down:
                    return
                continue
            now = time.monotonic()
            if (now - self._last_nonempty) * 1000 > QUEUE_TIME_RESET_MS:
                self.metrics.reset_queue_time()
            self._last_nonempty = now
            self.metrics.observe_queue_time((now - queued.enqueued_at) * 1000, now)
            self.state = event.state
            started = time.perf_counter()
            cpu_started = time.thread_time()
            try:
                if self._pause_hook is not None:
                    self._pause_hook(event)
                pause_point("event", type(event).__name__)  # test-only; a no-op unless CONTROLLER_PAUSE_DIR
                with self._gc.around_event():
                    queued.process(self._handler)
            except Exception:
                logger.exception("uncaught error processing %s", type(event).__name__)
            finally:
                elapsed_ms = (time.perf_counter() - started) * 1000
                cpu_ms = (time.thread_time() - cpu_started) * 1000
                self.metrics.events_processed += 1
                self.metrics.per_state.setdefault(event.state, StateTimer()).observe(elapsed_ms, cpu_ms)
                self.metrics.per_event.setdefault(type(event).__name__, StateTimer()).observe(elapsed_ms, cpu_ms)
                self.state = ControllerState.IDLE
                self._gc.after_event(queue_empty=not self._queue)
