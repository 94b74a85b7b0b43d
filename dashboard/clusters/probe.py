"""Check a cluster's ZooKeeper before registering it: reachable, and holding Kafka's layout.

Why: a typo in a connect string used to be saved and then shown as an empty cluster ("0 brokers")
for ever. Registering (form, API, Django admin) now connects once, bounded by
``CLUSTER_PROBE_TIMEOUT_S``, and refuses with a clear message: ZooKeeper not reachable, or a chroot
with no ``/brokers`` (not a Kafka cluster, or the wrong chroot). A *managed* cluster may start from
a chroot that does not exist yet or is empty (our controller creates Kafka's layout there); a
non-empty chroot without ``/brokers`` is refused in both modes (it holds something else).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from controller_core.zk.client import ZkSecurity, new_client
from dashboard.clusters.connect import parse_connect_string


class ProbeError(ValueError):
    """The cluster cannot be registered as given; the message says why and what to check."""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    brokers: int
    topics: int
    controller: bool
    fresh: bool  # a managed cluster's chroot with no layout yet

    @property
    def summary(self) -> str:
        if self.fresh:
            return "an empty chroot: the controller creates Kafka's layout when its candidates start"
        elected = "elected" if self.controller else "none"
        return f"{self.brokers} broker(s), {self.topics} topic(s), controller {elected}"


def _children(client: KazooClient, path: str) -> list[str]:
    try:
        return list(client.get_children(path))
    except NoNodeError:
        return []


def probe_cluster(connect: str, mode: str, timeout: float | None = None) -> ProbeResult:
    """Connect to ``connect`` (already valid syntax) and look for Kafka's layout; ``ProbeError`` if not."""
    parsed = parse_connect_string(connect)
    hosts = ",".join(f"{h}:{p}" for h, p in parsed.hosts)
    chroot = parsed.chroot
    budget = float(settings.CLUSTER_PROBE_TIMEOUT_S if timeout is None else timeout)
    client = new_client(
        hosts,
        timeout=max(budget, 1.0),
        security=ZkSecurity.parse(settings.ZOOKEEPER_AUTH, settings.ZOOKEEPER_ACL),
        connection_retry=KazooRetry(max_tries=1, delay=0.2),
        command_retry=KazooRetry(max_tries=0),
    )
    try:
        try:
            client.start(timeout=budget)
        except (KazooTimeoutError, KazooException, OSError) as exc:
            raise ProbeError(
                f"ZooKeeper at {hosts} cannot be reached within {budget:g} s ({type(exc).__name__}): "
                "check the host names, ports and that ZooKeeper is running"
            ) from None
        try:
            root_exists = not chroot or client.exists(chroot) is not None
            brokers = client.exists(f"{chroot}/brokers") is not None if root_exists else False
            if not brokers:
                children = client.get_children(chroot) if chroot and root_exists else []
                empty = not root_exists or (chroot != "" and not children)
                if mode == "managed" and empty:
                    return ProbeResult(0, 0, False, fresh=True)
                where = chroot or "the root"
                state = "does not exist" if not root_exists else "has no /brokers"
                raise ProbeError(
                    f"no Kafka layout at {where} of {hosts}: the chroot {state}. Kafka brokers register under "
                    f"<chroot>/brokers/ids; check the chroot (e.g. /kafka)"
                    + ("" if mode == "managed" else ", or register a new, empty chroot as a managed cluster")
                )
            ids = _children(client, f"{chroot}/brokers/ids")
            topics = _children(client, f"{chroot}/brokers/topics")
            controller = client.exists(f"{chroot}/controller") is not None
            return ProbeResult(len(ids), len(topics), controller, fresh=False)
        except NoAuthError:
            raise ProbeError(
                f"ZooKeeper at {hosts} refused to let the dashboard read {chroot or '/'}: set ZOOKEEPER_AUTH"
            ) from None
        except KazooException as exc:
            raise ProbeError(f"ZooKeeper at {hosts} failed while reading {chroot or '/'}: {exc!r}") from None
    finally:
        client.stop()
        client.close()
