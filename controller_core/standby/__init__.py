"""Warm standby: a candidate keeps the controller context current from ZooKeeper while it waits.

* ``view``: the decoded brokers, topics, assignments, partition states and admin znodes;
* ``warm_context``: the controller context (with the state machines' initial states) kept from it;
* ``follower``: persistent recursive watches, multi-read re-reads, lag, bounded backlog, fallback;
* ``source``: the failover's hand-over of that context when proven current, else why not (cold).

See docs/reliability.md ("Warm standby") for what holds and what bounds it.
"""

from controller_core.standby.follower import StandbyFollower
from controller_core.standby.source import FailoverSource
from controller_core.standby.view import ClusterView

__all__ = ["ClusterView", "FailoverSource", "StandbyFollower"]
