"""Every kazoo client for a managed cluster is made (and, on shutdown, stopped) here, with the optional
digest authentication and ACLs.

Why one place: Kafka's ``zookeeper.set.acl`` only protects the cluster if *every* writer
authenticates and creates znodes with the same ACL; one client created without them (a broker, the
mirror, the dashboard's preview) either cannot write or leaves world-writable znodes behind.

Configuration (environment, or the dashboard's settings of the same names):

* ``ZOOKEEPER_AUTH="digest:user:password"`` — the client authenticates with this identity
  (``auth_data``). Digest is SHA-1 over a cleartext password sent in the clear: use it on a private
  network or with TLS to ZooKeeper.
* ``ZOOKEEPER_ACL=1`` (needs ``ZOOKEEPER_AUTH``) — znodes this client creates get Kafka's
  ``ZkData.defaultAcls`` for a secure cluster: all rights for the creator's identity, read for
  everyone (``CREATOR_ALL_ACL + READ_ACL_UNSAFE``). Other clients can read the controller's and
  brokers' znodes but cannot change or delete them (``NoAuthError``).

The controller, the brokers and the dashboard share one principal: the dashboard creates admin
requests (``/admin/...``) and topics, which the controller must then be able to change.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.security import ACL, CREATOR_ALL_ACL, READ_ACL_UNSAFE, Permissions

logger = logging.getLogger(__name__)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@dataclass(frozen=True, slots=True)
class ZkSecurity:
    """How a client authenticates and which ACL its new znodes get (nothing by default)."""

    auth: tuple[tuple[str, str], ...] = ()
    acl: bool = False
    _repr_hint: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.acl and not self.auth:
            raise ValueError("ZOOKEEPER_ACL=1 needs ZOOKEEPER_AUTH=digest:user:password (the creator's identity)")

    @classmethod
    def parse(cls, auth: str, acl: str | bool) -> ZkSecurity:
        """From the two settings; raises ``ValueError`` naming the variable on a malformed value."""
        pairs: tuple[tuple[str, str], ...] = ()
        text = auth.strip()
        if text:
            scheme, sep, credential = text.partition(":")
            if scheme != "digest" or not sep or ":" not in credential or not credential.split(":", 1)[0]:
                raise ValueError("ZOOKEEPER_AUTH must be digest:user:password")
            pairs = (("digest", credential),)
        if isinstance(acl, bool):
            enabled = acl
        elif acl.strip().lower() in _TRUE:
            enabled = True
        elif acl.strip().lower() in _FALSE:
            enabled = False
        else:
            raise ValueError(f"ZOOKEEPER_ACL={acl!r} is not a boolean (use 1/0, true/false, yes/no, on/off)")
        return cls(pairs, enabled, _repr_hint=text.split(":", 2)[1] if pairs else "")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ZkSecurity:
        env = os.environ if environ is None else environ
        return cls.parse(env.get("ZOOKEEPER_AUTH", ""), env.get("ZOOKEEPER_ACL", ""))

    @property
    def default_acl(self) -> list[ACL] | None:
        """Kafka's secure default: creator all, world read; None leaves kazoo's open ACL."""
        return [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE] if self.acl else None

    def __repr__(self) -> str:  # never print the password
        return f"ZkSecurity(user={self._repr_hint!r}, acl={self.acl})"


def new_client(hosts: str, *, timeout: float, security: ZkSecurity | None = None, **kwargs: Any) -> KazooClient:
    """A ``KazooClient`` with ``security`` applied (``ZkSecurity.from_env()`` when not given).

    ``kwargs`` go to ``KazooClient`` unchanged (``connection_retry``, ``command_retry``, ...).
    """
    sec = security if security is not None else ZkSecurity.from_env()
    if sec.auth:
        kwargs["auth_data"] = list(sec.auth)
    if sec.default_acl is not None:
        kwargs["default_acl"] = sec.default_acl
    return KazooClient(hosts=hosts, timeout=timeout, **kwargs)


def world_writable_warning(client: KazooClient, path: str, security: ZkSecurity) -> str | None:
    """A warning when ACLs are on but ``path`` (the chroot) lets anyone write or delete its children.

    ZooKeeper checks DELETE and CREATE on the *parent*, so an open chroot lets any client delete
    ``/controller`` however well ``/controller`` itself is protected. Kafka leaves existing znodes
    to ``zookeeper-security-migration``; we do the same and say so at start-up.
    """
    if not security.acl:
        return None
    acl, _ = client.get_acls(path)
    if any(a.id.scheme == "world" and a.perms & ~Permissions.READ for a in acl):
        return (
            f"ZOOKEEPER_ACL is on but the chroot {path} is writable by anyone: secure it once with "
            f"`setAcl {path} auth::cdrwa,world:anyone:r` from an authenticated zkCli session"
        )
    return None


def stop_client(client: KazooClient, *, connected_wait_s: float = 5.0, unreachable_wait_s: float = 1.0) -> bool:
    """Close ``client``'s session and free its socket, waiting a bounded time; return whether it finished.

    Connected, this is kazoo's ``stop()`` and ``close()``: the server ends the session at once and the
    session's ephemeral znodes (a broker's registration) go with it, normally in milliseconds.
    Disconnected, there is no session to close (the server cannot hear us; the session expires on
    its own), yet kazoo's ``stop()`` waits up to ten seconds for its connection thread, which may be
    inside a connect attempt to a server that accepted the TCP connection and never answers (a
    SIGSTOPped or partitioned server: up to session timeout / number of hosts) or in a retry sleep.
    A broker shutting down with ZooKeeper unreachable exited up to ~2 s late that way (soak F12).
    The stop therefore runs on a daemon thread; a process exiting afterwards does not wait for it.
    """
    wait_s = connected_wait_s if client.connected else unreachable_wait_s

    def stop_and_close() -> None:
        try:
            client.stop()
            client.close()
        except Exception:  # e.g. kazoo's WriterNotClosedException after its own 10 s: we are exiting anyway
            logger.debug("kazoo client did not stop cleanly", exc_info=True)

    stopper = threading.Thread(target=stop_and_close, name="zk-stop", daemon=True)
    stopper.start()
    stopper.join(wait_s)
    if stopper.is_alive():
        logger.warning("ZooKeeper client still stopping after %.1f s (unreachable?); not waiting for it", wait_s)
        return False
    return True
