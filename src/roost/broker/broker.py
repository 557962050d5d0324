"""The broker: its state, its group coordinator, and the Kafka listener, started and stopped as one."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from pathlib import Path
from typing import Any

from roost.broker.connection import ConnectionLimits, KafkaConnection
from roost.broker.dispatcher import Dispatcher, advertised_versions, describe_counts
from roost.broker.group.service import GroupService
from roost.broker.partition import Partition
from roost.broker.state import BrokerState
from roost.broker.topics import TopicInfo, topic_name_problem
from roost.config import BrokerConfig, parse_listener
from roost.log.files import atomic_write
from roost.wire.kafka.errors import ErrorCode

log = logging.getLogger("roost.broker")


def load_cluster_id(path: Path) -> str:
    """The cluster id, made once and kept (Kafka's meta.properties cluster.id)."""
    if path.exists():
        return json.loads(path.read_text())["cluster_id"]
    cluster_id = uuid.uuid4().hex[:22]
    atomic_write(path, json.dumps({"cluster_id": cluster_id}).encode())
    return cluster_id


class Broker:
    def __init__(self, config: BrokerConfig, data_dir: Path, host: str, port: int) -> None:
        self.config = config
        self.host = host
        self.requested_port = port
        self.port = port
        (data_dir / "meta").mkdir(parents=True, exist_ok=True)
        self.cluster_id = load_cluster_id(data_dir / "meta" / "cluster.json")
        self.state = BrokerState(config, data_dir)
        self.groups = GroupService(self.state)
        self.broker_id: int = config["broker.id"]
        self.advertised_versions = advertised_versions()
        self._dispatcher = Dispatcher(self)
        self._limits = ConnectionLimits(
            max_frame_bytes=config["socket.request.max.bytes"],
            max_inflight_requests=config["queued.max.requests"],
            max_buffered_bytes=config["connection.max.buffered.bytes"],
        )
        self._connections: set[KafkaConnection] = set()
        self._server: asyncio.Server | None = None

    # lifecycle --------------------------------------------------------------------------------
    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_connection, self.host, self.requested_port,
                                                reuse_address=True, backlog=1024)
        sockname = self._server.sockets[0].getsockname()
        self.port = sockname[1]
        self.state.start_upkeep()
        self.groups.start()
        log.info("broker %d listening on %s:%d (cluster %s)", self.broker_id, self.host, self.port,
                 self.cluster_id)
        return self.host, self.port

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for connection in list(self._connections):
            connection.abort("broker shutting down")
        await self.groups.stop()
        await self.state.close()
        if self._server is not None:
            await self._server.wait_closed()
        log.info("broker %d stopped; requests served: %s", self.broker_id,
                 describe_counts(self._dispatcher.request_counts))

    def _new_connection(self) -> KafkaConnection:
        connection = KafkaConnection(self._dispatcher, self._limits, self._connections.discard)
        if len(self._connections) >= self.config["max.connections"]:
            # Accept and drop at once: the client sees a closed socket and backs off.
            connection.reject_reason = f"max.connections reached ({len(self._connections)} open)"
        self._connections.add(connection)
        return connection

    # questions handlers ask -------------------------------------------------------------------
    @property
    def auto_create_enabled(self) -> bool:
        return self.config["auto.create.topics.enable"]

    @property
    def controller_id(self) -> int:
        return self.broker_id

    def live_broker_ids(self) -> list[int]:
        return [self.broker_id]

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Where clients are told to connect: `advertised.listeners`, else where we listen."""
        return parse_listener(self.config["advertised.listeners"]) or (self.host, self.port)

    def broker_endpoints(self) -> list[dict[str, Any]]:
        host, port = self.advertised_address
        return [{"node_id": self.broker_id, "host": host, "port": port, "rack": None}]

    def coordinator_endpoint(self, group_id: str) -> tuple[int, str, int]:
        return self.broker_id, *self.advertised_address

    def in_sync_replicas(self, partition: Partition) -> list[int]:
        return [self.broker_id]

    def partition_metadata(self, topic: str, index: int) -> dict[str, Any]:
        partition = self.state.partition(topic, index)
        epoch = partition.leader_epoch if partition else 0
        return {"error_code": ErrorCode.NONE, "partition_index": index, "leader_id": self.broker_id,
                "leader_epoch": epoch, "replica_nodes": [self.broker_id], "isr_nodes": [self.broker_id],
                "offline_replicas": []}

    def auto_create_topic(self, name: str) -> TopicInfo | None:
        if topic_name_problem(name) is not None:
            return None
        existing = self.state.topics.get(name)
        if existing is not None:
            return existing
        return self.state.create_topic(name, self.config["num.partitions"], {})

    def partition_for_write(self, topic: str, index: int) -> tuple[Partition | None, ErrorCode]:
        partition = self.state.partition(topic, index)
        if partition is not None:
            return partition, ErrorCode.NONE
        if topic not in self.state.topics:
            problem = topic_name_problem(topic)
            if problem is not None:
                return None, ErrorCode.INVALID_TOPIC_EXCEPTION
            if self.auto_create_enabled:
                self.auto_create_topic(topic)
                partition = self.state.partition(topic, index)
                if partition is not None:
                    return partition, ErrorCode.NONE
        return None, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
