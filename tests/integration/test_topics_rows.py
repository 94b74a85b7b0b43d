"""``/clusters/<c>/topics.json``: the topics list's visible page, as ``live.js`` refetches it (real Redis snapshot)."""

from __future__ import annotations

from django.test import Client

from tests.integration.test_cluster_pages import NAME, alice, pytestmark, snapshot  # noqa: F401


def test_it_returns_one_sorted_filtered_page_with_the_cells_the_page_shows(snapshot: None, alice: Client) -> None:  # noqa: F811
    body = alice.get(f"/clusters/{NAME}/topics.json?sort=partitions&dir=desc&per_page=25").json()
    assert (body["total"], body["page"], body["pages"], body["per_page"], body["seq"], body["gen"]) == (
        2,
        1,
        1,
        25,
        5,
        "g",
    )
    assert [r["name"] for r in body["rows"]] == ["orders", "tiny"]
    orders = body["rows"][0]
    assert orders == {
        "name": "orders",
        "url": f"/clusters/{NAME}/topics/orders/",
        "deleting": False,
        "partitions": 60,
        "rf": 2,
        "offline": 20,  # broker 3 (down) led 20 of them
        "urp": 0,
        "umi": 0,
        "nonpref": 0,
        "reassigning": 0,
        "preferred_percent": 100.0,
    }
    only = alice.get(f"/clusters/{NAME}/topics.json?only=offline&q=ORD").json()
    assert [r["name"] for r in only["rows"]] == ["orders"] and only["total"] == 1
    past = alice.get(f"/clusters/{NAME}/topics.json?per_page=25&page=9").json()
    assert (past["rows"], past["total"], past["pages"]) == ([], 2, 1)


def test_it_needs_a_login_and_a_known_cluster(snapshot: None, alice: Client) -> None:  # noqa: F811
    assert Client().get(f"/clusters/{NAME}/topics.json").status_code == 302
    assert alice.get("/clusters/nope/topics.json").status_code == 404
