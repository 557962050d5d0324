"""The cluster's own requests.

From the controller to every broker: LeaderAndIsr (roles), UpdateMetadata (the metadata cache),
StopReplica. Each is refused unless it carries this broker's epoch (STALE_BROKER_EPOCH: it was
meant for an earlier incarnation, or forged by a client that does not know it) and a controller
epoch no older than the newest seen (STALE_CONTROLLER_EPOCH: a deposed controller).
From brokers to the controller: AlterPartition, ControlledShutdown, and the operators' ElectLeaders
(NOT_CONTROLLER anywhere else). From anyone: OffsetForLeaderEpoch (followers, and consumers
validating their position after a leader change, KIP-320) and DescribeCluster.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from roost.broker.controller.core import ELECTION_PREFERRED, ControllerCore
from roost.broker.controller.shell import ControllerMoved, ControllerShell
from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.request import Request
from roost.broker.replica.fetcher import ReplicaFetchers
from roost.broker.replica.manager import ReplicaManager
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker.cluster")

NO_EPOCH = -1
NO_AUTHORIZED_OPERATIONS = -2147483648


class InterBrokerApi:
    """What the controller sends to this broker."""

    def __init__(self, replicas: ReplicaManager, metadata: MetadataCache, fetchers: ReplicaFetchers,
                 topic_config: Callable[[str], Awaitable[dict[str, Any]]],
                 topic_removed: Callable[[str], None]) -> None:
        self._topic_removed = topic_removed  # a deleted topic's group offsets go too
        self._replicas = replicas
        self._metadata = metadata
        self._fetchers = fetchers
        self._topic_config = topic_config

    def _stale(self, request: Request, what: str) -> ErrorCode | None:
        body = request.body
        if body.get("broker_epoch", -1) != self._replicas.broker_epoch:
            log.warning("%s from %s (controller %d, epoch %d) for broker epoch %d refused: this broker's "
                        "epoch is %d", what, request.client_host, body["controller_id"], body["controller_epoch"],
                        body.get("broker_epoch", -1), self._replicas.broker_epoch)
            return ErrorCode.STALE_BROKER_EPOCH
        if body["controller_epoch"] < max(self._replicas.controller_epoch, self._metadata.controller_epoch):
            log.warning("%s from controller %d of epoch %d refused: epoch %d seen", what, body["controller_id"],
                        body["controller_epoch"], max(self._replicas.controller_epoch, self._metadata.controller_epoch))
            return ErrorCode.STALE_CONTROLLER_EPOCH
        return None

    async def handle_leader_and_isr(self, request: Request) -> dict[str, Any]:
        stale = self._stale(request, "LeaderAndIsr")
        if stale is not None:
            return {"error_code": stale, "topics": []}
        for leader in request.body["live_leaders"]:
            self._fetchers.learn_endpoint(leader["broker_id"], leader["host_name"], leader["port"])
        return await self._replicas.leader_and_isr(request.body, self._topic_config)

    def handle_update_metadata(self, request: Request) -> dict[str, Any]:
        stale = self._stale(request, "UpdateMetadata")
        if stale is not None:
            return {"error_code": stale}
        before = set(self._metadata.topic_ids)
        code = self._metadata.apply_update_metadata(request.body)
        for topic in before - set(self._metadata.topic_ids):
            self._topic_removed(topic)
        for broker in self._metadata.brokers.values():
            self._fetchers.learn_endpoint(broker.node_id, broker.host, broker.port)
        return {"error_code": code}

    async def handle_stop_replica(self, request: Request) -> dict[str, Any]:
        stale = self._stale(request, "StopReplica")
        if stale is not None:
            return {"error_code": stale, "partition_errors": []}
        return await self._replicas.stop_replicas(request.body)

    def handle_offset_for_leader_epoch(self, request: Request) -> dict[str, Any]:
        topics_out = []
        for topic in request.body["topics"]:
            partitions_out = []
            for wanted in topic["partitions"]:
                index = wanted["partition"]
                partition, error = self._replicas.leader_partition(topic["topic"], index)
                epoch, end = -1, -1
                current = wanted.get("current_leader_epoch", NO_EPOCH)
                if partition is not None:
                    if current != NO_EPOCH and current < partition.leader_epoch:
                        error = ErrorCode.FENCED_LEADER_EPOCH
                    elif current != NO_EPOCH and current > partition.leader_epoch:
                        error = ErrorCode.UNKNOWN_LEADER_EPOCH
                    else:
                        epoch, end = partition.end_offset_for_epoch(wanted["leader_epoch"])
                partitions_out.append({"error_code": error, "partition": index, "leader_epoch": epoch,
                                       "end_offset": end})
            topics_out.append({"topic": topic["topic"], "partitions": partitions_out})
        return {"throttle_time_ms": 0, "topics": topics_out}


class ControllerApi:
    """What brokers and operators send to the controller."""

    def __init__(self, shell: ControllerShell, metadata: MetadataCache, cluster_id: Callable[[], str]) -> None:
        self._shell = shell
        self._metadata = metadata
        self._cluster_id = cluster_id

    async def _call(self, action: Callable[[ControllerCore, int], None]) -> dict[str, Any] | None:
        try:
            return await self._shell.call(action)
        except ControllerMoved:
            return None

    async def handle_alter_partition(self, request: Request) -> dict[str, Any]:
        version = request.version
        answer = await self._call(lambda core, token: core.alter_partition(token, request.body, version))
        if answer is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}
        return answer

    async def handle_controlled_shutdown(self, request: Request) -> dict[str, Any]:
        body = request.body
        answer = await self._call(lambda core, token: core.controlled_shutdown(
            token, body["broker_id"], body.get("broker_epoch", -1)))
        if answer is None:
            return {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}
        return answer

    async def handle_elect_leaders(self, request: Request) -> dict[str, Any]:
        body = request.body
        election = body.get("election_type", ELECTION_PREFERRED)
        wanted = None if body["topic_partitions"] is None else [
            (t["topic"], p) for t in body["topic_partitions"] for p in t["partitions"]]
        answer = await self._call(lambda core, token: core.elect_leaders(token, election, wanted))
        if answer is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "replica_election_results": []}
        return answer

    async def handle_alter_partition_reassignments(self, request: Request) -> dict[str, Any]:
        wanted = {(t["name"], p["partition_index"]): (list(p["replicas"]) if p["replicas"] is not None else None)
                  for t in request.body["topics"] for p in t["partitions"]}
        answer = await self._call(lambda core, token: core.reassign(token, wanted))
        if answer is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                    "error_message": "this broker is not the controller", "responses": []}
        return answer

    async def handle_list_partition_reassignments(self, request: Request) -> dict[str, Any]:
        topics = request.body.get("topics")
        wanted = None if topics is None else [(t["name"], p) for t in topics for p in t["partition_indexes"]]

        def listing(core: ControllerCore, token: int) -> None:
            core.reply(token, core.list_reassignments(wanted))

        answer = await self._call(listing)
        if answer is None:
            return {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER,
                    "error_message": "this broker is not the controller", "topics": []}
        return answer

    def handle_describe_cluster(self, request: Request) -> dict[str, Any]:
        metadata = self._metadata
        return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None,
                "endpoint_type": 1, "cluster_id": self._cluster_id(), "controller_id": metadata.controller_id,
                "brokers": [{"broker_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
                            for b in sorted(metadata.client_brokers(request.listener), key=lambda e: e.node_id)],
                "cluster_authorized_operations": NO_AUTHORIZED_OPERATIONS}
