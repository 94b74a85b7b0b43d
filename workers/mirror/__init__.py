"""The mirror: ZooKeeper and the controller's state-change stream, kept in Redis and pushed live."""
