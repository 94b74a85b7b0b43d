"""Observed mode: a partition without a live leader is watched, so its next leader shows at once.

Without the watch, a leader written after the broker change's follow-up reads (0.3 - 5 s) was seen
only by the periodic sweep (15 s by default; an hour here, so only the watch can explain it).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
import redis
from kazoo.client import KazooClient

from controller_core.model import TopicPartition
from dashboard.clusters import layout
from scripts.support.kafka_layout import KafkaLayoutWriter
from tests.integration.mirror_helpers import CLUSTER, counts, small_cluster
from tests.support.zk import wait_for
from workers.mirror.mirror import Mirror, MirrorConfig
from workers.mirror.publish import RecordingPublisher


@pytest.fixture
def mirror(zk_chroot: str, rds: redis.Redis, zk: KazooClient) -> Iterator[tuple[Mirror, KafkaLayoutWriter]]:
    cluster = small_cluster(zk)
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    config = MirrorConfig(CLUSTER, mode="observed", window_s=0.1, heartbeat_s=0.3, sweep_s=3600, followups=(0.3,))
    running = Mirror(config, client, rds, RecordingPublisher())
    running.start()
    assert running.ready.wait(15)
    try:
        yield running, cluster
    finally:
        running.stop()
        client.stop()
        client.close()


def leader(rds: redis.Redis, partition: int) -> int:
    raw = rds.hget(layout.partitions_key(CLUSTER), f"orders/{partition:06d}") or b""
    return layout.decode_row(f"orders/{partition:06d}", raw).leader


def test_a_late_leader_of_an_offline_partition_shows_without_the_sweep(
    mirror: tuple[Mirror, KafkaLayoutWriter], rds: redis.Redis
) -> None:
    running, cluster = mirror
    cluster.deregister_broker(1)
    # orders-0: broker 1 was its only ISR member; orders-3 moves to broker 3 at once.
    cluster.write_states({TopicPartition("orders", 0): (-1, 1, [1]), TopicPartition("orders", 3): (3, 1, [3])}, 3)
    wait_for(lambda: counts(rds).get("p:OfflinePartition") == 1, what="orders-0 offline")
    time.sleep(1.0)  # past every follow-up read
    cluster.write_states({TopicPartition("orders", 0): (2, 2, [2])}, 3)  # an unclean election, much later
    started = time.monotonic()
    wait_for(lambda: leader(rds, 0) == 2, timeout=5.0, what="orders-0's new leader in the snapshot")
    assert time.monotonic() - started < 2.0
    assert counts(rds).get("p:OfflinePartition", 0) == 0
    assert running._state_watches == set()  # the fired watch is forgotten


def test_partitions_with_a_live_leader_are_not_watched(
    mirror: tuple[Mirror, KafkaLayoutWriter], rds: redis.Redis
) -> None:
    running, cluster = mirror
    cluster.deregister_broker(3)
    # The controller moves leadership of orders-2 to broker 1 at once: nothing left to watch.
    cluster.write_states({TopicPartition("orders", 2): (1, 1, [1])}, 3)
    wait_for(lambda: leader(rds, 2) == 1, what="orders-2 led by broker 1")
    time.sleep(0.5)
    assert running._state_watches == set()


def test_a_leader_written_before_its_watch_is_armed_fires_at_once(
    zk_chroot: str, rds: redis.Redis, zk: KazooClient
) -> None:
    """The mirror driven by hand on this thread: a broker change queues watches, a new leader is
    written before they are armed (a storm's re-derivation keeps the loop busy for seconds), and
    the watch still fires at once: it is armed relative to the broker change, not to the arming."""
    import contextlib
    import queue

    from workers.mirror.events import StateChanged

    cluster = small_cluster(zk)
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    config = MirrorConfig(CLUSTER, mode="observed", window_s=0.1, heartbeat_s=0.3, sweep_s=3600, followups=())
    mirror = Mirror(config, client, rds, RecordingPublisher())
    try:
        mirror.full_sync("test")
        cluster.deregister_broker(1)
        mirror._load_brokers()
        assert TopicPartition("orders", 0) in mirror._watch_queue and mirror._refresh_queue
        mirror._pending_reads.clear()  # the change's queued re-read comes much later in a storm
        cluster.write_states({TopicPartition("orders", 0): (2, 2, [2])}, 3)
        client.exists("/brokers/topics")  # a busy loop's other reads: the session has seen the write
        while mirror._watch_queue:  # after the re-derivation, as in a storm
            mirror._sweep_some()
        deadline = time.monotonic() + 5.0
        fired = False
        while not fired and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                fired = mirror.events.get(timeout=0.2) == StateChanged(TopicPartition("orders", 0))
        assert fired, "the new leader, written before the watch was armed, never fired it"
    finally:
        client.stop()
        client.close()


def test_after_a_broker_change_a_fired_watch_is_read_before_replica_only_rows(
    zk_chroot: str, rds: redis.Redis, zk: KazooClient
) -> None:
    """Driven by hand: only the rows that lost their leader are watched and, in the same turn,
    re-derived (the page's offline count moves from the first turn on); a new leader written for one
    of them is read before the rows that merely host a replica on the dead broker are re-derived (at
    100,000 partitions those are 30,000 rows, seconds of work the page's recovery waited behind)."""
    import contextlib
    import queue

    from workers.mirror.events import StateChanged

    cluster = small_cluster(zk)
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    config = MirrorConfig(CLUSTER, mode="observed", window_s=0.1, heartbeat_s=0.3, sweep_s=3600, followups=())
    mirror = Mirror(config, client, rds, RecordingPublisher())
    led = {TopicPartition("orders", 0), TopicPartition("orders", 3)}  # broker 1 led them
    try:
        mirror.full_sync("test")
        cluster.deregister_broker(1)
        mirror._load_brokers()
        assert set(mirror._refresh_queue) == {"orders/000000", "orders/000003"}
        assert set(mirror._refresh_later) == {"orders/000002"}  # a follower on broker 1
        assert set(mirror._watch_queue) == led
        mirror._pending_reads.clear()
        mirror._sweep_some()  # their watches, and their rows re-derived in the same turn
        assert mirror._state_watches == led
        assert mirror.state.partitions["orders/000000"].state == "OfflinePartition"
        assert mirror.state.partitions["orders/000003"].state == "OfflinePartition"
        assert not mirror._refresh_queue
        cluster.write_states({TopicPartition("orders", 0): (2, 2, [2])}, 3)
        deadline = time.monotonic() + 5.0
        while not mirror._changed_reads and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                event = mirror.events.get(timeout=0.2)
                if isinstance(event, StateChanged):
                    mirror._handle(event)
        assert mirror._changed_reads, "the new leader never fired its watch"
        mirror._sweep_some()  # its read is sent before any replica-only row is re-derived
        assert [tp for tp, *_ in mirror._reads_in_flight] == [[TopicPartition("orders", 0)]]
        assert set(mirror._refresh_later) == {"orders/000002"}  # still waiting
        mirror._sweep_some()  # the read applied first, then the replica-only rows
        assert mirror.state.partitions["orders/000000"].leader == 2
        assert mirror.state.partitions["orders/000000"].state == "OnlinePartition"
        assert not mirror._refresh_later
        assert mirror.state.partitions["orders/000002"].replica_states[1] == "OfflineReplica"
    finally:
        client.stop()
        client.close()


def test_work_that_can_wait_adds_no_rows_to_a_full_flush(zk_chroot: str, rds: redis.Redis, zk: KazooClient) -> None:
    """Driven by hand: once the next flush holds ``background_flush_rows`` rows, the replica-only
    re-derivations wait for it to be taken (a flush is written whole: at 100,000 partitions 32,000 of
    them made one 18,000-row flush the recovery's new leaders waited a second behind), and the loop
    then waits for events instead of spinning; once the flush took the rows, they go on."""
    cluster = small_cluster(zk)
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    config = MirrorConfig(CLUSTER, mode="observed", sweep_s=3600, followups=(), background_flush_rows=2)
    mirror = Mirror(config, client, rds, RecordingPublisher())
    try:
        mirror.full_sync("test")
        cluster.deregister_broker(1)
        mirror._load_brokers()
        mirror._pending_reads.clear()
        assert set(mirror._refresh_later) == {"orders/000002"}  # a follower on broker 1
        mirror._sweep_some()  # the two rows broker 1 led, re-derived: the next flush holds two rows
        assert mirror.state.unflushed_rows == 2
        assert mirror._queued_work() and not mirror._background_work()
        mirror._sweep_some()
        assert set(mirror._refresh_later) == {"orders/000002"}  # held back
        mirror.state.take_changes()  # the flush takes them
        assert mirror._background_work()
        mirror._sweep_some()
        assert not mirror._refresh_later
        assert mirror.state.partitions["orders/000002"].replica_states[1] == "OfflineReplica"
    finally:
        client.stop()
        client.close()


def test_a_partition_whose_watch_fires_again_is_read_before_first_fires(
    zk_chroot: str, rds: redis.Redis, zk: KazooClient
) -> None:
    """Driven by hand: orders-0's failover write (leaderless) is read, then orders-3's failover write
    and orders-0's recovery (broker 2 leads) fire; orders-0's second change is read first. (Reads
    first fired, first read, a recovery waited behind the failover's 20,000 confirmations.)"""
    import contextlib
    import queue

    from workers.mirror.events import StateChanged

    cluster = small_cluster(zk)
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    config = MirrorConfig(CLUSTER, mode="observed", sweep_s=3600, followups=())
    mirror = Mirror(config, client, rds, RecordingPublisher())
    first, second = TopicPartition("orders", 0), TopicPartition("orders", 3)

    def handle_fires(until: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 5.0
        while not until() and time.monotonic() < deadline:
            with contextlib.suppress(queue.Empty):
                event = mirror.events.get(timeout=0.2)
                if isinstance(event, StateChanged):
                    mirror._handle(event)
        assert until(), "a watch never fired"

    try:
        mirror.full_sync("test")
        cluster.deregister_broker(1)
        mirror._load_brokers()
        mirror._pending_reads.clear()
        mirror._refresh_later.clear()
        mirror._sweep_some()  # both watched
        assert mirror._state_watches == {first, second}
        cluster.write_states({first: (-1, 1, [1])}, 3)
        handle_fires(lambda: first in mirror._changed_reads)
        mirror._sweep_some()  # sent
        mirror._sweep_some()  # applied, its watch armed again
        assert not mirror._reads_in_flight and first in mirror._state_watches
        cluster.write_states({second: (-1, 1, [1])}, 3)
        handle_fires(lambda: second in mirror._changed_reads)
        cluster.write_states({first: (2, 2, [2])}, 3)
        handle_fires(lambda: first in mirror._refired_reads)
        mirror._sweep_some()
        assert [tp for tp, *_ in mirror._reads_in_flight] == [[first]]
        assert list(mirror._changed_reads) == [second]
        mirror._sweep_some()  # sent the other, applied this one
        assert mirror.state.partitions["orders/000000"].leader == 2
        assert first not in mirror._fired  # led again: its next fire is a first one
    finally:
        client.stop()
        client.close()


def test_queued_reads_overlap_one_answered_while_the_other_is_applied(
    zk_chroot: str, rds: redis.Redis, zk: KazooClient
) -> None:
    """Driven by hand: a chunk of queued reads is sent, and applied only when the next chunk has been
    sent (ZooKeeper answers one while the mirror applies the other); in order, and nothing is left
    in flight once there is nothing more to read."""
    cluster = small_cluster(zk)
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    config = MirrorConfig(CLUSTER, mode="observed", sweep_s=3600, followups=(), sweep_chunk=2, background_chunk=2)
    mirror = Mirror(config, client, rds, RecordingPublisher())
    try:
        mirror.full_sync("test")
        cluster.write_states({TopicPartition("orders", p): (3, 5, [3]) for p in range(4)}, 3)
        mirror._reread(TopicPartition("orders", p) for p in range(4))
        rows = mirror.state.partitions
        mirror._sweep_some()  # orders-0 and -1 sent, not applied
        assert len(mirror._reads_in_flight) == 1 and rows["orders/000000"].leader != 3
        assert mirror._background_work()
        mirror._sweep_some()  # orders-2 and -3 sent; -0 and -1 applied meanwhile
        assert len(mirror._reads_in_flight) == 1
        assert rows["orders/000001"].leader_epoch == 5 and rows["orders/000002"].leader_epoch != 5
        mirror._sweep_some()  # nothing left to send: the last one applied
        assert not mirror._reads_in_flight and not mirror._background_work()
        assert [rows[f"orders/{p:06d}"].leader_epoch for p in range(4)] == [5, 5, 5, 5]
    finally:
        client.stop()
        client.close()


def test_follow_up_reads_leave_out_the_watched_partitions(zk_chroot: str, rds: redis.Redis, zk: KazooClient) -> None:
    """A broker change's follow-up reads skip partitions whose state znode is watched (their change
    is read when the watch fires): at 100,000 partitions, 80,000 confirming reads fewer per failure."""
    cluster = small_cluster(zk)
    client = KazooClient(hosts=zk_chroot, timeout=10.0)
    client.start(timeout=15)
    config = MirrorConfig(CLUSTER, mode="observed", sweep_s=3600, followups=(0.0,))
    mirror = Mirror(config, client, rds, RecordingPublisher())
    led = {TopicPartition("orders", 0), TopicPartition("orders", 3)}  # broker 1 led them
    try:
        mirror.full_sync("test")
        cluster.deregister_broker(1)
        mirror._load_brokers()
        mirror._sweep_some()  # the led partitions' watches
        assert mirror._state_watches == led
        mirror._pending_reads.clear()
        mirror._run_timers()  # the follow-up, due now
        assert set(mirror._pending_reads) == {TopicPartition("orders", 2)}  # hosts a replica on broker 1
    finally:
        client.stop()
        client.close()
