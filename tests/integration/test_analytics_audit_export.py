"""``manage.py export_audit``: the audit table as daily JSON lines per cluster, the analytics job's second input."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from dashboard.analytics.audit_export import export_actions
from dashboard.audit.models import Action

pytestmark = [pytest.mark.django_db]


def _make(pk: int, cluster: str, kind: str, created: datetime, **fields: Any) -> Action:
    action = Action.objects.create(
        id=pk, username="ann", cluster=cluster, kind=kind, status=fields.pop("status", "succeeded"), **fields
    )
    Action.objects.filter(pk=pk).update(created=created)
    action.refresh_from_db()
    return action


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def actions() -> None:
    _make(
        1,
        "alpha",
        Action.Kind.REASSIGNMENT,
        datetime(2024, 3, 1, 9, 59, 58, tzinfo=UTC),
        parameters={"partitions": [{"topic": "orders", "partition": 1, "replicas": [3, 1], "origin": [3, 2]}]},
        reason="rack move",
        finished=datetime(2024, 3, 1, 9, 59, 59, tzinfo=UTC),
        controller_epoch=4,
    )
    _make(
        2,
        "alpha",
        Action.Kind.PREFERRED_ELECTION,
        datetime(2024, 3, 1, 23, 59, 59, 500000, tzinfo=UTC),
        parameters={"scope": "topic", "topic": "orders", "partition": None, "broker": None},
        preview={"electable": [{"topic": "orders", "partition": 0}, {"topic": "orders", "partition": 2}]},
    )
    _make(3, "alpha", Action.Kind.REASSIGNMENT, datetime(2024, 3, 2, 0, 0, 1, tzinfo=UTC), status="rejected")
    _make(4, "beta", Action.Kind.CONTROLLED_SHUTDOWN, datetime(2024, 3, 1, 12, 0, tzinfo=UTC), parameters={"broker": 2})
    _make(5, "", Action.Kind.LOGIN, datetime(2024, 3, 1, 8, 0, tzinfo=UTC))


def test_it_writes_one_file_per_cluster_and_day_field_by_field(actions: None, tmp_path: Path) -> None:
    result = export_actions(tmp_path)
    assert (result.actions, result.files, sorted(result.clusters)) == (4, 3, ["alpha", "beta"])
    day1 = _lines(tmp_path / "alpha" / "actions-2024-03-01.jsonl")
    assert [a["id"] for a in day1] == [1, 2]  # in creation order; the login has no cluster
    move, election = day1
    assert move == {
        "id": 1,
        "cluster": "alpha",
        "kind": "reassignment",
        "status": "succeeded",
        "username": "ann",
        "created_ms": datetime(2024, 3, 1, 9, 59, 58, tzinfo=UTC).timestamp() * 1000.0,
        "started_ms": None,
        "finished_ms": datetime(2024, 3, 1, 9, 59, 59, tzinfo=UTC).timestamp() * 1000.0,
        "duration_ms": None,
        "controller_epoch": 4,
        "reason": "rack move",
        "partitions": [{"topic": "orders", "partition": 1, "replicas": [3, 1]}],
        "parameters": json.dumps(
            {"partitions": [{"origin": [3, 2], "partition": 1, "replicas": [3, 1], "topic": "orders"}]}, sort_keys=True
        ),
    }
    # A preferred election names the partitions its preview submitted, not its scope.
    assert election["partitions"] == [
        {"topic": "orders", "partition": 0, "replicas": None},
        {"topic": "orders", "partition": 2, "replicas": None},
    ]
    assert [a["id"] for a in _lines(tmp_path / "alpha" / "actions-2024-03-02.jsonl")] == [3]
    shutdown = _lines(tmp_path / "beta" / "actions-2024-03-01.jsonl")
    assert [(a["kind"], a["partitions"]) for a in shutdown] == [("controlled_shutdown", [])]


def test_a_rerun_replaces_files_and_since_limits_the_days(actions: None, tmp_path: Path) -> None:
    export_actions(tmp_path)
    before = (tmp_path / "alpha" / "actions-2024-03-01.jsonl").read_text()
    stale = tmp_path / "alpha" / "actions-2024-03-05.jsonl"
    stale.write_text('{"id": 99}\n')  # a day whose actions retention has since deleted
    result = export_actions(tmp_path, since=date(2024, 3, 2), clusters=["alpha"])
    assert (result.actions, result.files, result.removed_files) == (1, 1, 1)
    assert not stale.exists()
    assert (tmp_path / "alpha" / "actions-2024-03-01.jsonl").read_text() == before  # before --since: kept
    again = export_actions(tmp_path)
    assert again.actions == 4 and (tmp_path / "alpha" / "actions-2024-03-01.jsonl").read_text() == before
    assert not list(tmp_path.rglob(".*.tmp"))


def test_the_command_exports_and_rejects_bad_input_clearly(actions: None, tmp_path: Path) -> None:
    out = StringIO()
    call_command("export_audit", "--since", "2024-03-01", "--out", str(tmp_path), "--cluster", "beta", stdout=out)
    assert "exported 1 action(s) of 1 cluster(s) into 1 daily file(s)" in out.getvalue()
    assert [p.name for p in tmp_path.iterdir()] == ["beta"]
    with pytest.raises(CommandError, match="not a date"):
        call_command("export_audit", "--since", "2024-13-01", "--out", str(tmp_path / "x"))
    with pytest.raises(CommandError, match="not a cluster name"):
        call_command("export_audit", "--out", str(tmp_path / "y"), "--cluster", "../etc")
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
