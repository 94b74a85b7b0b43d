"""A preferred election request naming every partition of a cluster (``/admin/preferred_replica_election``,
100,000 partitions in ``scripts/bench``) is decoded by msgspec and put in order by topic groups; both
must give exactly what the checked decoder and ``sorted`` give, and a bad request the same errors."""

from __future__ import annotations

import random

import pytest

from controller_core.controller import sorted_partitions
from controller_core.model import TopicPartition
from controller_core.zk import codecs

pytestmark = pytest.mark.unit


def _random_partitions(seed: int, count: int) -> set[TopicPartition]:
    rng = random.Random(seed)
    topics = ["a", "a-b", "a.b", "aa", "b", "B", "orders", "orders-1", "orders_1", "z" * 40, "t\u00e9"]
    return {TopicPartition(rng.choice(topics), rng.randrange(1200)) for _ in range(count)}


@pytest.mark.parametrize("seed", range(5))
def test_sorted_partitions_is_sorted(seed: int) -> None:
    partitions = _random_partitions(seed, 3000)
    assert sorted_partitions(partitions) == sorted(partitions)
    assert sorted_partitions(frozenset()) == []


@pytest.mark.parametrize("seed", range(5))
def test_a_request_in_any_order_with_duplicates_is_put_in_order_once_each(seed: int) -> None:
    """As the znode's entries come (``decode_preferred_replica_election_entries``): in order already
    (kept as they are), or not, or with a partition named twice."""
    rng = random.Random(seed)
    ordered = sorted(_random_partitions(seed, 3000))
    shuffled = ordered[:]
    rng.shuffle(shuffled)
    twice = [*ordered[:100], *ordered[50:]]
    for entries in (ordered, shuffled, twice, [*ordered, ordered[-1]], ordered[:1], []):
        assert sorted_partitions(entries) == sorted(set(entries))
        assert sorted_partitions(iter(entries)) == sorted(set(entries))


@pytest.mark.parametrize("seed", range(2))
def test_a_requests_entries_decode_in_its_order(seed: int) -> None:
    partitions = list(_random_partitions(seed, 500))
    data = b'{"version":1,"partitions":[%s]}' % b",".join(
        b'{"topic":"%s","partition":%d}' % (tp.topic.encode(), tp.partition) for tp in [*partitions, partitions[0]]
    )
    assert codecs.decode_preferred_replica_election_entries(data) == [*partitions, partitions[0]]
    assert codecs.decode_preferred_replica_election(data) == set(partitions)


def _checked(data: bytes) -> set[TopicPartition]:
    """What the checked decoder alone gives (``codecs``' own helpers)."""
    what = "/admin/preferred_replica_election"
    return {
        codecs._partition_entry(e, f"{what} entry {i}") for i, e in enumerate(codecs._partition_entries(data, what))
    }


@pytest.mark.parametrize("seed", range(3))
def test_a_valid_request_decodes_as_the_checked_decoder_reads_it(seed: int) -> None:
    partitions = _random_partitions(seed, 2000)
    data = codecs.encode_preferred_replica_election(sorted(partitions))
    assert codecs.decode_preferred_replica_election(data) == _checked(data) == partitions
    extra = b'{"version":1,"other":[1],"partitions":[{"topic":"t","partition":3,"x":true}]}'
    assert codecs.decode_preferred_replica_election(extra) == _checked(extra) == {TopicPartition("t", 3)}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "holds no data"),
        (b"not json", "not valid JSON"),
        (b"[]", "expected a JSON object"),
        (b'{"version":1}', "'partitions' must be a list"),
        (b'{"partitions":{"topic":"t"}}', "'partitions' must be a list"),
        (b'{"partitions":[{"topic":"t","partition":true}]}', "entry 0 partition: expected an integer"),
        (b'{"partitions":[{"topic":"t","partition":4.0}]}', "entry 0 partition: expected an integer"),
        (b'{"partitions":[{"topic":"t","partition":"0"}]}', "entry 0 partition: expected an integer"),
        (b'{"partitions":[{"topic":"t","partition":0},{"partition":1}]}', "entry 1 topic: expected a string"),
        (b'{"partitions":[{"topic":7,"partition":1}]}', "entry 0 topic: expected a string"),
        (b'{"partitions":[3]}', "entry 0: expected a JSON object"),
    ],
)
def test_a_bad_request_is_refused_with_the_checked_decoders_message(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        codecs.decode_preferred_replica_election(data)
