"""Warm standby: a candidate keeps the failover's reads current from ZooKeeper while it waits.

* ``view``: the decoded brokers, topics, assignments, partition states and admin znodes;
* ``follower``: persistent recursive watches, multi-read re-reads, lag, bounded backlog, fallback;
* ``source``: the failover's four reads, from the view when proven current, else from ZooKeeper.

See docs/reliability.md ("Warm standby") for what holds and what bounds it.
"""

from controller_core.standby.follower import StandbyFollower
from controller_core.standby.source import FailoverSource
from controller_core.standby.view import ClusterView

__all__ = ["ClusterView", "FailoverSource", "StandbyFollower"]
