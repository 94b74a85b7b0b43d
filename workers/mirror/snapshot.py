"""Write the mirror's snapshot to Redis: incremental flushes and whole rewrites.

Why ``seq`` is written last, in the same ``MULTI`` as the last of a flush's data: a page reads
counters and ``seq`` together; if it sees the counters of flush 12 with the ``seq`` of flush 11 it
applies delta 12 again (harmless, values are absolute), but if it saw the ``seq`` of 12 with
counters or rows of 11 it would never get them. Commands are
grouped by key (one ``HSET`` with every changed row, one ``ZADD`` per state set), so a flush of
20,000 partition changes costs a few dozen commands, not 100,000.

A full rewrite (after a start, a ZooKeeper session loss or a Redis restart) replaces every mirror
key at once, with a new generation id, so readers never see a half-built snapshot. The big keys (the
partition rows and the state sets) are first written under staging names outside any transaction,
then one short ``MULTI`` unlinks the old keys and renames the staged ones into place. Written inside
the ``MULTI``, 100,000 partitions held Redis (single-threaded) for ~1 s, ~4 s under load: every other
mirror's flushes and heartbeats and every page's reads waited behind it (``test_hosting_workers``:
the small cluster's heartbeat read 5 s old). ``UNLINK`` before ``RENAME`` frees the old values on
Redis's background thread; a ``RENAME`` onto an existing key would free it inline.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import redis
from redis.commands.core import Script

from dashboard.clusters import layout
from workers.mirror.changes import ChangeSet
from workers.mirror.state import MirrorState

logger = logging.getLogger(__name__)

_CHUNK = 10_000

# KEYS[1] the meta hash; ARGV[1] the generation it must hold; then field, value pairs.
_WRITE_META_OF_GEN = """
if redis.call('hget', KEYS[1], 'gen') ~= ARGV[1] then
  return 0
