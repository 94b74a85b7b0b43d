"""ZooKeeper multi-read (OpCode 22) against a real server: same answers as single reads, chunked."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from controller_core.zk.multiread import (
    ChildrenResult,
    DataResult,
    LazyPaths,
    MultiReader,
    VersionColumns,
    VersionedData,
)

pytestmark = pytest.mark.integration


def _comparable(results: list[DataResult]) -> list[tuple[bytes | None, object, type | None]]:
    return [(r.data, r.stat, type(r.error) if r.error else None) for r in results]


def _versions(results: list[VersionedData]) -> list[tuple[bytes | None, int, type | None]]:
    return [(r.data, r.version, type(r.error) if r.error else None) for r in results]


@pytest.fixture
def tree(zk: KazooClient) -> list[str]:
    zk.create("/d", b"root")
    tx = zk.transaction()
    for i in range(300):
        tx.create(f"/d/n{i}", b"v" * (i % 50))
    tx.create("/d/empty")
    assert all(not isinstance(r, Exception) for r in tx.commit())
    zk.set("/d/n7", b"changed")  # a non-zero version
    return ["/d", *(f"/d/n{i}" for i in range(300)), "/d/empty", "/d/missing", "/nope/deeper", "/"]


def test_multi_read_returns_exactly_what_single_reads_return(zk: KazooClient, tree: list[str]) -> None:
    reader = MultiReader(zk)
    bulk = reader.get_data(tree)
    assert reader.supported is True and reader.counters.requests >= 2  # the probe, then the reads
    singles: list[DataResult] = []
    for path in tree:
        try:
            data, stat = zk.get(path)
            singles.append(DataResult(data, stat))
        except NoNodeError as exc:
            singles.append(DataResult(None, None, exc))
    assert _comparable(bulk) == _comparable(singles)
    assert bulk[tree.index("/d/missing")].missing and not bulk[tree.index("/d/missing")].ok
    assert bulk[tree.index("/d/n7")].stat.version == 1


def test_versioned_reads_are_the_data_reads_reduced_to_data_and_version(zk: KazooClient, tree: list[str]) -> None:
    """``get_data_versions`` (what bulk state reads use) parses only the version out of each stat; a
    wrong offset into the stat would still give integers, so compare with the full reads."""
    zk.set("/d/n3", b"x")
    zk.set("/d/n3", b"y")  # version 2, while mzxid and ctime differ from it
    for reader in (MultiReader(zk), MultiReader(zk, use_multi_read=False, single_window=16)):
        full = reader.get_data(tree)
        versioned = reader.get_data_versions(tree)
        assert all(type(v) is VersionedData for v in versioned)
        assert [(v.data, v.version, type(v.error) if v.error else None) for v in versioned] == [
            (r.data, r.stat.version if r.stat else -1, type(r.error) if r.error else None) for r in full
        ]
        assert versioned[tree.index("/d/n3")].version == 2
        assert isinstance(versioned[tree.index("/d/missing")].error, NoNodeError)
    assert MultiReader(zk).get_data_versions([]) == []


def test_children_come_back_like_get_children_including_missing_parents(zk: KazooClient, tree: list[str]) -> None:
    reader = MultiReader(zk)
    asked = ["/d", "/d/n1", "/d/missing", "/"]
    bulk = reader.get_children(asked)
    assert sorted(bulk[0].children or []) == sorted(zk.get_children("/d"))
    assert bulk[1] == ChildrenResult([])
    assert bulk[2].missing
    assert bulk[3].children == ["d"]


def test_the_fallback_of_pipelined_single_reads_gives_the_same_results(zk: KazooClient, tree: list[str]) -> None:
    multi, single = MultiReader(zk), MultiReader(zk, use_multi_read=False, single_window=16)
    assert _comparable(single.get_data(tree)) == _comparable(multi.get_data(tree))
    parents = [*tree[:5], "/x"]

    def children(reader: MultiReader) -> list[tuple[list[str] | None, type | None]]:
        return [
            (sorted(r.children) if r.children is not None else None, type(r.error) if r.error else None)
            for r in reader.get_children(parents)
        ]

    assert children(single) == children(multi)
    assert single.counters.requests == 0 and single.counters.single_reads == len(tree) + 6


def test_requests_and_responses_are_chunked_under_the_byte_budget(zk: KazooClient, tree: list[str]) -> None:
    reader = MultiReader(zk, max_batch_bytes=4096, max_in_flight=3)
    bulk = reader.get_data(tree, size_hint=50)  # the largest node holds 49 bytes
    assert _comparable(bulk) == _comparable(MultiReader(zk).get_data(tree))
    assert reader.counters.requests > 5
    assert reader.counters.largest_response <= 4096
    assert reader.counters.largest_request <= 4096


def test_streamed_versioned_reads_come_back_batch_by_batch_with_the_next_ones_in_flight(
    zk: KazooClient, tree: list[str]
) -> None:
    reader = MultiReader(zk, max_batch_bytes=4096, max_in_flight=2)
    reader.get_data_versions(["/d"])  # probes multi-read support
    before = reader.counters.requests
    stream = reader.iter_data_versions(tree, size_hint=50)
    first = next(stream)
    # One request answered and handed over, two more in flight; the rest not asked yet.
    assert reader.counters.requests - before == 3
    rest = list(stream)
    assert reader.counters.requests > 5
    expected = _versions(MultiReader(zk).get_data_versions(tree))
    assert _versions([first, *rest]) == expected
    fallback = MultiReader(zk, use_multi_read=False, single_window=16)
    assert _versions(list(fallback.iter_data_versions(tree))) == expected
    assert list(reader.iter_data_versions([])) == []


def test_empty_input_sends_nothing(zk: KazooClient) -> None:
    reader = MultiReader(zk)
    assert reader.get_data([]) == [] and reader.get_children([]) == []
    assert reader.counters.requests == 0 and reader.supported is None


def test_lazy_paths_read_like_the_list_of_their_paths_and_make_each_when_sent(zk: KazooClient, tree: list[str]) -> None:
    """``LazyPaths`` (a cold failover's million state paths): the same results as the list, chunked and
    through the fallback, and a path is made only when its request is built."""
    made: list[str] = []

    def path(item: str) -> str:
        made.append(item)
        return item

    lazy = LazyPaths(tree, path)
    assert len(lazy) == len(tree) and lazy[3] == tree[3] and list(lazy[2:5]) == tree[2:5]
    made.clear()
    reader = MultiReader(zk, max_batch_bytes=4096, max_in_flight=2)
    reader.get_data_versions(["/d"])  # probes multi-read support
    stream = reader.iter_data_versions(lazy, size_hint=50)
    first = next(stream)
    assert 0 < len(made) < len(tree)  # only the requests sent so far
    expected = _versions(MultiReader(zk).get_data_versions(tree))
    assert _versions([first, *stream]) == expected
    assert made == tree
    fallback = MultiReader(zk, use_multi_read=False, single_window=16)
    assert _versions(fallback.get_data_versions(LazyPaths(tree, str))) == expected


def _from_columns(chunks: list[VersionColumns]) -> list[tuple[bytes | None, int, type | None]]:
    out: list[tuple[bytes | None, int, type | None]] = []
    for datas, versions, errors in chunks:
        assert len(datas) == len(versions) and all(0 <= i < len(datas) for i in errors)
        out.extend(
            (d, v, type(errors[i]) if i in errors else None)
            for i, (d, v) in enumerate(zip(datas, versions, strict=True))
        )
    return out


def test_version_columns_are_the_versioned_reads_one_run_per_multi_read(zk: KazooClient, tree: list[str]) -> None:
    """``iter_data_version_columns`` (a cold failover's state read): the versioned reads as columns, a
    multi-read at a time, with the failures (a missing znode) by index; the same through the fallback."""
    expected = _versions(MultiReader(zk).get_data_versions(tree))
    reader = MultiReader(zk, max_batch_bytes=4096, max_in_flight=2)
    chunks = list(reader.iter_data_version_columns(tree, size_hint=50))
    assert len(chunks) > 5 and _from_columns(chunks) == expected
    assert expected[tree.index("/d/missing")][2] is NoNodeError
    fallback = MultiReader(zk, use_multi_read=False, single_window=16)
    assert _from_columns(list(fallback.iter_data_version_columns(tree))) == expected
    assert list(reader.iter_data_version_columns([])) == []


def test_paths_that_encode_themselves_are_sent_as_they_encode(zk: KazooClient, tree: list[str]) -> None:
    """A ``paths`` with ``encoded`` (``EncodedPaths``) is asked for each request's run of paths,
    under the chroot, instead of each path being made and encoded."""
    runs: list[tuple[int, int]] = []

    class Encoding(LazyPaths):
        def encoded(self, start: int, stop: int, full: Callable[[str], str]) -> list[bytes]:
            runs.append((start, stop))
            return [full(p).encode() for p in self._items[start:stop]]

    reader = MultiReader(zk, max_batch_bytes=4096, max_in_flight=2)
    chunks = list(reader.iter_data_version_columns(Encoding(tree, str), size_hint=50))
    assert _from_columns(chunks) == _versions(MultiReader(zk).get_data_versions(tree))
    assert runs[0][0] == 0 and runs[-1][1] == len(tree) and len(runs) == len(chunks)
