"""The ZooKeeper layer of the controller, over kazoo, in Kafka's exact paths and JSON formats.

Small recipe-style modules, each taking the ``KazooClient`` as its first argument:

* ``paths`` — every Kafka znode path (reference §1.1);
* ``codecs`` — every Kafka JSON format (reference §1.2), encode and decode;
* ``multiread`` — bulk reads with ZooKeeper's multi-read (OpCode 22), chunked and pipelined;
* ``store`` — ``ZkStore``: epoch-fenced, batched, conditional writes and bulk reads (implements
  ``controller_core.ports.PartitionStateStore``);
* ``watchers`` — ``WatchRegistry``: self re-arming watches whose callbacks only enqueue events;
* ``election`` — Kafka's controller election (``/controller`` + ``/controller_epoch``).

Only this package imports kazoo; the state machines see ``controller_core.ports`` Protocols.
"""
