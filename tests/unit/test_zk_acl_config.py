"""Parsing of ZOOKEEPER_AUTH / ZOOKEEPER_ACL and what the client gets from them (no server needed)."""

from __future__ import annotations

import pytest
from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

from controller_core.zk.client import ZkSecurity, new_client


def test_nothing_configured_means_an_open_unauthenticated_client() -> None:
    sec = ZkSecurity.from_env({})
    assert sec == ZkSecurity() and sec.default_acl is None
    client = new_client("127.0.0.1:1", timeout=1.0, security=sec)
    assert not client.auth_data


def test_digest_with_acl_gives_creator_all_and_world_read() -> None:
    sec = ZkSecurity.from_env({"ZOOKEEPER_AUTH": "digest:kcp:p:w", "ZOOKEEPER_ACL": "yes"})
    assert sec.auth == (("digest", "kcp:p:w"),)
    client = new_client("127.0.0.1:1/c", timeout=1.0, security=sec)
    assert client.auth_data == {("digest", "kcp:p:w")}
    assert client.default_acl == [*CREATOR_ALL_ACL, *READ_ACL_UNSAFE]
    assert "p:w" not in repr(sec) and "kcp" in repr(sec)


@pytest.mark.parametrize(
    ("auth", "acl", "message"),
    [
        ("sasl:kcp:pw", "1", "digest:user:password"),
        ("digest:nopassword", "0", "digest:user:password"),
        ("digest::pw", "0", "digest:user:password"),
        ("", "1", "needs ZOOKEEPER_AUTH"),
        ("digest:kcp:pw", "maybe", "ZOOKEEPER_ACL"),
    ],
)
def test_bad_values_fail_loudly(auth: str, acl: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ZkSecurity.parse(auth, acl)
