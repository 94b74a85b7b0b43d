"""A Redis lease: at most one active mirror per cluster, and a standby takes over when it dies.

``SET key token NX PX ttl`` acquires; a Lua script renews (``PEXPIRE``) and releases (``DEL``) only
while the key still holds our token, so a mirror that stalled past its TTL cannot extend or delete
the lease a successor now holds. A holder renews every ``ttl/3``; when a renewal fails it must stop
mirroring at once (another one may be active).

Redis is a single node here (DESIGN §8), so this is a liveness mechanism, not a safety proof: two
mirrors overlapping for a moment would only write the same ZooKeeper facts twice, never corrupt
them, because every write comes from a full ZooKeeper read and carries a fresh generation.
"""

from __future__ import annotations

import redis

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class RedisLease:
    """Example::

    lease = RedisLease(client, "kcp:demo:m:lock", token="host-1234", ttl_s=10)
    if lease.acquire():
        ...            # call lease.renew() every ttl/3; stop when it returns False
        lease.release()
    """

    def __init__(self, client: redis.Redis, key: str, token: str, ttl_s: float = 10.0) -> None:
        self._client = client
        self.key = key
        self.token = token
        self.ttl_ms = int(ttl_s * 1000)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)

    def acquire(self) -> bool:
        return bool(self._client.set(self.key, self.token, nx=True, px=self.ttl_ms))

    def renew(self) -> bool:
        return bool(self._renew(keys=[self.key], args=[self.token, self.ttl_ms]))

    def release(self) -> bool:
        return bool(self._release(keys=[self.key], args=[self.token]))

    def holder(self) -> str | None:
        value = self._client.get(self.key)
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)
