"""The broker agent: a process that hosts one broker's replicas for the controller to lead.

One module per job (docs/broker-agent.md):

* ``config``           -- ``BrokerConfig``, Kafka's setting names;
* ``log``              -- a replica's log as offsets (log start, LEO, HW) and leader epochs;
* ``partition``        -- leader/follower transitions, HW, ISR shrink/expand proposals;
* ``replica_manager``  -- request validation (reference §6.5) and the broker's partitions;
* ``metadata_cache``   -- what UpdateMetadata says about the cluster;
* ``fetcher``          -- follower fetching, one thread per source leader;
* ``throttle``         -- replication throttles (KIP-73): config formats and byte-rate quotas;
* ``dynamic_config``   -- the `/config/changes` listener that keeps the throttles current;
* ``alter_isr``        -- ISR proposals to the controller; ``controller_client`` finds it;
* ``producer``         -- the synthetic produce load;
* ``registration``     -- ``/brokers/ids/<id>`` and re-registration after session expiry;
* ``checkpoint``       -- logs kept across restarts;
* ``api``              -- the HTTP endpoint; ``agent`` wires everything; ``main`` is the CLI.
"""
