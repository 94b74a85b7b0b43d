"""``ZkStore``: the controller's reads and writes of Kafka's ZooKeeper layout, fenced and batched.

Guarantees and failure behaviour:

* **Fencing.** Every controller write (every method taking ``expected_controller_epoch_zk_version``)
  runs in ZooKeeper multis that begin with ``check(/controller_epoch, version=expected)``, as Kafka's
  ``wrapRequestWithControllerEpochCheck`` does. When that check fails with BADVERSION the call raises
  ``ControllerMovedError`` and the failed multi has changed nothing. Multis of the same call that
  ZooKeeper ran *before* the epoch moved stay applied (they were legitimate when they ran); none runs
  after it. A missing ``/controller_epoch`` raises ``ZkOperationError(NONODE)``.
* **Batching.** Many ops share one multi and one epoch check. A multi stays under
  ``max_multi_bytes`` (128 KB by default) by its exact serialized size plus ZooKeeper's own per-op
  transaction overhead, far below ZooKeeper's 1 MB ``jute.maxbuffer``, and up to ``max_in_flight``
  multis are pipelined. Why not ~900 KB: ZooKeeper keeps its last 500 committed transactions in
  memory (``zookeeper.commitLogCount``), so 900 KB multis can pin ~450 MB of a server's heap (a
  512 MB server ran out of memory in our benchmark); 128 KB multis (about 900 partition-state
  writes each) bound that to ~64 MB, and pipelined (16 in flight) they were as fast or faster in our
  measurements, since ZooKeeper's request stages overlap across several smaller multis. Bulk reads,
  which the server does not retain, use ``max_read_bytes`` (900 KB). Multis are serialized on the
  caller's thread and handed to kazoo's connection with ``KazooClient._call``, the same private entry
  point multi-read needs (kazoo's ``TransactionRequest`` costs more client CPU per op than ZooKeeper
  spends applying it).
* **Per-op results.** A multi is all-or-nothing, so when one op fails (a stale partition version, say)
  ZooKeeper names that op; the store records its result code and resubmits the rest of the chunk (in
  halves, so k failures cost about 2k multis, not k passes over the chunk). Neighbours are never failed
  by a stale sibling. The ops of one batch must therefore be independent (distinct paths, no
  parent/child pairs); methods that need ordering run their batches in phases.
* **Conditional writes.** Partition-state writes carry the version that was read
  (``LeaderAndIsr.zk_version``); BADVERSION comes back as "needs retry", as in Kafka.
* **Connection loss.** A multi whose connection dropped is resubmitted once (kazoo queues it until it
  reconnects). If the first attempt had in fact been applied, the resubmission conflicts with our own
  write (BADVERSION / NODEEXISTS); the store then reads those znodes and reports an op as OK when the
  znode holds exactly what it wrote (at the version a set would have produced), so a lost reply never
  makes the controller redo a write. A multi lost twice is reported per op as CONNECTIONLOSS (outcome
  unknown: re-read). Session expiry is reported per op (SESSIONEXPIRED); the controller resigns.
* **Bulk reads** use ZooKeeper multi-read (``controller_core.zk.multiread``) with a fallback to
  pipelined single reads; a missing znode is a per-item result, never an exception for the batch.
* **Admin writes** (``create_topic``, ``mark_topic_for_deletion``, the ``create_*_request`` methods)
  are unfenced, as Kafka's own tools are, and raise ``ZkOperationError`` with a clear message on
  conflicts.

Layout (in the style of kazoo's ``recipe`` package, one concern per module):

* ``wire``: the multi's wire format, ``Op``, ``WriteOutcome``, ``StoreCounters``, ``zk_code``;
* ``base``: the client, bounds, counters and shared reads; ``engine``: the fenced-multi engine;
* ``controller_epoch``: election and epoch, ``/feature``, ``/cluster/id``; ``brokers``;
  ``topics`` (assignments and partition states); ``admin`` (admin request znodes);
  ``configs`` (config overrides and notifications).

``ZkStore`` composes them; callers use only ``ZkStore`` and the names re-exported here.

Thread-safety: one controller event thread drives a store; the counters are not synchronised.
"""

from __future__ import annotations

from controller_core.zk.store.admin import AdminZnodes
from controller_core.zk.store.brokers import BrokerZnodes
from controller_core.zk.store.configs import ConfigAndNotificationZnodes
from controller_core.zk.store.controller_epoch import ControllerEpoch, ControllerZnodes
from controller_core.zk.store.topics import TopicZnodes
from controller_core.zk.store.wire import DEFAULT_MAX_MULTI_BYTES, StoreCounters, WriteOutcome, zk_code

__all__ = ["DEFAULT_MAX_MULTI_BYTES", "ControllerEpoch", "StoreCounters", "WriteOutcome", "ZkStore", "zk_code"]


class ZkStore(ControllerZnodes, BrokerZnodes, TopicZnodes, AdminZnodes, ConfigAndNotificationZnodes):
    """Kafka's ZooKeeper data for the controller: implements ``ports.PartitionStateStore`` and more.

    Usage::

        store = ZkStore(client)
        store.ensure_persistent_paths()
        epoch, epoch_zk_version = store.register_controller_and_increment_epoch(1, {"endpoint": url})
        reads = store.get_partition_states(partitions)
        result = store.update_leader_and_isr(new_states, epoch, epoch_zk_version)
        # result.finished[tp] -> new LeaderAndIsr (new zk_version) or exception; result.needs_retry

    ``max_multi_bytes`` bounds every multi, ``max_read_bytes`` every multi-read request and response;
    ``max_in_flight`` is the number of multis pipelined; ``max_ops_per_multi`` (0: no limit) caps the
    writes per multi; ``timeout`` bounds each wait for a reply; ``max_znode_bytes`` is the largest
    admin request znode written in one piece (set it to the server's ``jute.maxbuffer`` less ~1 KB).
    """
