"""The broker: builds its services, routes each API to the handler that needs them, and starts and
stops them with the Kafka listener. This is the one place that knows every part.

Two ways to run: with `zookeeper.connect`, as a member of a cluster coordinated through
ZooKeeper (Kafka's ZooKeeper mode: registration, a controller elected among the brokers,
replication); without it, as a lone broker that holds the only replica of every partition and
keeps its topics in a local file.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import logging
import uuid
from collections import Counter
from collections.abc import Coroutine
from functools import partial
from pathlib import Path
from typing import Any

from roost.authorization_settings import UnknownAuthorizerError, authorizer_enabled, parse_super_users
from roost.broker.activity.effects import AsyncioShell
from roost.broker.admin.cluster_topics import ClusterTopicAdmin
from roost.broker.admin.controlled_shutdown import controlled_shutdown
from roost.broker.admin.dynamic_configs import DynamicBrokerConfigs, LocalDynamicConfigs, ZkDynamicConfigs
from roost.broker.admin.local_topics import TopicAdmin
from roost.broker.balance.auto import AutoBalancer
from roost.broker.balance.sampler import LoadSampler
from roost.broker.controller.core import ControllerSettings
from roost.broker.controller.shell import ControllerShell
from roost.broker.group.service import GroupService, offsets_topic_configs
from roost.broker.handlers import admin, consumer_groups, groups, share_groups, txn
from roost.broker.handlers import sasl as sasl_handlers
from roost.broker.handlers.acls import AclsApi
from roost.broker.handlers.api_rules import BROKER_ITSELF, guard
from roost.broker.handlers.client_quotas import ClientQuotasApi
from roost.broker.handlers.cluster import ControllerApi, InterBrokerApi
from roost.broker.handlers.describe import (
    DescribeProducersApi,
    DescribeTopicPartitionsApi,
    ListConfigResourcesApi,
)
from roost.broker.handlers.fetch import FetchApi
from roost.broker.handlers.log_dirs import LogDirsApi
from roost.broker.handlers.metadata import ApiVersionsApi, MetadataApi
from roost.broker.handlers.offsets import OffsetsApi
from roost.broker.handlers.open_operations import with_every_operation
from roost.broker.handlers.produce import ProduceApi
from roost.broker.handlers.share import ShareApi
from roost.broker.handlers.share_offsets import ShareOffsetsApi
from roost.broker.link.service import LinkService
from roost.broker.metadata.cache import BrokerEndpoint, MetadataCache
from roost.broker.metadata.catalog import (
    OFFSETS_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
    TopicCatalog,
)
from roost.broker.metadata.reachability import PeerReachability
from roost.broker.net import tls_handshakes
from roost.broker.net.connection import ConnectionLimits, KafkaConnection
from roost.broker.net.deadlines import IDLE, Deadlines
from roost.broker.net.dispatcher import ADVERTISED_VERSIONS, Dispatcher, clip_to_codec, describe_counts
from roost.broker.net.heap_trim import HeapTrimmer
from roost.broker.net.peer import PeerPool
from roost.broker.net.request import Handler
from roost.broker.net.request_memory import RequestMemory
from roost.broker.net.stats import BrokerStats
from roost.broker.quotas.connections import ConnectionQuotas
from roost.broker.quotas.core import ClientQuotas, QuotaConfigs
from roost.broker.quotas.store import LocalQuotaStore, QuotaStore, ZkQuotaStore
from roost.broker.quotas.throttle import Throttler
from roost.broker.replica.fetcher import ReplicaFetchers
from roost.broker.replica.isr import IsrManager
from roost.broker.replica.log_move import LogMoves
from roost.broker.replica.manager import ReplicaManager
from roost.broker.security.acl_store import AclStore, LocalAclStore, ZkAclStore
from roost.broker.security.authorizer import (
    Authorizer,
)
from roost.broker.security.listener import ListenerSecurity, build_listener_security, peer_security
from roost.broker.security.scram import ScramCredentialStore
from roost.broker.security.scram_zk import ZkScramCredentials
from roost.broker.share import coordinator as share_coordinator
from roost.broker.share.coordinator_records import ShareKey
from roost.broker.share.dead_letter_writer import DeadLetterWriter
from roost.broker.share.group_configs import GroupConfigStore
from roost.broker.share.group_configs_zk import GROUPS_ENTITY, ZkGroupConfigs
from roost.broker.share.leader import ShareLeader, StateStore
from roost.broker.share.persister import CoordinatorStateStore, Persister
from roost.broker.txn.producer_ids import ProducerIdAllocator, ZkProducerIdAllocator
from roost.broker.txn.service import TxnService, transaction_state_configs
from roost.broker.zk.config_change_listener import ConfigChangeListener
from roost.broker.zk.layout import (
    LOG_DIR_EVENT_PREFIX,
    LOG_DIR_EVENTS,
    BrokerRegistration,
    RegisteredEndpoint,
    TopicAssignment,
    encode_log_dir_event,
)
from roost.broker.zk.membership import ClusterMembership
from roost.clock import now_ms
from roost.config import (
    BrokerConfig,
    ConfigError,
    ListenerAddress,
    format_listener,
    parse_ip_overrides,
    parse_listeners,
)
from roost.log.files import atomic_write
from roost.storage.log_manager import LogManager
from roost.wire.kafka import ApiKey
from roost.zkclient import ZkClient

log = logging.getLogger("roost.broker")

# The cluster's own APIs and the versions this broker serves (the controller sends the newest).
CLUSTER_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    ApiKey.LEADER_AND_ISR: (5, 7),        # 5+: topic ids
    ApiKey.STOP_REPLICA: (3, 4),          # 3+: per-partition leader epochs
    ApiKey.UPDATE_METADATA: (5, 8),       # 5+: per-topic states
    ApiKey.CONTROLLED_SHUTDOWN: (0, 3),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 4),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.ALTER_PARTITION: (2, 3),       # 2+: topic ids
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # KIP-932's share-partition leader -> share coordinator state APIs, flexible; v1 of Write and
    # ReadSummary carries DeliveryCompleteCount (KIP-1226).
    ApiKey.INITIALIZE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE: (0, 0),
    ApiKey.WRITE_SHARE_GROUP_STATE: (0, 1),
    ApiKey.DELETE_SHARE_GROUP_STATE: (0, 0),
    ApiKey.READ_SHARE_GROUP_STATE_SUMMARY: (0, 1),
}


def load_cluster_id(path: Path) -> str | None:
    """The cluster id this broker's data belongs to (Kafka's meta.properties cluster.id)."""
    if path.exists():
        return json.loads(path.read_text())["cluster_id"]
    return None


def save_cluster_id(path: Path, cluster_id: str) -> None:
    atomic_write(path, json.dumps({"cluster_id": cluster_id}).encode())


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
        self.data_dir = data_dir
        (data_dir / "meta").mkdir(parents=True, exist_ok=True)
        self._cluster_id_path = data_dir / "meta" / "cluster.json"
        self.zookeeper = config["zookeeper.connect"]
        self.clustered = bool(self.zookeeper)
        self.cluster_id = load_cluster_id(self._cluster_id_path) or ""
        self.metadata = MetadataCache()
        self.clock_ms = now_ms  # the one clock every part of this broker is built with (roost.clock)
        self.logs = LogManager(config, data_dir, self.clock_ms)
        self.replicas = ReplicaManager(self.broker_id, config, self.logs, self.metadata, self.clock_ms)
        # A failed log directory takes its partitions offline (KAFKA_STORAGE_ERROR).
        self.logs.dirs.offline_listeners.append(lambda log_dir: self._log_dir_failed(log_dir.logs))
        self.log_moves = LogMoves(self.logs.dirs, int(config["replica.alter.log.dirs.io.max.bytes.per.second"]),
                                  self.logs.storage_failed)
        self.producer_ids: ProducerIdAllocator | ZkProducerIdAllocator = \
            ProducerIdAllocator(data_dir / "meta" / "producer-id-block")
        self._connections: set[KafkaConnection] = set()
        self._handshakes_given_up = tls_handshakes.OverdueLog()
        self._heap_trimmer = HeapTrimmer()  # after bursts of closed TLS connections (roost.broker.net.heap_trim)
        self._background: set[asyncio.Future[None]] = set()
        self._servers: list[asyncio.Server] = []
        # Every listener (`listeners`, else PLAINTEXT on host:port), the inter-broker one first.
        self.listener_addresses = parse_listeners(config["listeners"], allow_port_zero=True) or \
            [ListenerAddress("PLAINTEXT", host, port)]
        inter = config.inter_broker_listener() if config["listeners"] else self.listener_addresses[0].name
        self.listener_addresses.sort(key=lambda entry: entry.name != inter)
        self.inter_broker_listener = self.listener_addresses[0].name
        self.metadata.inter_broker_listener = self.inter_broker_listener
        protocols = config.protocol_map()
        self.scram = ScramCredentialStore()
        self.listener_security: dict[str, ListenerSecurity] = {
            entry.name: build_listener_security(config, entry.name, protocols.get(entry.name, "PLAINTEXT"), self.scram)
            for entry in self.listener_addresses}
        self.bound: dict[str, tuple[str, int]] = {}  # listener name -> where it listens
        inter_broker_security = peer_security(
            config, self.inter_broker_listener, self.listener_security[self.inter_broker_listener].protocol)
        self.peers = PeerPool(f"roost-broker-{self.broker_id}", inter_broker_security)
        # The replica fetchers' own connections, as Kafka's fetcher threads have theirs. A
        # leader answers a connection's requests in order, so a request that waits for
        # replication (WriteTxnMarkers, a share state write, anything acks=all) on a shared
        # connection would hold back the fetch response behind it that the replication needs:
        # a deadlock until the waiting request timed out (5 s stalls of a partition's high
        # watermark under a transactional producer).
        self.fetch_peers = PeerPool(f"roost-broker-{self.broker_id}-fetcher", inter_broker_security)
        self._limits = ConnectionLimits(
            max_frame_bytes=config["socket.request.max.bytes"],
            max_inflight_requests=config["queued.max.requests"],
            max_buffered_bytes=config["connection.max.buffered.bytes"],
            deadlines=Deadlines(idle_s=config["connections.max.idle.ms"] / 1000,
                                receive_s=config["request.receive.timeout.ms"] / 1000,
                                min_bytes_per_s=config["request.receive.min.bytes.per.second"]),
            request_memory=RequestMemory(config["queued.max.request.bytes"])
            if config["queued.max.request.bytes"] > 0 else None,
        )
        # Client quotas (roost.broker.quotas): one set of configs behind the throttler the
        # dispatcher consults, the per-address connection limits and the quota APIs.
        windows, window_ms = config["quota.window.num"], config["quota.window.size.seconds"] * 1000
        self.quota_configs = QuotaConfigs()
        self.client_quotas = ClientQuotas(self.quota_configs, windows, window_ms)
        self.connection_quotas = ConnectionQuotas(
            config["max.connections.per.ip"], parse_ip_overrides(config["max.connections.per.ip.overrides"]),
            self.quota_configs, windows, window_ms)
        self.quota_store: QuotaStore = LocalQuotaStore(self.quota_configs, data_dir / "meta" / "client-quotas.json")
        self.zk: ZkClient | None = None
        self.links: LinkService | None = None
        self.load_sampler: LoadSampler | None = None
        self.auto_balancer: AutoBalancer | None = None
        self.membership: ClusterMembership | None = None
        self.controller: ControllerShell | None = None
        self.fetchers: ReplicaFetchers | None = None
        self.isr: IsrManager | None = None
        self.reachability: PeerReachability | None = None
        self.config_changes: ConfigChangeListener | None = None
        self.scram_source: ZkScramCredentials | None = None
        self.topics: TopicAdmin | ClusterTopicAdmin
        self.broker_configs: DynamicBrokerConfigs
        self.authorizer = build_authorizer(config)
        self.acl_store: AclStore | None = None
        if self.clustered:
            self._build_cluster_parts()
        else:
            if not self.cluster_id:
                self.cluster_id = uuid.uuid4().hex[:22]
                save_cluster_id(self._cluster_id_path, self.cluster_id)
            # Loaded before the topics' logs open, so that they open with these defaults.
            self.broker_configs = LocalDynamicConfigs(config, self.broker_id, self.replicas,
                                                      data_dir / "meta" / "dynamic-configs.json")
            self.topics = TopicAdmin(config, TopicCatalog(data_dir / "meta" / "topics.json"), self.replicas)
            if self.authorizer is not None:
                self.acl_store = LocalAclStore(self.authorizer, data_dir / "meta" / "acls.json")
        self.groups = GroupService(config, self.replicas, self.metadata, self.clock_ms)
        # Share group configs (the GROUP resource): in ZooKeeper in a cluster, else in memory.
        self.zk_group_configs = ZkGroupConfigs(self.membership) if self.membership is not None else None
        self.group_configs = GroupConfigStore(
            config, self.zk_group_configs.persist if self.zk_group_configs is not None else None)
        self.groups.share_session_timeout = share_groups.session_timeouts(self.group_configs)
        if isinstance(self.topics, TopicAdmin):
            ensure_offsets_topic(self.topics, config)
            self.topics.on_delete(self.groups.forget_topic)
        else:
            # The first FindCoordinator creates __consumer_offsets (Kafka's way).
            self.groups.on_offsets_topic_missing = lambda: self.topics.auto_create(OFFSETS_TOPIC)
        self.txns = TxnService(config, self.replicas, self.metadata, self.peers, self.producer_ids.allocate,
                               self.clock_ms)
        # `__transaction_state` is created on the first FindCoordinator for a transactional id,
        # as Kafka does: brokers that never see a transaction pay nothing for it.
        if isinstance(self.topics, TopicAdmin):
            self.txns.on_topic_missing = self._create_transaction_state_here
        else:
            self.txns.on_topic_missing = lambda: self.topics.auto_create(TRANSACTION_STATE_TOPIC)
        # The share coordinator (`__share_group_state`, created on first use like
        # `__transaction_state`) and the share-partition leaders' client of it.
        self.share_coordinator = share_coordinator.ShareCoordinatorService(config, self.replicas, self.metadata)
        if isinstance(self.topics, TopicAdmin):
            self.share_coordinator.on_topic_missing = self._create_share_state_here
        else:
            self.share_coordinator.on_topic_missing = lambda: self.topics.auto_create(SHARE_GROUP_STATE_TOPIC)
        self.persister = Persister(self.broker_id, self.share_coordinator, self.metadata, self.peers)
        # The share-partitions this broker leads and the share sessions of their consumers; their
        # state is durable in the share coordinator (an acknowledgement is answered once written).
        self.share_state: StateStore = CoordinatorStateStore(self.persister)
        self.share_leader = ShareLeader(self.replicas, self.share_state, self.group_configs)
        self.share_leader.dead_letters = DeadLetterWriter(self.metadata, self.peers)
        self.share_api = ShareApi(self.replicas, self.metadata, self.share_leader, self.group_configs,
                                  config["group.share.max.share.sessions"])
        self.groups.on_share_group_deleted = self.share_leader.forget_group
        # Hot-path counts for Prometheus (roost.metrics.broker_metrics): kept only when metrics are on.
        self.stats: BrokerStats | None = BrokerStats() if config["metrics.port"] >= 0 else None
        self.advertised_versions = clip_to_codec(
            {**ADVERTISED_VERSIONS, **(CLUSTER_VERSIONS if self.clustered else {})})
        self._dispatcher = Dispatcher(self._routes(), self.advertised_versions, self.stats,
                                      Throttler(self.client_quotas, lambda principal: principal is BROKER_ITSELF,
                                                self.clock_ms))
        # What this broker asks of itself is served in-process as BROKER_ITSELF, a principal no
        # listener can give a client, on its inter-broker listener.
        self.peers.serve_locally(self.broker_id, lambda header, frame: self._dispatcher.route(
            header, frame, "local", -1, BROKER_ITSELF, self.inter_broker_listener))

    def _create_share_state_here(self) -> None:
        assert isinstance(self.topics, TopicAdmin)
        if self.topics.catalog.get(SHARE_GROUP_STATE_TOPIC) is None:
            partitions, _replication, configs = share_coordinator.share_state_topic_settings(self.config, 1)
            self.topics.create_topic(SHARE_GROUP_STATE_TOPIC, partitions, configs)

    def _create_transaction_state_here(self) -> None:
        assert isinstance(self.topics, TopicAdmin)
        if self.topics.catalog.get(TRANSACTION_STATE_TOPIC) is None:
            self.topics.create_topic(TRANSACTION_STATE_TOPIC, self.config["transaction.state.log.num.partitions"],
                                     transaction_state_configs(self.config))

    def _build_cluster_parts(self) -> None:
        config = self.config
        from roost.broker.zk.security import zk_client_options

        self.zk = ZkClient(self.zookeeper, session_timeout=int(config["zookeeper.session.timeout.ms"]) / 1000,
                           **zk_client_options(config))
        self.fetchers = ReplicaFetchers(self.broker_id, config, self.logs, self.fetch_peers, self.clock_ms)
        self.replicas.on_become_follower = self.fetchers.follow
        self.replicas.on_stop_following = self.fetchers.unfollow
        self.replicas.on_replica_damaged = self._replica_damaged
        self.isr = IsrManager(self.broker_id, config, self.replicas, self.metadata, self.peers)
        self.reachability = PeerReachability(self.broker_id, self.metadata)
        settings = ControllerSettings(
            unclean_leader_election=bool(config["unclean.leader.election.enable"]),
            auto_leader_rebalance=bool(config["auto.leader.rebalance.enable"]),
            imbalance_percentage=int(config["leader.imbalance.per.broker.percentage"]),
            imbalance_check_interval_ms=int(config["leader.imbalance.check.interval.seconds"]) * 1000)
        self.controller = ControllerShell(self.zk, self.broker_id, settings, self.peers,
                                          on_controller=self.metadata.learn_controller, clock_ms=self.clock_ms)
        self.membership = ClusterMembership(self.zk)
        self.config_changes = ConfigChangeListener(self.zk, self._config_changed)
        self.scram_source = ZkScramCredentials(self.zk, self.scram)
        self.quota_store = ZkQuotaStore(self.quota_configs, self.zk)
        self.broker_configs = ZkDynamicConfigs(config, self.broker_id, self.replicas, self.membership)
        # Ids a standalone run of this broker handed out stay taken.
        local_block = self.data_dir / "meta" / "producer-id-block"
        floor = int(local_block.read_text()) if local_block.exists() else 0
        self.producer_ids = ZkProducerIdAllocator(self.zk, self.broker_id, floor)
        self.topics = ClusterTopicAdmin(config, self.membership, self.controller, self.metadata)
        # Cluster links whose destination this cluster is (roost.broker.link).
        self.links = LinkService(self.broker_id, self.zk, self.replicas, self.metadata, self.topics, config,
                                 self.topics.topic_overrides, self.peers)
        # The balancer's load sample of this broker (roost.broker.balance.sampler).
        self.load_sampler = LoadSampler(self.broker_id, self.zk, self.replicas, config, self.clock_ms)
        # The automatic balancer (balancer.mode), acting while this broker is the active controller.
        self.auto_balancer = AutoBalancer(self.broker_id, self.zk, self.controller, config, self._plaintext_address,
                                          self.clock_ms)
        if self.authorizer is not None:
            self.acl_store = ZkAclStore(self.authorizer, self.zk)

    def _routes(self) -> dict[ApiKey, Handler]:
        auto_create = self.topics.auto_create if self.config["auto.create.topics.enable"] else None
        produce = ProduceApi(self.replicas, self.metadata, auto_create, self.stats)
        fetch = FetchApi(self.replicas, self.metadata, self.stats)
        offsets = OffsetsApi(self.replicas)
        metadata = MetadataApi(self.metadata, self.metadata, self.cluster_id_now, auto_create)
        versions = ApiVersionsApi(self.advertised_versions)
        log_dirs = LogDirsApi(self.replicas, self.logs.dirs, self.log_moves)
        admin_ctx = admin.AdminContext(self.broker_id, self.config, self.topics, self.metadata, self.producer_ids,
                                       self.broker_configs, self.listeners_in_force, self.group_configs)
        acls = AclsApi(self.acl_store)
        scram_api = sasl_handlers.ScramApi(self.scram, self.scram_source)
        quotas_api = ClientQuotasApi(self.quota_configs, self.quota_store)
        share_offsets = ShareOffsetsApi(self.groups, self.metadata, self.replicas, self.persister, self.peers,
                                        self.broker_id, self.share_leader.forget_group)
        group_ctx = groups.GroupContext(
            self.groups, lambda topic, index: self.metadata.partition(topic, index) is not None,
            share_coordinator_for=lambda key: self.share_coordinator.coordinator_for(
                ShareKey(key.group_id, key.topic_id, key.partition)),
            delete_share_state=share_offsets.delete_group_state)
        txn_ctx = txn.TxnContext(self.txns, self.groups, self.replicas,
                                 lambda topic, index: self.metadata.partition(topic, index) is not None)
        self.txns.broker_id, self.txns.local_markers = self.broker_id, partial(txn.write_txn_markers, txn_ctx)
        routes: dict[ApiKey, Handler] = {
            ApiKey.PRODUCE: produce.handle,
            ApiKey.FETCH: fetch.handle,
            ApiKey.LIST_OFFSETS: offsets.handle_list_offsets,
            ApiKey.METADATA: metadata.handle,
            ApiKey.OFFSET_COMMIT: partial(groups.handle_offset_commit, group_ctx),
            ApiKey.OFFSET_FETCH: partial(groups.handle_offset_fetch, group_ctx),
            ApiKey.FIND_COORDINATOR: partial(txn.handle_find_coordinator, txn_ctx, group_ctx),
            ApiKey.ADD_PARTITIONS_TO_TXN: partial(txn.handle_add_partitions_to_txn, txn_ctx),
            ApiKey.ADD_OFFSETS_TO_TXN: partial(txn.handle_add_offsets_to_txn, txn_ctx),
            ApiKey.END_TXN: partial(txn.handle_end_txn, txn_ctx),
            ApiKey.WRITE_TXN_MARKERS: partial(txn.handle_write_txn_markers, txn_ctx),
            **share_coordinator.state_routes(self.share_coordinator),
            ApiKey.TXN_OFFSET_COMMIT: partial(txn.handle_txn_offset_commit, txn_ctx),
            ApiKey.DESCRIBE_TRANSACTIONS: partial(txn.handle_describe_transactions, txn_ctx),
            ApiKey.LIST_TRANSACTIONS: partial(txn.handle_list_transactions, txn_ctx),
            ApiKey.JOIN_GROUP: partial(groups.handle_join_group, group_ctx),
            ApiKey.HEARTBEAT: partial(groups.handle_heartbeat, group_ctx),
            ApiKey.LEAVE_GROUP: partial(groups.handle_leave_group, group_ctx),
            ApiKey.SYNC_GROUP: partial(groups.handle_sync_group, group_ctx),
            ApiKey.DESCRIBE_GROUPS: partial(groups.handle_describe_groups, group_ctx),
            ApiKey.LIST_GROUPS: partial(groups.handle_list_groups, group_ctx),
            ApiKey.CONSUMER_GROUP_HEARTBEAT: partial(consumer_groups.handle_consumer_group_heartbeat, group_ctx),
            ApiKey.CONSUMER_GROUP_DESCRIBE: partial(consumer_groups.handle_consumer_group_describe, group_ctx),
            ApiKey.SHARE_GROUP_HEARTBEAT: partial(share_groups.handle_share_group_heartbeat, group_ctx,
                                                  self.group_configs),
            ApiKey.SHARE_GROUP_DESCRIBE: partial(share_groups.handle_share_group_describe, group_ctx),
            ApiKey.SHARE_FETCH: self.share_api.handle_fetch,
            ApiKey.SHARE_ACKNOWLEDGE: self.share_api.handle_acknowledge,
            ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS: share_offsets.handle_describe,
            ApiKey.ALTER_SHARE_GROUP_OFFSETS: share_offsets.handle_alter,
            ApiKey.DELETE_SHARE_GROUP_OFFSETS: share_offsets.handle_delete,
            ApiKey.API_VERSIONS: versions.handle,
            ApiKey.CREATE_TOPICS: partial(admin.handle_create_topics, admin_ctx),
            ApiKey.DELETE_TOPICS: partial(admin.handle_delete_topics, admin_ctx),
            ApiKey.DELETE_RECORDS: offsets.handle_delete_records,
            ApiKey.INIT_PRODUCER_ID: partial(txn.handle_init_producer_id, txn_ctx, admin_ctx),
            ApiKey.DESCRIBE_CONFIGS: partial(admin.handle_describe_configs, admin_ctx),
            ApiKey.CREATE_PARTITIONS: partial(admin.handle_create_partitions, admin_ctx),
            ApiKey.DELETE_GROUPS: partial(groups.handle_delete_groups, group_ctx),
            ApiKey.OFFSET_DELETE: partial(groups.handle_offset_delete, group_ctx),
            ApiKey.ALTER_CONFIGS: partial(admin.handle_alter_configs, admin_ctx),
            ApiKey.INCREMENTAL_ALTER_CONFIGS: partial(admin.handle_incremental_alter_configs, admin_ctx),
            ApiKey.DESCRIBE_LOG_DIRS: log_dirs.handle_describe,
            ApiKey.ALTER_REPLICA_LOG_DIRS: log_dirs.handle_alter,
            ApiKey.DESCRIBE_PRODUCERS: DescribeProducersApi(self.replicas, self.metadata).handle,
            ApiKey.DESCRIBE_TOPIC_PARTITIONS: DescribeTopicPartitionsApi(self.metadata).handle,
            ApiKey.DESCRIBE_ACLS: acls.handle_describe,
            ApiKey.CREATE_ACLS: acls.handle_create,
            ApiKey.DELETE_ACLS: acls.handle_delete,
            ApiKey.LIST_CONFIG_RESOURCES: ListConfigResourcesApi(self.metadata).handle,
            ApiKey.SASL_HANDSHAKE: sasl_handlers.handle_sasl_handshake,
            ApiKey.SASL_AUTHENTICATE: sasl_handlers.handle_sasl_authenticate,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: scram_api.handle_describe,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: scram_api.handle_alter,
            ApiKey.DESCRIBE_CLIENT_QUOTAS: quotas_api.handle_describe,
            ApiKey.ALTER_CLIENT_QUOTAS: quotas_api.handle_alter,
        }
        if self.clustered:
            assert self.fetchers is not None and self.controller is not None
            inter = InterBrokerApi(self.replicas, self.metadata, self.fetchers, self._topic_config,
                                   self.groups.forget_topic)
            control = ControllerApi(self.controller, self.metadata, self.cluster_id_now)
            routes.update({
                ApiKey.LEADER_AND_ISR: inter.handle_leader_and_isr,
                ApiKey.UPDATE_METADATA: inter.handle_update_metadata,
                ApiKey.STOP_REPLICA: inter.handle_stop_replica,
                ApiKey.OFFSET_FOR_LEADER_EPOCH: inter.handle_offset_for_leader_epoch,
                ApiKey.ALTER_PARTITION: control.handle_alter_partition,
                ApiKey.CONTROLLED_SHUTDOWN: control.handle_controlled_shutdown,
                ApiKey.ELECT_LEADERS: control.handle_elect_leaders,
                ApiKey.DESCRIBE_CLUSTER: control.handle_describe_cluster,
                ApiKey.ALTER_PARTITION_REASSIGNMENTS: control.handle_alter_partition_reassignments,
                ApiKey.LIST_PARTITION_REASSIGNMENTS: control.handle_list_partition_reassignments,
            })
        if self.authorizer is not None:
            routes = guard(routes, self.authorizer, self.metadata, auto_create is not None)
        else:  # asked for authorized operations, Kafka with no authorizer answers every one
            routes = with_every_operation(routes)
        return routes

    @property
    def request_counts(self) -> Counter[tuple[int, int]]:
        """Requests served so far, by (api key, version)."""
        return self._dispatcher.request_counts

    def requests_in_flight(self) -> int:
        """Requests of every client connection not answered yet (Kafka's request queue size)."""
        return sum(connection.requests_in_flight for connection in self._connections)

    def _log_dir_failed(self, logs_dir: Path) -> None:
        gone = self.replicas.take_offline(logs_dir)
        log.error("%d partitions went offline with log directory %s; the others keep serving", gone, logs_dir)
        if self.zk is not None:
            # Kafka's way: the controller hears of it, asks this broker which replicas are
            # offline (LeaderAndIsr answers KAFKA_STORAGE_ERROR for them) and moves their leaders.
            self._background.add(task := asyncio.ensure_future(self._notify_log_dir_failure()))
            task.add_done_callback(self._background.discard)

    def _replica_damaged(self) -> None:
        # A partition went offline here for a damaged batch: the controller learns it the way it
        # learns of a failed directory (it asks, the answer names the offline replica).
        self._background.add(task := asyncio.ensure_future(self._notify_log_dir_failure()))
        task.add_done_callback(self._background.discard)

    async def _notify_log_dir_failure(self) -> None:
        assert self.zk is not None
        try:
            await self.zk.create(f"{LOG_DIR_EVENTS}/{LOG_DIR_EVENT_PREFIX}", encode_log_dir_event(self.broker_id),
                                 sequential=True, makepath=True)
        except Exception:  # the controller learns it anyway at this broker's next LeaderAndIsr
            log.exception("could not tell the controller of the failed log directory")

    def cluster_id_now(self) -> str:
        return self.cluster_id

    async def _topic_config(self, topic: str) -> dict[str, object]:
        """A topic's configs from ZooKeeper, checked like CreateTopics checks them."""
        from roost.config import ConfigError, parse_topic_configs
        assert self.membership is not None
        raw = await self.membership.topic_config(topic)
        try:
            return parse_topic_configs(raw, f"/config/topics/{topic}")
        except ConfigError as error:
            log.warning("topic %s has configs this broker cannot use (%s); using the defaults", topic, error)
            return {}

    async def _config_changed(self, entity_path: str) -> None:
        """A config change notification named `entity_path`: a topic's partitions here, or all of
        them (this broker's dynamic configs), take the new configs."""
        if entity_path.startswith("topics/"):
            await self._topic_config_changed(entity_path.removeprefix("topics/"))
        elif entity_path.startswith(GROUPS_ENTITY) and self.zk_group_configs is not None:
            await self.zk_group_configs.reload(self.group_configs, entity_path.removeprefix(GROUPS_ENTITY))
        elif entity_path.startswith(("users/", "clients/", "ips/")):
            # A user's znode holds its SCRAM credentials and its quotas; clients/ and ips/ only quotas.
            if isinstance(self.quota_store, ZkQuotaStore):
                await self.quota_store.reload(entity_path)
            if entity_path.startswith("users/") and "/" not in entity_path.removeprefix("users/") \
                    and self.scram_source is not None:
                await self.scram_source.reload_user(entity_path.removeprefix("users/"))
        elif isinstance(self.broker_configs, ZkDynamicConfigs) and self.broker_configs.names_this_broker(entity_path):
            await self.broker_configs.reload()

    async def _topic_config_changed(self, topic: str) -> None:
        configs = await self._topic_config(topic)
        changed = self.replicas.apply_topic_configs(topic, configs)
        if changed:
            log.info("topic %s: %d partitions here now use configs %s", topic, changed, configs or "the defaults")

    @property
    def advertised_address(self) -> tuple[str, int]:
        """Where the inter-broker listener is advertised."""
        endpoint = self.advertised_endpoints()[0]
        return endpoint.host, endpoint.port

    def advertised_endpoints(self) -> list[RegisteredEndpoint]:
        """Every listener as clients are told to reach it (`advertised.listeners`, else where it
        listens), the inter-broker one first."""
        advertised = {entry.name: entry for entry in parse_listeners(self.config["advertised.listeners"])}
        found = []
        for entry in self.listener_addresses:
            host, port = self.bound.get(entry.name, (entry.host, entry.port))
            shown = advertised.get(entry.name)
            if shown is None and not self.config["listeners"] and advertised:
                shown = next(iter(advertised.values()))  # one advertised address for roost up's one listener
            if shown is not None:
                host, port = shown.host, shown.port
            found.append(RegisteredEndpoint(entry.name, host, port, self.listener_security[entry.name].protocol))
        return found

    def listeners_in_force(self) -> dict[str, str]:
        """`listeners` and `advertised.listeners` as they are in force, for DescribeConfigs."""
        bound = [format_listener(entry.name, *self.bound.get(entry.name, (entry.host, entry.port)))
                 for entry in self.listener_addresses]
        advertised = [format_listener(e.listener, e.host, e.port) for e in self.advertised_endpoints()]
        return {"listeners": ",".join(bound), "advertised.listeners": ",".join(advertised)}

    def _plaintext_address(self) -> tuple[str, int] | None:
        """Where this broker's first PLAINTEXT listener is bound (what its automatic balancer talks
        to); None if it has none."""
        for entry in self.listener_addresses:
            if self.listener_security[entry.name].protocol == "PLAINTEXT" and entry.name in self.bound:
                host, port = self.bound[entry.name]
                return ("127.0.0.1" if host in ("", "0.0.0.0") else "::1" if host == "::" else host), port
        return None

    # lifecycle --------------------------------------------------------------------------------
    async def start(self) -> tuple[str, int]:
        """Listen on every listener; returns where the first (the inter-broker one) listens."""
        loop = asyncio.get_running_loop()
        if not self.clustered:
            await self.quota_store.load_all()
        for entry in self.listener_addresses:
            security = self.listener_security[entry.name]
            tls = security.tls
            server = await loop.create_server(
                partial(self._new_connection, security), entry.host, entry.port, reuse_address=True, backlog=1024,
                ssl=tls.context if tls else None, ssl_handshake_timeout=tls.handshake_timeout_s if tls else None)
            self._servers.append(server)
            self.bound[entry.name] = (entry.host, server.sockets[0].getsockname()[1])
            log.info("listener %s (%s) on %s:%d", entry.name, security.protocol, *self.bound[entry.name])
        self.host, self.port = self.bound[self.listener_addresses[0].name]
        if self.clustered:
            await self._join_cluster()
        else:
            if self.acl_store is not None:
                await self.acl_store.start()
            # A lone broker is its own controller and the only live broker.
            endpoints = self.advertised_endpoints()
            self.metadata.set_brokers([BrokerEndpoint(
                self.broker_id, endpoints[0].host, endpoints[0].port, None,
                tuple((e.listener, e.host, e.port) for e in endpoints))], self.broker_id)
        self.logs.start_upkeep()
        self.groups.start()
        self.txns.start()
        self.share_coordinator.start()
        log.info("broker %d listening on %s:%d (cluster %s)", self.broker_id, self.host, self.port,
                 self.cluster_id)
        return self.host, self.port

    async def _join_cluster(self) -> None:
        assert self.zk is not None and self.controller is not None and self.isr is not None
        assert self.fetchers is not None and self.membership is not None
        await self.zk.start()
        await self.zk.ensure_chroot()
        if self.acl_store is not None:
            await self.acl_store.start()
        endpoints = self.advertised_endpoints()
        rack = str(self.config["broker.rack"]) or None
        self.membership.registration = BrokerRegistration(
            self.broker_id, endpoints[0].host, endpoints[0].port, rack, endpoints[0].listener,
            endpoints=tuple(endpoints))

        def new_epoch(epoch: int) -> None:
            self.replicas.broker_epoch = epoch
            assert self.fetchers is not None
            self.fetchers.broker_epoch = epoch

        self.membership.epoch_listeners.append(new_epoch)
        await self.membership.start(self.cluster_id or None)
        if self.cluster_id != self.membership.cluster_id:
            self.cluster_id = self.membership.cluster_id
            save_cluster_id(self._cluster_id_path, self.cluster_id)
        await self._import_local_topics()
        # Before the controller can open partitions here: a change after their configs are read
        # is then seen by the listener.
        assert self.config_changes is not None and isinstance(self.broker_configs, ZkDynamicConfigs)
        await self.config_changes.start()
        await self.broker_configs.reload()
        assert self.scram_source is not None
        await self.scram_source.load_all()
        await self.quota_store.load_all()
        if self.zk_group_configs is not None:
            await self.zk_group_configs.load_all(self.group_configs)
        self.isr.start()
        assert self.reachability is not None
        self.reachability.start()
        self.replicas.start_checkpoints(int(self.config["replica.high.watermark.checkpoint.interval.ms"]))
        await self.controller.start()
        # Clients learn the cluster from this broker's metadata cache, which the controller fills:
        # until its first UpdateMetadata names this broker, the cache has nothing to tell them.
        try:
            await asyncio.wait_for(self.metadata.wait_until(lambda: self.broker_id in self.metadata.brokers),
                                   self.zk.session_timeout + 5.0)
        except TimeoutError:
            log.warning("no metadata from the controller yet; serving clients anyway")
        assert self.links is not None
        if isinstance(self.producer_ids, ZkProducerIdAllocator):
            self.links.producer_ids = self.producer_ids
        self.links.start()
        assert self.load_sampler is not None and self.auto_balancer is not None
        self.load_sampler.start()
        self.auto_balancer.start()

    async def _import_local_topics(self) -> None:
        """A data directory written by a broker without ZooKeeper keeps its topics in
        meta/topics.json: bring them into the cluster once (same ids, this broker their only
        replica) so that their logs are served again, then set the file aside."""
        path = self.data_dir / "meta" / "topics.json"
        if not path.exists():
            return
        assert self.membership is not None
        catalog = TopicCatalog(path)
        for info in catalog:
            if await self.membership.topic_assignment(info.name) is not None:
                continue
            assignment = TopicAssignment(info.topic_id, {p: [self.broker_id] for p in range(info.partitions)})
            configs = {k: ("true" if v is True else "false" if v is False else str(v)) for k, v in info.configs.items()}
            if await self.membership.create_topic(info.name, assignment, configs):
                log.info("imported topic %s (%d partitions) from %s into the cluster", info.name, info.partitions, path)
        path.rename(path.with_name("topics.json.imported"))

    async def stop(self) -> None:
        if self.auto_balancer is not None:  # first: its execution talks to this broker's listener
            await _bounded("the automatic balancer", self.auto_balancer.stop())
        if self.clustered and bool(self.config["controlled.shutdown.enable"]):
            await self._controlled_shutdown()
        if self.membership is not None:
            self.membership.stopping = True  # a registration deleted from now on stays deleted
        for server in self._servers:
            server.close()
        for connection in list(self._connections):
            connection.abort("broker shutting down")
        if self.links is not None:
            await _bounded("the cluster links", self.links.stop())
        if self.load_sampler is not None:
            await _bounded("the balancer's load sampler", self.load_sampler.stop())
        await _bounded("the group coordinator", self.groups.stop())
        await _bounded("the share-partitions", self.share_leader.stop())
        await _bounded("the transaction coordinator", self.txns.stop())
        await _bounded("the share coordinator", self.share_coordinator.stop())
        await _bounded("the share state persister", self.persister.stop())
        if self.controller is not None:
            await _bounded("the controller", self.controller.stop())
        if self.isr is not None:
            await _bounded("the ISR manager", self.isr.stop())
        if self.config_changes is not None:
            await _bounded("the config change listener", self.config_changes.stop())
        if self.acl_store is not None:
            await _bounded("the ACL store", self.acl_store.stop())
        if self.reachability is not None:
            await _bounded("the peer reachability watches", self.reachability.stop())
        if self.fetchers is not None:
            await _bounded("the replica fetchers", self.fetchers.close())
        self.fetch_peers.close()
        self.peers.close()
        if self.zk is not None:
            with contextlib.suppress(Exception):
                await _bounded("the ZooKeeper session", self.zk.close())
        await _bounded("the log upkeep", self.logs.stop_upkeep())
        await _bounded("the log directory moves", self.log_moves.close())
        await _bounded("the replica manager", self.replicas.close())
        self.logs.close()  # last, and never skipped: it flushes and closes the logs
        for server in self._servers:
            await server.wait_closed()
        log.info("broker %d stopped; requests served: %s", self.broker_id,
                 describe_counts(self._dispatcher.request_counts))

    async def _controlled_shutdown(self) -> None:
        """Ask the controller to move this broker's leaderships away before it stops: the
        `controlled_shutdown` activity, run on this broker's peers and event loop."""
        if self.membership is None:
            return
        metadata, peers = self.metadata, self.peers

        def peer_for(broker: int) -> Any:
            endpoint = metadata.endpoint(broker)
            return None if endpoint is None else peers.get(endpoint.node_id, endpoint.host, endpoint.port)

        activity = controlled_shutdown(self.broker_id, self.replicas, metadata,
                                       int(self.config["controlled.shutdown.max.retries"]),
                                       int(self.config["controlled.shutdown.retry.backoff.ms"]), self.clock_ms)
        await AsyncioShell(peer_for).spawn(activity, "controlled-shutdown").finished()

    def _new_connection(self, security: ListenerSecurity) -> KafkaConnection:
        connection = KafkaConnection(self._dispatcher, self._limits, self._connection_closed, security)
        connection.admit = self._admit
        connection.on_expired = self._connection_expired
        self._connections.add(connection)
        tls = security.tls
        if tls is not None:
            # The loop drops a failed or timed-out handshake without telling the connection: look
            # once it must be over (roost.broker.net.tls_handshakes).
            loop = asyncio.get_running_loop()
            connection.handshake_timer = loop.call_at(tls_handshakes.overdue_at(loop.time(), tls.handshake_timeout_s),
                                                      self._handshake_overdue, connection, tls.handshake_timeout_s)
        return connection

    def _handshake_overdue(self, connection: KafkaConnection, timeout_s: float) -> None:
        """A TLS connection whose handshake must be over and was never made ready is gone: forget
        it (its place under max.connections with it) and say so, once a minute per listener."""
        if connection.made or connection not in self._connections:
            return
        self._connection_closed(connection)
        line = self._handshakes_given_up.given_up(connection.listener, timeout_s, asyncio.get_running_loop().time())
        if line is not None:
            log.warning(line)

    def _admit(self, connection: KafkaConnection) -> str | None:
        """Why a new connection is refused (max.connections, the per-address limits), or None.
        Accepted and dropped at once: the client sees a closed socket and backs off."""
        now = self.clock_ms()
        ip = connection.client_host
        if len(self._connections) > self.config["max.connections"]:
            reason: str | None = f"max.connections reached ({len(self._connections) - 1} open)"
        else:
            reason = self.connection_quotas.admit(ip, now)
        if reason is not None and self.connection_quotas.should_log(ip, now):
            log.warning("refusing connections from %s: %s (said once a minute per address)", ip, reason)
        return reason

    def _connection_expired(self, connection: KafkaConnection, kind: str, reason: str) -> None:
        """A deadline closes `connection`: idle ones quietly (as Kafka does, at debug), a partial
        request that timed out with a warning once a minute per address, not once per connection."""
        if kind == IDLE:
            log.debug("closing connection from %s: %s", connection.peer, reason)
        elif self.connection_quotas.should_log("receive " + connection.client_host, self.clock_ms()):
            log.warning("closing connection from %s: %s (said once a minute per address)", connection.peer, reason)

    def _connection_closed(self, connection: KafkaConnection) -> None:
        self._connections.discard(connection)
        if connection.security.tls is not None:
            self._heap_trimmer.tls_connection_closed()
        self.share_api.connection_closed(connection)  # its share sessions end, their records are released
        if connection.admitted:
            connection.admitted = False
            self.connection_quotas.release(connection.client_host)


def build_authorizer(config: BrokerConfig) -> Authorizer | None:
    """The authorizer `authorizer.class.name` asks for (None: no authorization); ConfigError for
    an authorizer Roost does not have or a malformed `super.users`."""
    try:
        if not authorizer_enabled(str(config["authorizer.class.name"])):
            return None
        super_users = parse_super_users(str(config["super.users"]))
    except (UnknownAuthorizerError, ValueError) as error:
        raise ConfigError(str(error)) from None
    return Authorizer(super_users, bool(config["allow.everyone.if.no.acl.found"]))


# How long one step of a broker's shutdown may take before the shutdown goes on without it: a
# stuck step must not keep the process (and its data directory) from stopping. The logs are
# closed after every step whatever happened.
STOP_STEP_TIMEOUT_S = 15.0


async def _bounded(step: str, stopping: Coroutine[Any, Any, None]) -> None:
    """Await one shutdown step for at most STOP_STEP_TIMEOUT_S; if it hangs, say which step and
    where every task is waiting (a bug to find), then go on."""
    try:
        await asyncio.wait_for(stopping, STOP_STEP_TIMEOUT_S)
    except TimeoutError:
        stacks = io.StringIO()
        for task in asyncio.all_tasks():
            task.print_stack(limit=8, file=stacks)
        log.error("shutdown: stopping %s took over %.0f s; going on without it. Tasks:\n%s",
                  step, STOP_STEP_TIMEOUT_S, stacks.getvalue())
