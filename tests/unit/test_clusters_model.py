"""Cluster registration: connect-string validation, ensure_cluster, and the balance metrics."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError

from dashboard.clusters.connect import parse_connect_string
from dashboard.clusters.models import Cluster
from dashboard.clusters.skew import balance, preferred_percent


@pytest.mark.parametrize(
    ("text", "normalised"),
    [
        ("127.0.0.1:2181", "127.0.0.1:2181"),
        (" zk1:2181, zk2:2182/kafka ", "zk1:2181,zk2:2182/kafka"),
        ("zk:2181/", "zk:2181"),
        ("[::1]:2181/a/b-c_d.e", "[::1]:2181/a/b-c_d.e"),
    ],
)
def test_it_accepts_and_normalises_connect_strings(text: str, normalised: str) -> None:
    assert str(parse_connect_string(text)) == normalised


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("zk", "not host:port"),
        ("zk:0", "between 1 and 65535"),
        ("zk:abc", "between 1 and 65535"),
        ("bad host:2181", "not a valid host"),
        ("zk:2181/kafka/", "must not end with '/'"),
        ("zk:2181/ka fka", "invalid segment"),
        ("zk:2181//x", "invalid segment"),
        ("zk:2181/..", "invalid segment"),
    ],
)
def test_it_rejects_bad_connect_strings_clearly(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_connect_string(text)


@pytest.mark.django_db
def test_model_validation_reports_the_problem() -> None:
    cluster = Cluster(name="demo", zookeeper_connect="zk:99999/kafka")
    with pytest.raises(ValidationError) as info:
        cluster.full_clean()
    assert "between 1 and 65535" in str(info.value)


@pytest.mark.django_db
def test_ensure_cluster_is_idempotent_and_updates(capsys: pytest.CaptureFixture[str]) -> None:
    call_command("ensure_cluster", "--name", "demo", "--zookeeper", "zk1:2181/kafka", "--mode", "managed")
    call_command("ensure_cluster", "--name", "demo", "--zookeeper", "zk1:2181/kafka", "--mode", "managed")
    call_command("ensure_cluster", "--name", "demo", "--zookeeper", "zk2:2181/kafka", "--mode", "observed")
    assert Cluster.objects.count() == 1
    cluster = Cluster.objects.get()
    assert (cluster.zookeeper_connect, cluster.mode) == ("zk2:2181/kafka", "observed")
    out = capsys.readouterr().out
    assert "created" in out and "updated" in out


@pytest.mark.django_db
def test_ensure_cluster_refuses_bad_input() -> None:
    with pytest.raises(CommandError, match="zookeeper_connect"):
        call_command("ensure_cluster", "--name", "demo", "--zookeeper", "nonsense")
    with pytest.raises(CommandError, match="name"):
        call_command("ensure_cluster", "--name", "bad name!", "--zookeeper", "zk:2181")


def test_preferred_percent_is_cmak_s() -> None:
    assert preferred_percent(200, 30) == 85.0
    assert preferred_percent(0, 0) is None


def test_kafka_ui_skew_and_cmak_skewed_brokers() -> None:
    replicas = {1: 150, 2: 100, 3: 50}
    leaders = {1: 60, 2: 30, 3: 10}
    bal = balance(replicas, leaders, live=[1, 2, 3], partitions=100)
    by_id = {b.broker: b for b in bal.brokers}
    assert by_id[1].replicas_skew == 50.0 and by_id[3].replicas_skew == -50.0  # mean 100
    assert by_id[1].leaders_skew == 80.0  # mean 33.3
    assert (by_id[1].skewed, by_id[2].skewed, by_id[3].skewed) == (True, False, False)  # > ceil(300/3)
    assert (by_id[1].leader_skewed, by_id[2].leader_skewed) == (True, False)  # > ceil(100/3) = 34
    assert bal.brokers_skew == 33.3 and bal.brokers_leader_skew == 33.3 and bal.brokers_spread == 100.0


def test_skew_is_hidden_below_fifty_partitions_like_kafka_ui() -> None:
    bal = balance({1: 10, 2: 2}, {1: 5, 2: 1}, live=[1, 2], partitions=12)
    assert all(b.replicas_skew is None and b.leaders_skew is None for b in bal.brokers)


def test_dead_brokers_hosting_replicas_are_listed_without_skew() -> None:
    bal = balance({1: 60, 2: 60, 3: 60}, {1: 30, 2: 30}, live=[1, 2], partitions=60)
    dead = next(b for b in bal.brokers if b.broker == 3)
    assert not dead.live and dead.replicas_skew is None
