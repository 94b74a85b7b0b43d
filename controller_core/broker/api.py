"""The broker's HTTP endpoint (docs/protocol.md): control requests, follower fetch, state, health.

One port serves both listeners the broker registers (PLAINTEXT for replication, CONTROL for the
controller). Until the broker has registered (and so knows its broker epoch) control requests and
fetches are answered 503, which the controller's channel retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from http import HTTPStatus
from typing import Any

from controller_core.broker.replica_manager import ReplicaManager
from controller_core.gc_policy import gc_paused
from controller_core.protocol.messages import (
    FETCH_PATH,
    HEALTH_PATH,
    LEADER_AND_ISR_PATH,
    STATE_PATH,
    STOP_REPLICA_PATH,
    UPDATE_METADATA_PATH,
    FetchRequest,
    LeaderAndIsrRequest,
    StopReplicaRequest,
    UpdateMetadataRequest,
    decode,
    encode,
)
from controller_core.protocol.server import HttpError, JsonHttpServer

logger = logging.getLogger(__name__)

StateView = Callable[[Mapping[str, str]], dict[str, Any]]
HealthView = Callable[[], tuple[bool, dict[str, Any]]]


class BrokerApi:
    """Routes the broker's paths to the replica manager and the agent's views.

    Example::

        api = BrokerApi(replica_manager, state=agent.state, health=agent.health)
        server = JsonHttpServer("127.0.0.1", 0, post=api.post_routes(), get=api.get_routes())
    """

    def __init__(self, replicas: ReplicaManager, *, state: StateView, health: HealthView) -> None:
        self._replicas = replicas
        self._state = state
        self._health = health

    def post_routes(self) -> dict[str, Callable[[bytes], bytes]]:
        return {
            LEADER_AND_ISR_PATH: self._leader_and_isr,
            STOP_REPLICA_PATH: self._stop_replica,
            UPDATE_METADATA_PATH: self._update_metadata,
            FETCH_PATH: self._fetch,
        }

    def get_routes(self) -> dict[str, Callable[[Mapping[str, str]], bytes]]:
        return {STATE_PATH: self._get_state, HEALTH_PATH: self._get_health}

    def serve(self, host: str, port: int) -> JsonHttpServer:
        """A bound (not yet started) server with these routes."""
        return JsonHttpServer(
            host, port, post=self.post_routes(), get=self.get_routes(), name=f"broker-{self._replicas.broker_id}-api"
        )

    def _require_registered(self) -> None:
        if not self._replicas.registered:
            raise HttpError(HTTPStatus.SERVICE_UNAVAILABLE, f"broker {self._replicas.broker_id} is not registered yet")

    # One collector pause spans decoding, handling and encoding: a 100,000-partition request builds
    # about a million objects, and every re-enabling in between would rescan all of them. A body
    # that does not decode raises MessageError (HTTP 400) before anything is applied.

    def _leader_and_isr(self, body: bytes) -> bytes:
        self._require_registered()
        with gc_paused():
            request = decode(body, LeaderAndIsrRequest, "LeaderAndIsr request")
            return encode(self._replicas.handle_leader_and_isr(request))

    def _stop_replica(self, body: bytes) -> bytes:
        self._require_registered()
        with gc_paused():
            request = decode(body, StopReplicaRequest, "StopReplica request")
            return encode(self._replicas.handle_stop_replica(request))

    def _update_metadata(self, body: bytes) -> bytes:
        self._require_registered()
        with gc_paused():
            request = decode(body, UpdateMetadataRequest, "UpdateMetadata request")
            return encode(self._replicas.handle_update_metadata(request))

    def _fetch(self, body: bytes) -> bytes:
        self._require_registered()
        return encode(self._replicas.handle_fetch(decode(body, FetchRequest, "fetch request")))

    def _get_state(self, query: Mapping[str, str]) -> bytes:
        return encode(self._state(query))

    def _get_health(self, query: Mapping[str, str]) -> bytes:
        healthy, detail = self._health()
        if not healthy:
            raise HttpError(HTTPStatus.SERVICE_UNAVAILABLE, str(detail.get("reason", "unhealthy")))
        return encode(detail)
