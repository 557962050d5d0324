"""The broker: builds its services, routes each API to the handler that needs them, and starts and
stops the Kafka listener with them. This is the one place that knows every part."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from functools import partial
from pathlib import Path

from roost.broker.connection import ConnectionLimits, KafkaConnection
from roost.broker.dispatcher import Dispatcher, advertised_versions, describe_counts
from roost.broker.group.service import GroupService, offsets_topic_configs
from roost.broker.handlers import admin, groups
from roost.broker.handlers.fetch import FetchApi
from roost.broker.handlers.metadata import ApiVersionsApi, MetadataApi
from roost.broker.handlers.offsets import OffsetsApi
from roost.broker.handlers.produce import ProduceApi
from roost.broker.log_manager import LogManager
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache
from roost.broker.metadata.catalog import OFFSETS_TOPIC, TopicCatalog
from roost.broker.producer_ids import ProducerIdAllocator
from roost.broker.replica.manager import ReplicaManager
from roost.broker.request import Handler
from roost.broker.topic_admin import TopicAdmin
from roost.config import BrokerConfig, parse_listener
from roost.log.files import atomic_write
from roost.wire.kafka import ApiKey

log = logging.getLogger("roost.broker")


def load_cluster_id(path: Path) -> str:
    """The cluster id, made once and kept (Kafka's meta.properties cluster.id)."""
    if path.exists():
        return json.loads(path.read_text())["cluster_id"]
    cluster_id = uuid.uuid4().hex[:22]
    atomic_write(path, json.dumps({"cluster_id": cluster_id}).encode())
    return cluster_id


def ensure_offsets_topic(admin: TopicAdmin, config: BrokerConfig) -> None:
    """A broker on its own creates `__consumer_offsets` at once (in a cluster the controller does)."""
    if admin.catalog.get(OFFSETS_TOPIC) is None:
        admin.create_topic(OFFSETS_TOPIC, config["offsets.topic.num.partitions"], offsets_topic_configs(config))


class Broker:
    def __init__(self, config: BrokerConfig, data_dir: Path, host: str, port: int) -> None:
        self.config = config
        self.host = host
        self.requested_port = port
        self.port = port
        self.broker_id: int = config["broker.id"]
        (data_dir / "meta").mkdir(parents=True, exist_ok=True)
        self.cluster_id = load_cluster_id(data_dir / "meta" / "cluster.json")
        self.metadata = MetadataCache()
        self.catalog = TopicCatalog(data_dir / "meta" / "topics.json")
        self.logs = LogManager(config, data_dir)
        self.replicas = ReplicaManager(self.broker_id, config, self.logs, self.metadata)
        self.topics = TopicAdmin(config, self.catalog, self.replicas)
        self.producer_ids = ProducerIdAllocator(data_dir / "meta" / "producer-id-block")
        self.groups = GroupService(config, self.replicas, self.metadata)
        ensure_offsets_topic(self.topics, config)
        self.topics.on_delete(self.groups.forget_topic)
        self.advertised_versions = advertised_versions()
        self._dispatcher = Dispatcher(self._routes(), self.advertised_versions)
        self._limits = ConnectionLimits(
            max_frame_bytes=config["socket.request.max.bytes"],
            max_inflight_requests=config["queued.max.requests"],
            max_buffered_bytes=config["connection.max.buffered.bytes"],
        )
        self._connections: set[KafkaConnection] = set()
        self._server: asyncio.Server | None = None

    def _routes(self) -> dict[ApiKey, Handler]:
        auto_create = self.topics.auto_create if self.config["auto.create.topics.enable"] else None
        produce = ProduceApi(self.replicas, self.metadata, auto_create)
        fetch = FetchApi(self.replicas, self.metadata)
        offsets = OffsetsApi(self.replicas)
        metadata = MetadataApi(self.metadata, self.metadata, self.cluster_id, auto_create)
        versions = ApiVersionsApi(self.advertised_versions)
        admin_ctx = admin.AdminContext(self.broker_id, self.config, self.topics, self.metadata, self.producer_ids)
        group_ctx = groups.GroupContext(
            self.groups, lambda topic, index: self.metadata.partition(topic, index) is not None)
        return {
            ApiKey.PRODUCE: produce.handle,
            ApiKey.FETCH: fetch.handle,
            ApiKey.LIST_OFFSETS: offsets.handle_list_offsets,
            ApiKey.METADATA: metadata.handle,
            ApiKey.OFFSET_COMMIT: partial(groups.handle_offset_commit, group_ctx),
            ApiKey.OFFSET_FETCH: partial(groups.handle_offset_fetch, group_ctx),
            ApiKey.FIND_COORDINATOR: partial(groups.handle_find_coordinator, group_ctx),
            ApiKey.JOIN_GROUP: partial(groups.handle_join_group, group_ctx),
            ApiKey.HEARTBEAT: partial(groups.handle_heartbeat, group_ctx),
            ApiKey.LEAVE_GROUP: partial(groups.handle_leave_group, group_ctx),
            ApiKey.SYNC_GROUP: partial(groups.handle_sync_group, group_ctx),
            ApiKey.DESCRIBE_GROUPS: partial(groups.handle_describe_groups, group_ctx),
            ApiKey.LIST_GROUPS: partial(groups.handle_list_groups, group_ctx),
            ApiKey.API_VERSIONS: versions.handle,
            ApiKey.CREATE_TOPICS: partial(admin.handle_create_topics, admin_ctx),
            ApiKey.DELETE_TOPICS: partial(admin.handle_delete_topics, admin_ctx),
            ApiKey.DELETE_RECORDS: offsets.handle_delete_records,
            ApiKey.INIT_PRODUCER_ID: partial(admin.handle_init_producer_id, admin_ctx),
            ApiKey.DESCRIBE_CONFIGS: partial(admin.handle_describe_configs, admin_ctx),
            ApiKey.CREATE_PARTITIONS: partial(admin.handle_create_partitions, admin_ctx),
        }

    # lifecycle --------------------------------------------------------------------------------
    async def start(self) -> tuple[str, int]:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._new_connection, self.host, self.requested_port,
                                                reuse_address=True, backlog=1024)
        sockname = self._server.sockets[0].getsockname()
        self.port = sockname[1]
        # A single broker is its own controller and the only live broker.
        self.metadata.set_brokers([BrokerEndpoint(self.broker_id, *self.advertised_address)], self.broker_id)
        self.logs.start_upkeep()
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
        await self.logs.stop_upkeep()
        await self.replicas.close()
        if self._server is not None:
            await self._server.wait_closed()
        log.info("broker %d stopped; requests served: %s", self.broker_id,
                 describe_counts(self._dispatcher.request_counts))

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Where clients are told to connect: `advertised.listeners`, else where we listen."""
        return parse_listener(self.config["advertised.listeners"]) or (self.host, self.port)

    def _new_connection(self) -> KafkaConnection:
        connection = KafkaConnection(self._dispatcher, self._limits, self._connections.discard)
        if len(self._connections) >= self.config["max.connections"]:
            # Accept and drop at once: the client sees a closed socket and backs off.
            connection.reject_reason = f"max.connections reached ({len(self._connections)} open)"
        self._connections.add(connection)
        return connection
