"""The topic admin JSON API (admin role): create a topic, add partitions, delete a topic.

Writes Kafka's own layout exactly as ``kafka-topics`` does in ZooKeeper mode, and nothing else:
``/config/topics/<t>`` then ``/brokers/topics/<t>`` (create), a version-checked rewrite of
``/brokers/topics/<t>`` (add partitions), ``/admin/delete_topics/<t>`` (delete). The controller does
the rest (partition states, leaders, the deletion itself). Validation is Kafka's, in the pure
``controller_core.topic_validation``; every request is audited, refused ones included.

Request bodies are JSON objects; besides the operation's fields (see ``topic_validation``) each takes
``reason`` (required) and an optional ``idempotency_key`` (or the ``Idempotency-Key`` header): a
repeat with a key already used for the same operation by the same user is answered with the first
result and has no second effect. ZooKeeper's own conditions (create-if-absent, versioned set,
delete marker) make a double effect impossible even without a key.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from typing import Any, Final

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_POST
from kazoo.exceptions import BadVersionError, NoAuthError, NoNodeError

from controller_core.errors import ZkOperationError
from controller_core.model import ReplicaAssignment
from controller_core.ports import ZkCode
from controller_core.topic_validation import (
    AddPartitionsPlan,
    ClusterFacts,
    CreatePlan,
    DeletePlan,
    TopicRequestError,
    validate_add_partitions,
    validate_create,
    validate_delete,
)
from controller_core.zk import codecs, paths
from controller_core.zk.store import ZkStore
from dashboard.accounts import roles
from dashboard.actions.zk import cluster_store
from dashboard.audit.models import Action
from dashboard.clusters.models import Cluster

logger = logging.getLogger(__name__)

MAX_REASON: Final = 2000
_KEY: Final = re.compile(r"[A-Za-z0-9_.:-]{1,100}")


class Refused(Exception):
    def __init__(self, status: int, message: str, code: str = "INVALID_REQUEST") -> None:
        super().__init__(message)
        self.status, self.message, self.code = status, message, code


def _audit(request: HttpRequest, cluster: str, kind: str, **fields: Any) -> Action:
    user = request.user if request.user.is_authenticated else None
    return Action.objects.create(user=user, username=request.user.get_username(), cluster=cluster, kind=kind, **fields)


def _body(request: HttpRequest) -> tuple[dict[str, Any], str, str]:
    """The JSON object without ``reason``/``idempotency_key``, the reason and the key."""
    try:
        body = json.loads(request.body or b"null")
    except (ValueError, UnicodeDecodeError) as exc:
        raise Refused(400, f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise Refused(400, "the body must be a JSON object")
    reason = body.pop("reason", "")
    if not isinstance(reason, str) or not reason.strip():
        raise Refused(400, "a reason is required")
    if len(reason) > MAX_REASON:
        raise Refused(400, f"the reason is longer than {MAX_REASON} characters")
    key = body.pop("idempotency_key", None) or request.headers.get("Idempotency-Key", "")
    if not isinstance(key, str) or (key and not _KEY.fullmatch(key)):
        raise Refused(400, "idempotency_key must be 1-100 characters of letters, digits, '_', '.', ':' and '-'")
    return body, reason.strip(), key


def _facts(store: ZkStore, topic: str | None = None) -> ClusterFacts:
    topics = frozenset(store.get_all_topics())
    reassignment = store.get_partition_reassignment() or {}
    assignments: dict[str, dict[int, list[int]]] = {}
    if topic is not None and topic in topics:
        read = store.get_replica_assignments([topic]).get(topic)
        if read is not None:
            assignments[topic] = {p: list(a.replicas) for p, a in read.partitions.items()}
    return ClusterFacts(
        topics=topics,
        live_brokers=frozenset(store.get_broker_ids()),
        marked_for_deletion=frozenset(store.get_topic_deletions()),
        reassigning=frozenset(tp.topic for tp in reassignment),
        assignments=assignments,
    )


def _replay(request: HttpRequest, cluster: str, kind: str, key: str) -> JsonResponse | None:
    if not key:
        return None
    first = (
        Action.objects.filter(cluster=cluster, kind=kind, idempotency_key=key, user_id=request.user.pk or 0)
        .exclude(status=Action.Status.REJECTED)
        .order_by("id")
        .first()
    )
    if first is None:
        return None
    _audit(
        request,
        cluster,
        Action.Kind.REQUEST_REJECTED,
        status=Action.Status.REJECTED,
        parameters={"path": request.path, "method": "POST", "idempotency_key": key, "replay_of": first.pk},
        error=f"replayed idempotency key {key!r}: answered with action #{first.pk}, nothing written",
        idempotency_key=key,
    )
    return JsonResponse({**first.outcome, "action": first.pk, "status": first.status, "replayed": True})


def _handle(
    request: HttpRequest,
    name: str,
    kind: str,
    topic: str | None,
    run: Callable[[ZkStore, dict[str, Any]], tuple[int, dict[str, Any]]],
) -> JsonResponse:
    cluster = get_object_or_404(Cluster, name=name)
    params: dict[str, Any] = {"topic": topic} if topic is not None else {}
    reason = key = ""
    try:
        if not roles.can_administer(request.user):
            raise Refused(
                403, f"your role ({roles.role_of(request.user) or 'none'}) may not manage topics: admins only"
            )
        body, reason, key = _body(request)
        params.update(body)
        replay = _replay(request, cluster.name, kind, key)
        if replay is not None:
            return replay
        try:
            with cluster_store(cluster.zookeeper_connect) as store:
                status, outcome = run(store, body)
        except TopicRequestError as exc:
            raise Refused(exc.status, str(exc), exc.error) from None
        except Refused:
            raise
        except NoAuthError:
            raise Refused(
                503,
                "ZooKeeper refused the write (NoAuth): the cluster's znodes have ACLs; give the dashboard the "
                "controller's identity in ZOOKEEPER_AUTH (docs/deployment.md)",
                "CLUSTER_AUTHORIZATION_FAILED",
            ) from None
        except Exception as exc:  # ZooKeeper unreachable, timeouts
            logger.warning("topic admin on %s failed: %s", cluster.name, exc)
            raise Refused(503, f"could not reach ZooKeeper: {exc.__class__.__name__} {exc}", "UNAVAILABLE") from None
    except Refused as refused:
        _audit(
            request,
            cluster.name,
            kind,
            status=Action.Status.REJECTED,
            parameters=_trim(params),
            reason=reason[:MAX_REASON],
            error=refused.message,
            idempotency_key=key,
        )
        return JsonResponse({"error": refused.message, "code": refused.code}, status=refused.status)
    action = _audit(
        request,
        cluster.name,
        kind,
        status=Action.Status.PENDING,
        parameters=_trim(params),
        reason=reason,
        outcome=outcome,
        idempotency_key=key,
    )
    return JsonResponse({**outcome, "action": action.pk, "status": action.status}, status=status)


def _trim(params: dict[str, Any]) -> dict[str, Any]:
    """Parameters as stored in the audit row; a huge explicit assignment is summarised."""
    text = json.dumps(params, default=str)
    return params if len(text) <= 20_000 else {"truncated": text[:20_000]}


# -- the three operations ---------------------------------------------------------------------------


def _create(store: ZkStore, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    plan: CreatePlan = validate_create(body, _facts(store))
    try:
        store.create_topic(plan.topic, plan.assignment, plan.config)
    except ZkOperationError as exc:
        if exc.code == ZkCode.NODE_EXISTS:
            raise Refused(409, f"topic '{plan.topic}' already exists", "TOPIC_ALREADY_EXISTS") from None
        raise
    assignment = {str(p): r for p, r in plan.assignment.items()}
    return 201, {"topic": plan.topic, "assignment": assignment, "config": plan.config}


def _add_partitions(topic: str) -> Callable[[ZkStore, dict[str, Any]], tuple[int, dict[str, Any]]]:
    def run(store: ZkStore, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        facts = _facts(store, topic)
        plan: AddPartitionsPlan = validate_add_partitions(topic, body, facts)
        path = paths.topic_path(plan.topic)
        try:
            data, stat = store.client.get(path)
            current = codecs.decode_topic_assignment(plan.topic, data)
            if {p: list(a.replicas) for p, a in current.partitions.items()} != dict(facts.assignments[plan.topic]):
                raise Refused(409, f"topic '{plan.topic}' changed while the request was checked; retry")
            merged = {**current.partitions, **{p: ReplicaAssignment.of(r) for p, r in plan.added.items()}}
            store.client.set(path, codecs.encode_topic_assignment(merged, current.topic_id), version=stat.version)
        except (BadVersionError, NoNodeError):
            raise Refused(409, f"topic '{plan.topic}' changed while the request was checked; retry") from None
        added = {str(p): r for p, r in plan.added.items()}
        return 200, {"topic": plan.topic, "partitions": len(merged), "added": added}

    return run


def _delete(topic: str) -> Callable[[ZkStore, dict[str, Any]], tuple[int, dict[str, Any]]]:
    def run(store: ZkStore, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        enabled = bool(settings.TOPIC_DELETION_ENABLED)
        plan: DeletePlan = validate_delete(topic, body, _facts(store, topic), deletion_enabled=enabled)
        if plan.already_pending:
            return 200, {"topic": plan.topic, "deletion": "already pending"}
        try:
            store.mark_topic_for_deletion(plan.topic)
        except ZkOperationError as exc:
            if exc.code == ZkCode.NODE_EXISTS:
                return 200, {"topic": plan.topic, "deletion": "already pending"}
            if exc.code == ZkCode.NO_NODE:
                raise Refused(404, f"topic '{plan.topic}' does not exist", "UNKNOWN_TOPIC_OR_PARTITION") from None
            raise
        return 202, {"topic": plan.topic, "deletion": "queued"}

    return run


@require_POST
def create_topic(request: HttpRequest, name: str) -> JsonResponse:
    return _handle(request, name, Action.Kind.TOPIC_CREATE, None, _create)


@require_POST
def add_partitions(request: HttpRequest, name: str, topic: str) -> JsonResponse:
    return _handle(request, name, Action.Kind.PARTITIONS_ADD, topic, _add_partitions(topic))


@require_POST
def delete_topic(request: HttpRequest, name: str, topic: str) -> JsonResponse:
    return _handle(request, name, Action.Kind.TOPIC_DELETE, topic, _delete(topic))