end
redis.call('hset', KEYS[1], unpack(ARGV, 2))
return 1
"""


def _chunks(items: list[Any], size: int = _CHUNK) -> Iterable[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SnapshotWriter:
    """Writes one cluster's mirror keys.

    Example::

        writer = SnapshotWriter(redis.Redis.from_url(url), "demo")
        writer.write_full(state, {"gen": "ab", "seq": 0})
        writer.write_changes(state.take_changes(), {"seq": 1})
    """

    def __init__(self, client: redis.Redis, cluster: str) -> None:
        self.client = client
        self.cluster = cluster
        self._meta_script: Script | None = None  # registered on first use

    def write_changes(
        self,
        ch: ChangeSet,
        meta: Mapping[str, Any],
        before_rows: Callable[[], None] | None = None,
        after_rows: Callable[[], None] | None = None,
    ) -> None:
        """Write one flush: counters and summaries in one ``MULTI``, then rows, state sets and ``seq`` in a second.

        ``before_rows`` runs between the two, ``after_rows`` after the second (the mirror publishes
        the deltas without rows in the first, those that carry rows in the second). What the
        overview and the diagrams show live is counters, so their write is all they wait for; the
        rows of a failover storm (thousands of JSON rows and state-set moves: encoding them is most
        of a flush's writing) follow on the same connection, and a page told of changed rows is told
        once they are stored (it may read them at once: ``rows_truncated``). ``seq`` (and the
        controller fields in ``meta``) come last: a page whose snapshot holds ``seq`` has everything
        that flush wrote, and one that read the counters before it applies the flush's delta again
        (harmless: values are absolute).
        """
        c = self.cluster
        pipe = self.client.pipeline(transaction=True)
        if ch.counts:
            pipe.hset(layout.counts_key(c), mapping=_m(ch.counts))
        if ch.topics:
            pipe.hset(layout.topics_key(c), mapping=_m(ch.topics))
        if ch.removed_topics:
            pipe.hdel(layout.topics_key(c), *ch.removed_topics)
        if ch.brokers:
            pipe.hset(layout.brokers_key(c), mapping=_m({str(b): _json(reg) for b, reg in ch.brokers.items()}))
        if ch.removed_brokers:
            pipe.hdel(layout.brokers_key(c), *(str(b) for b in ch.removed_brokers))
        for name, value in ch.admin.items():
            if value is None:
                pipe.hdel(layout.admin_key(c), name)
            else:
                pipe.hset(layout.admin_key(c), name, _json(value))
        if len(pipe):
            pipe.execute()
        if before_rows is not None:
            before_rows()
        rows = self.client.pipeline(transaction=True)
        if ch.rows:
            encoded = [(m, layout.encode_row(row)) for m, row in ch.rows.items()]
            for part in _chunks(encoded):
                rows.hset(layout.partitions_key(c), mapping=_m(dict(part)))
        for part in _chunks(ch.removed_rows):
            rows.hdel(layout.partitions_key(c), *part)
        for key, members in ch.zrem.items():
            for part in _chunks(members):
                rows.zrem(key, *part)
        for key, members in ch.zadd.items():
            for part in _chunks(members):
                rows.zadd(key, dict.fromkeys(part, 0))
        rows.hset(layout.meta_key(c), mapping=_m(_meta(meta)))
        rows.execute()
        if after_rows is not None:
            after_rows()

    def write_full(self, state: MirrorState, meta: Mapping[str, Any]) -> None:
        """Replace every mirror key of the cluster by ``state`` (staged, then swapped in one ``MULTI``).

        Staging names carry the new generation (``layout.staging_key``): a sync that died half-way
        leaves keys no one reads, which match the mirror's key pattern and so go with the next
        sync's stale keys, and two writers of one cluster (a lost lock) never write into each
        other's staging.
        """
        c = self.cluster
        gen = str(meta.get("gen") or "")
        keep = {layout.lock_key(c), layout.interest_key(c)}
        stale = [k for k in self._mirror_keys() if k not in keep]
        staged: dict[str, str] = {}  # live key -> its staging key

        def stage(key: str) -> str:
            staged[key] = layout.staging_key(c, key, gen)
            return staged[key]

        rows = self.client.pipeline(transaction=False)  # Redis serves other clients between commands
        mine = layout.staging_prefix(c, gen)
        if leftovers := [k for k in stale if k.startswith(mine)]:  # a rewrite of this very generation died
            rows.unlink(*leftovers)
            stale = [k for k in stale if not k.startswith(mine)]
        encoded = [(m, layout.encode_row(row)) for m, row in state.partitions.items()]
        for part in _chunks(encoded):
            rows.hset(stage(layout.partitions_key(c)), mapping=_m(dict(part)))
        zsets: dict[str, list[str]] = {}
        for m in state.partitions:
            for key, name in state.membership_of(m):
                zsets.setdefault(key, []).append(name)
        for key, members in zsets.items():
            for part in _chunks(members):
                rows.zadd(stage(key), dict.fromkeys(part, 0))
        rows.execute()
        counts = {k: v for k, v in state.counts.items() if v or not k.startswith("b:")}
        for name in layout.topic_counter_names():
            counts.setdefault(name, 0)
        counts.setdefault(layout.LIVE_BROKERS, len(state.live))
        counts.setdefault(layout.TOPICS, len(state.topics))
        swap = self.client.pipeline(transaction=True)
        for part in _chunks(stale, 1000):
            swap.unlink(*part)
        for key, staging in staged.items():
            swap.rename(staging, key)
        swap.hset(layout.counts_key(c), mapping=_m(counts))
        if state.topics:
            swap.hset(layout.topics_key(c), mapping=_m({t: state.topic_summary(t) for t in state.topics}))
        if state.brokers:
            swap.hset(layout.brokers_key(c), mapping=_m({str(b): _json(r) for b, r in state.brokers.items()}))
        if state.admin:
            swap.hset(layout.admin_key(c), mapping=_m({k: _json(v) for k, v in state.admin.items()}))
        swap.hset(layout.meta_key(c), mapping=_m(_meta(meta)))
        swap.execute()

    def write_meta_of_gen(self, meta: Mapping[str, Any], gen: str) -> bool:
        """Update the meta hash only while it still holds generation ``gen``, in one step; False when
        Redis lost the snapshot (a restart, ``FLUSHALL``), and then nothing is written.

        A check and a write as two commands let a ``FLUSHALL`` land between them: the write then
        recreated the meta hash with the old generation over an empty snapshot, and no later
        heartbeat could tell the snapshot was gone (seen in CI: the mirror never resynced)."""
        if self._meta_script is None:
            self._meta_script = self.client.register_script(_WRITE_META_OF_GEN)
        fields = [item for key, value in _meta(meta).items() for item in (key, value)]
        return bool(self._meta_script(keys=[layout.meta_key(self.cluster)], args=[gen, *fields]))

    def meta_gen(self) -> str | None:
        """The generation id in Redis (None after a Redis restart or ``FLUSHALL``)."""
        value = self.client.hget(layout.meta_key(self.cluster), "gen")
        if value is None:
            return None
        return value.decode() if isinstance(value, bytes) else str(value)

    def last_seq(self) -> int:
        value = self.client.hget(layout.meta_key(self.cluster), "seq")
        return int(value) if value is not None else 0

    def watched_entries(self, now_ms: int) -> list[str]:
        """Interest entries of live pages that have not expired."""
        raw = self.client.zrangebyscore(layout.interest_key(self.cluster), now_ms, "+inf")
        return [r.decode() if isinstance(r, bytes) else str(r) for r in raw]

    def prune_interest(self, now_ms: int) -> None:
        self.client.zremrangebyscore(layout.interest_key(self.cluster), "-inf", now_ms)

    def _mirror_keys(self) -> list[str]:
        keys: list[str] = []
        for key in self.client.scan_iter(match=layout.all_mirror_keys_pattern(self.cluster), count=1000):
            keys.append(key.decode() if isinstance(key, bytes) else str(key))
        return keys


def _m(mapping: Mapping[str, Any]) -> Any:
    """redis-py's stubs want ``Mapping[str | bytes | ..., ...]`` (invariant keys); ours are str."""
    return mapping


def _json(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), default=str)


def _meta(meta: Mapping[str, Any]) -> dict[str, str]:
    return {k: ("" if v is None else str(v)) for k, v in meta.items()}
