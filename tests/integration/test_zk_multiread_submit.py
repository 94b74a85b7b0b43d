"""``MultiReader.submit_data``: reads sent at once and collected later (a standby streaming what
changed) return exactly ``get_data``'s results, split under the byte budget, in order, with a
missing path's NoNode in its place; interleaved with other calls on the same client."""

from __future__ import annotations

import threading

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from controller_core.zk.multiread import DataResult, MultiReader


def _comparable(results: list[DataResult]) -> list[tuple[bytes | None, int | None, type | None]]:
    return [(r.data, None if r.stat is None else r.stat.version, type(r.error) if r.error else None) for r in results]


def test_submitted_reads_return_what_get_data_returns(zk: KazooClient) -> None:
    zk.ensure_path("/s")
    paths = []
    for i in range(300):
        zk.create(f"/s/n{i}", b"x" * (i % 50))
        paths.append(f"/s/n{i}")
    paths.insert(150, "/s/missing")
    reader = MultiReader(zk, max_batch_bytes=4096)  # several requests per submit
    first = reader.submit_data(paths[:200], size_hint=16)
    second = reader.submit_data(paths[200:], size_hint=16)
    requests = reader.counters.requests
    zk.set("/s/n0", b"changed")  # sent after both submits: neither read sees it
    assert requests > 3
    # Each says when its last request (so all of them: a session is answered in order) is in.
    called = threading.Event()
    second.when_ready(called.set)
    assert called.wait(10) and second.ready() and first.ready()
    late: list[bool] = []
    first.when_ready(lambda: late.append(True))  # already in: called at once
    assert late
    got = first() + second()
    expected = MultiReader(zk, use_multi_read=False).get_data(paths)
    assert isinstance(got[150].error, NoNodeError)
    assert got[0].data == b""  # read before the set above was sent
    assert _comparable(got[1:]) == _comparable(expected[1:])
    assert reader.submit_data([])() == []


def test_without_multi_read_a_submit_reads_singly(zk: KazooClient) -> None:
    zk.create("/one", b"1")
    reader = MultiReader(zk, use_multi_read=False)
    results = reader.submit_data(["/one", "/none"])()
    assert results[0].data == b"1" and isinstance(results[1].error, NoNodeError)
    assert reader.submit_data(["/one"]).ready()  # nothing out: the call reads
    assert reader.counters.single_reads == 2
