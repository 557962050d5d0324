"""A broker's Prometheus series, named as Kafka's JMX exporter (prometheus/jmx_exporter's
kafka-2_0_0.yml) and kafka_exporter (danielqsj) name theirs, so that the usual Grafana dashboards
(721 Kafka Overview, 7589 Kafka Exporter Overview) fill without editing.

Everything is computed when Prometheus scrapes, on the broker's loop (see roost.metrics.endpoint): the
gauges from the broker's state, the counters from the plain integers of roost.broker.net.stats. A
broker with metrics off keeps no counts at all (`Broker.stats` is None).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from roost.broker.txn.core import TxnState
from roost.metrics.disk_space import SpaceWatch
from roost.wire.kafka import API_NAMES

if TYPE_CHECKING:
    from roost.broker.broker import Broker

NO_LEADER = -1
# Kafka's ProducerStateManager.LATE_TRANSACTION_BUFFER_MS: an open transaction is late once its
# producer has been quiet for transaction.max.timeout.ms plus this.
LATE_TRANSACTION_BUFFER_MS = 5 * 60_000


class BrokerCollector(Collector):
    def __init__(self, broker: Broker) -> None:
        assert broker.stats is not None, "the broker was built with metrics off (metrics.port -1)"
        self._broker = broker
        self._space = SpaceWatch("roost_log_dir", "log directory")

    def collect(self) -> Iterator[Metric]:
        yield from self._topic_counters()
        yield from self._requests()
        yield from self._replica_manager()
        yield from self._controller()
        yield from self._logs()
        yield from self._consumer_groups()
        yield from self._exporter_partitions()
        yield from self._exporter_cluster()
        yield from self._transactions()
        yield from self._links()
        yield from self._share_groups()

    # kafka.server:type=BrokerTopicMetrics -----------------------------------------------------
    def _topic_counters(self) -> Iterator[Metric]:
        broker = self._broker
        stats = broker.stats
        assert stats is not None
        for gone in [name for name in stats.topics if name not in broker.metadata]:
            stats.forget_topic(gone)  # a deleted topic's series go (Kafka removes its metrics too)
        families = {
            "messages_in": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_messagesin", "Records appended as leader", labels=["topic"]),
            "bytes_in": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_bytesin",
                "Bytes of record batches appended as leader (the produce requests' records)", labels=["topic"]),
            "bytes_out": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_bytesout",
                "Bytes of record batches sent in fetch responses, to consumers and followers", labels=["topic"]),
            "failed_produce": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_failedproducerequests",
                "Produce partitions answered with an error", labels=["topic"]),
            "failed_fetch": CounterMetricFamily(
                "kafka_server_brokertopicmetrics_failedfetchrequests",
                "Fetch partitions answered with an error", labels=["topic"]),
        }
        for name, counters in sorted(stats.topics.items()):
            for field, family in families.items():
                family.add_metric([name], getattr(counters, field))
        # Kafka also has each meter for all topics together, which the JMX exporter renders as the
        # same name without a topic label: the sum over the topics this broker still has.
        for field, family in families.items():
            family.add_sample(family.name + "_total", {}, sum(getattr(c, field) for c in stats.topics.values()))
        yield from families.values()

    # kafka.network:type=RequestMetrics --------------------------------------------------------
    def _requests(self) -> Iterator[Metric]:
        broker = self._broker
        assert broker.stats is not None
        requests = CounterMetricFamily("kafka_network_requestmetrics_requests",
                                       "Requests received, by API and version", labels=["request", "version"])
        for (key, version), count in sorted(broker.request_counts.items()):
            requests.add_metric([API_NAMES[key], str(version)], count)
        yield requests
        # A summary, as the JMX exporter renders Kafka's Yammer histogram: quantiles over the
        # last samples, and a count and sum over all requests.
        name = "kafka_network_requestmetrics_totaltimems"
        total = Metric(name, "Milliseconds from a request's decoding to its response being ready", "summary")
        for request, times in sorted(broker.stats.request_times.items()):
            for quantile, ms in times.quantiles():
                total.add_sample(name, {"request": request, "quantile": str(quantile)}, ms)
            total.add_sample(name + "_count", {"request": request}, times.count)
            total.add_sample(name + "_sum", {"request": request}, times.sum_ms)
        yield total
        # Kafka's request queue sits between its network and handler threads; here a request
        # waits in its connection (pipelined, or answered later): the sum over connections.
        yield GaugeMetricFamily("kafka_network_requestchannel_requestqueuesize",
                                "Requests received and not yet answered, over all connections",
                                value=broker.requests_in_flight())

    # kafka.server:type=ReplicaManager ---------------------------------------------------------
    def _replica_manager(self) -> Iterator[Metric]:
        broker = self._broker
        partitions = list(broker.replicas.hosted())
        led = [p for p in partitions if p.is_leader]
        under = sum(1 for p in led if p.under_replicated)
        under_min = sum(1 for p in led if p.isr_below_min())

        def gauge(short: str, doc: str, value: float) -> GaugeMetricFamily:
            return GaugeMetricFamily(f"kafka_server_replicamanager_{short}", doc, value=value)

        yield gauge("partitioncount", "Partitions with a replica on this broker", len(partitions))
        yield gauge("leadercount", "Partitions this broker leads", len(led))
        yield gauge("underreplicatedpartitions", "Partitions led here whose ISR is smaller than their replicas",
                    under)
        yield gauge("underminisrpartitioncount", "Partitions led here whose ISR is below min.insync.replicas",
                    under_min)
        # Replicas on failed log directories (they answer KAFKA_STORAGE_ERROR until a restart).
        yield gauge("offlinereplicacount", "Replicas on offline log directories", broker.replicas.offline_count())
        isr = broker.isr
        yield CounterMetricFamily("kafka_server_replicamanager_isrshrinks", "ISR shrinks of partitions led here",
                                  value=isr.shrinks if isr is not None else 0)
        yield CounterMetricFamily("kafka_server_replicamanager_isrexpands", "ISR expansions of partitions led here",
                                  value=isr.expands if isr is not None else 0)
        yield from self._replication_throttles()

    # KIP-73 replication quotas (kafka.server:type=LeaderReplication / FollowerReplication) and the
    # balancer's load sampling (docs/balancing.md) ----------------------------------------------
    def _replication_throttles(self) -> Iterator[Metric]:
        broker = self._broker
        now = broker.replicas.clock_ms()
        quotas = [("leader", broker.replicas.leader_quota)]
        if broker.fetchers is not None:
            quotas.append(("follower", broker.fetchers.follower_quota))
        rate = GaugeMetricFamily("kafka_server_replication_throttled_byte_rate",
                                 "Windowed rate of throttled replication bytes (KIP-73), by direction",
                                 labels=["direction"])
        total = CounterMetricFamily("roost_replication_throttled_bytes",
                                    "Bytes of throttled partitions replicated, by direction", labels=["direction"])
        bound = GaugeMetricFamily("roost_replication_throttle_bound_bytes_per_second",
                                  "The replication throttle in force (absent: unlimited), by direction",
                                  labels=["direction"])
        for direction, quota in quotas:
            rate.add_metric([direction], quota.rate.per_second(now))
            total.add_metric([direction], quota.recorded)
            if quota.limited:
                bound.add_metric([direction], quota.bound)
        yield rate
        yield total
        yield bound
        sampler = broker.load_sampler
        if sampler is not None:
            yield GaugeMetricFamily("roost_balancer_load_windows", "Complete load windows this broker has sampled",
                                    value=sampler.windows.complete_windows)
            yield GaugeMetricFamily("roost_balancer_cpu_cores", "This broker's smoothed CPU use, in cores",
                                    value=sampler.windows.cpu_cores())
        auto = broker.auto_balancer
        if auto is not None:
            mode = GaugeMetricFamily("roost_balancer_mode", "The automatic balancer's mode (balancer.mode): 1 for it",
                                     labels=["mode"])
            mode.add_metric([auto.mode], 1)
            yield mode
            yield GaugeMetricFamily("roost_balancer_active", "1 while this broker's automatic balancer is in charge "
                                    "(it is the active controller)", value=int(auto.running))
            decisions = CounterMetricFamily("roost_balancer_decisions", "The automatic balancer's checks, by what "
                                            "it decided (hold, node_add, heal, skew)", labels=["kind"])
            for kind, count in sorted(auto.decisions.items()):
                decisions.add_metric([kind], count)
            yield decisions
            executions = CounterMetricFamily("roost_balancer_executions", "The automatic balancer's executions, by "
                                             "their final phase", labels=["phase"])
            for phase, count in sorted(auto.executions.items()):
                executions.add_metric([phase], count)
            yield executions
            if auto.last_action:
                yield GaugeMetricFamily("roost_balancer_last_action_timestamp_seconds",
                                        "When the automatic balancer last planned", value=auto.last_action["at"])

    # kafka.controller:type=KafkaController ----------------------------------------------------
    def _controller(self) -> Iterator[Metric]:
        broker = self._broker
        controller = broker.controller
        if controller is None:  # a lone broker is its own controller
            active = True
            offline = sum(1 for p in broker.replicas.hosted() if not p.is_leader)
        else:
            core = controller.core
            active = core is not None
            offline = sum(1 for s in core.states.values() if s.state.leader == NO_LEADER) if core else 0
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_activecontrollercount",
                                "1 on the active controller, else 0 (the cluster's sum must be 1)",
                                value=int(active))
        yield GaugeMetricFamily("kafka_controller_kafkacontroller_offlinepartitionscount",
                                "Partitions without a leader (reported by the active controller)", value=offline)

    # kafka.log:type=Log -----------------------------------------------------------------------
    def _logs(self) -> Iterator[Metric]:
        size = GaugeMetricFamily("kafka_log_log_size", "Bytes of a partition's log segments on this broker",
                                 labels=["topic", "partition"])
        end = GaugeMetricFamily("kafka_log_log_logendoffset", "A partition's log end offset on this broker",
                                labels=["topic", "partition"])
        for partition in sorted(self._broker.replicas.hosted(), key=lambda p: (p.topic, p.index)):
            labels = [partition.topic, str(partition.index)]
            size.add_metric(labels, partition.size_bytes)
            end.add_metric(labels, partition.log_end_offset)
        yield size
        yield end
        # kafka.log:type=LogManager: the directories' state, and their disks' free space.
        dirs = self._broker.logs.dirs.dirs
        yield GaugeMetricFamily("kafka_log_logmanager_offlinelogdirectorycount", "Log directories offline",
                                value=sum(1 for d in dirs if not d.online))
        offline = GaugeMetricFamily("kafka_log_logmanager_logdirectoryoffline",
                                    "1 when the log directory has failed (offline until a restart)",
                                    labels=["logdirectory"])
        for log_dir in dirs:
            offline.add_metric([str(log_dir.path)], 0 if log_dir.online else 1)
        yield offline
        yield from self._space.collect([d.path for d in dirs if d.online],
                                       self._broker.config["log.dir.free.space.warn.ratio"])

    # kafka_exporter's consumer-group series ---------------------------------------------------
    def _consumer_groups(self) -> Iterator[Metric]:
        """The groups this broker coordinates. The lag of a partition is its high watermark (what
        a consumer can read) minus the group's committed offset, for partitions led here (the
        one place the high watermark is known for sure); in a cluster, sum over the brokers."""
        broker = self._broker
        members = GaugeMetricFamily("kafka_consumergroup_members", "Members of a consumer group",
                                    labels=["consumergroup"])
        current = GaugeMetricFamily("kafka_consumergroup_current_offset", "A group's committed offset",
                                    labels=["consumergroup", "topic", "partition"])
        lag = GaugeMetricFamily("kafka_consumergroup_lag", "Records a group has yet to consume",
                                labels=["consumergroup", "topic", "partition"])
        lag_sum = GaugeMetricFamily("kafka_consumergroup_lag_sum", "A group's lag summed over a topic's partitions",
                                    labels=["consumergroup", "topic"])
        for group, member_count, offsets in broker.groups.coordinated():
            members.add_metric([group], member_count)
            sums: dict[str, int] = {}
            for (topic, index), offset in sorted(offsets.items()):
                labels = [group, topic, str(index)]
                current.add_metric(labels, offset)
                partition = broker.replicas.partition(topic, index)
                if partition is not None and partition.is_leader:
                    behind = max(0, partition.high_watermark - offset)
                    lag.add_metric(labels, behind)
                    sums[topic] = sums.get(topic, 0) + behind
            for topic, total in sorted(sums.items()):
                lag_sum.add_metric([group, topic], total)
        yield members
        yield current
        yield lag
        yield lag_sum

    # share groups (KIP-932): Kafka 4.2's "Share Group Monitoring" names ------------------------------
    def _share_groups(self) -> Iterator[Metric]:
        """BrokerTopicMetrics' share fetch and acknowledgement counts, ShareGroupMetrics'
        acknowledgements by type, SharePartitionMetrics' in-flight records, ShareSessionCache's
        sessions, and the group coordinator's share-group-count by state."""
        broker = self._broker
        api = broker.share_api
        for name, value, text in (
                ("totalsharefetchrequests", api.fetches, "ShareFetch requests"),
                ("failedsharefetchrequests", api.failed_fetches, "ShareFetch requests refused as a whole"),
                ("totalshareacknowledgementrequests", api.acknowledgements, "ShareAcknowledge requests"),
                ("failedshareacknowledgementrequests", api.failed_acknowledgements,
                 "ShareAcknowledge requests refused as a whole")):
            family = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", text)
            family.add_metric([], value)
            yield family
        acks = CounterMetricFamily("kafka_server_sharegroupmetrics_recordacknowledgements",
                                   "Records acknowledged, by acknowledgement type", labels=["ackType"])
        for kind, label in ((1, "Accept"), (2, "Release"), (3, "Reject"), (4, "Renew")):
            acks.add_metric([label], api.acks_by_type.get(kind, 0))
        yield acks
        in_flight = GaugeMetricFamily("kafka_server_sharepartitionmetrics_inflightmessagecount",
                                      "Records in a share-partition's in-flight window (from its start offset)",
                                      labels=["group", "topic", "partition"])
        acquired = GaugeMetricFamily("roost_share_partition_acquired_records",
                                     "Records of a share-partition acquired by consumers now",
                                     labels=["group", "topic", "partition"])
        start = GaugeMetricFamily("roost_share_partition_start_offset",
                                  "A share-partition's start offset (SPSO)", labels=["group", "topic", "partition"])
        for key, start_offset, window, held in sorted(broker.share_leader.counts(), key=lambda c: str(c[0])):
            info = broker.metadata.by_id(key.topic_id)
            labels = [key.group_id, info.name if info is not None else str(key.topic_id), str(key.partition)]
            in_flight.add_metric(labels, window)
            acquired.add_metric(labels, held)
            start.add_metric(labels, start_offset)
        yield in_flight
        yield acquired
        yield start
        delivered = GaugeMetricFamily("roost_share_partition_records_by_delivery_count",
                                      "A share-partition's unfinished in-flight records by how many times each "
                                      "was delivered", labels=["group", "topic", "partition", "delivery_count"])
        for key, by_count in sorted(broker.share_leader.delivery_counts(), key=lambda c: str(c[0])):
            info = broker.metadata.by_id(key.topic_id)
            labels = [key.group_id, info.name if info is not None else str(key.topic_id), str(key.partition)]
            for count, records in sorted(by_count.items()):
                delivered.add_metric([*labels, str(count)], records)
        yield delivered
        sessions = GaugeMetricFamily("kafka_server_sharesessioncache_sharesessionscount", "Open share sessions")
        sessions.add_metric([], len(api.sessions.sessions))
        yield sessions
        partitions = GaugeMetricFamily("kafka_server_sharesessioncache_sharepartitionscount",
                                       "Partitions in the open share sessions")
        partitions.add_metric([], api.sessions.partition_count())
        yield partitions
        counts = GaugeMetricFamily("group_coordinator_metrics_share_group_count",
                                   "Share groups this broker coordinates, by state", labels=["state"])
        by_state = {"Empty": 0, "Stable": 0}
        for group_id, state in broker.groups.share.listing():
            if broker.groups.status(group_id).value == 0:
                by_state[state] = by_state.get(state, 0) + 1
        for state, count in sorted(by_state.items()):
            counts.add_metric([state], count)
        yield counts

    # kafka_exporter's view of the cluster ----------------------------------------------------
    def _exporter_partitions(self) -> Iterator[Metric]:
        """One series per partition across the cluster: each broker reports the partitions it
        leads (kafka_exporter asks each partition's leader too)."""
        labels = ["topic", "partition"]
        families = {
            "current": GaugeMetricFamily("kafka_topic_partition_current_offset",
                                         "A partition's newest offset (its high watermark)", labels=labels),
            "oldest": GaugeMetricFamily("kafka_topic_partition_oldest_offset", "A partition's oldest offset",
                                        labels=labels),
            "leader": GaugeMetricFamily("kafka_topic_partition_leader", "A partition's leader", labels=labels),
            "replicas": GaugeMetricFamily("kafka_topic_partition_replicas", "A partition's replica count",
                                          labels=labels),
            "in_sync": GaugeMetricFamily("kafka_topic_partition_in_sync_replica", "A partition's in-sync replicas",
                                         labels=labels),
            "under": GaugeMetricFamily("kafka_topic_partition_under_replicated_partition",
                                       "1 if a partition's ISR is smaller than its replicas", labels=labels),
        }
        for partition in sorted(self._broker.replicas.hosted(), key=lambda p: (p.topic, p.index)):
            if not partition.is_leader:
                continue
            at = [partition.topic, str(partition.index)]
            families["current"].add_metric(at, partition.high_watermark)
            families["oldest"].add_metric(at, partition.log_start_offset)
            families["leader"].add_metric(at, self._broker.broker_id)
            families["replicas"].add_metric(at, len(partition.replicas()))
            families["in_sync"].add_metric(at, len(partition.isr()))
            families["under"].add_metric(at, int(partition.under_replicated))
        yield from families.values()

    def _exporter_cluster(self) -> Iterator[Metric]:
        """Cluster-wide counts, from the active controller only, so that summing over the
        brokers counts each once."""
        broker = self._broker
        brokers = GaugeMetricFamily("kafka_brokers", "Live brokers in the cluster")
        partitions = GaugeMetricFamily("kafka_topic_partitions", "Partitions of a topic", labels=["topic"])
        if broker.controller is None or broker.controller.active:
            brokers.add_metric([], len(broker.metadata.brokers))
            for info in sorted(broker.metadata, key=lambda t: t.name):
                partitions.add_metric([info.name], info.partitions)
        yield brokers
        yield partitions


    # Transactions: the partitions' side (kafka.cluster:type=Partition, ReplicaManager) and the
    # coordinator's (kafka.server:type=transaction-coordinator-metrics, and Roost's own counts) --
    def _transactions(self) -> Iterator[Metric]:
        broker = self._broker
        now = int(time.time() * 1000)
        late_after = broker.config["transaction.max.timeout.ms"] + LATE_TRANSACTION_BUFFER_MS
        lso_lag = GaugeMetricFamily("kafka_cluster_partition_laststableoffsetlag",
                                    "High watermark minus last stable offset of a partition led here (records "
                                    "read_committed consumers wait for)", labels=["topic", "partition"])
        late = producers = 0
        for partition in sorted(broker.replicas.hosted(), key=lambda p: (p.topic, p.index)):
            producers += len(partition.log.producer_state.producers)
            oldest = partition.oldest_open_transaction_timestamp()
            if oldest is not None and now - oldest > late_after:
                late += 1
            if partition.is_leader:
                lso_lag.add_metric([partition.topic, str(partition.index)],
                                   max(0, partition.high_watermark - partition.last_stable_offset))
        yield lso_lag
        yield GaugeMetricFamily("kafka_server_replicamanager_partitionswithlatetransactionscount",
                                "Partitions with a transaction open longer than transaction.max.timeout.ms + 5 min",
                                value=late)
        yield GaugeMetricFamily("kafka_server_replicamanager_produceridcount",
                                "Producer ids the partitions on this broker keep state for", value=producers)
        txns = broker.txns
        loads = list(txns.counts.load_times_ms)
        yield GaugeMetricFamily("kafka_server_transaction_coordinator_metrics_partition_load_time_max",
                                "Longest load of a __transaction_state partition (ms, recent loads)",
                                value=max(loads) if loads else 0.0)
        yield GaugeMetricFamily("kafka_server_transaction_coordinator_metrics_partition_load_time_avg",
                                "Average load of a __transaction_state partition (ms, recent loads)",
                                value=sum(loads) / len(loads) if loads else 0.0)
        # No Kafka names for these: Roost's own.
        states = GaugeMetricFamily("roost_transaction_coordinator_transactions",
                                   "Transactional ids this broker coordinates, by Kafka's state name", labels=["state"])
        by_state = {state.label: 0 for state in TxnState}
        for _transactional_id, _producer_id, state in txns.listing():
            by_state[state.label] += 1
        for label, count in by_state.items():
            states.add_metric([label], count)
        yield states
        yield CounterMetricFamily("roost_transaction_coordinator_markers_written",
                                  "Transaction markers this coordinator had partitions take", value=txns.counts.markers_written)
        yield CounterMetricFamily("roost_transaction_coordinator_timeout_aborts",
                                  "Transactions this coordinator aborted after their transaction.timeout.ms",
                                  value=txns.counts.timeout_aborts)

    # Cluster links (roost.broker.link): no Kafka names (Confluent's are JMX-only), Roost's own --
    def _links(self) -> Iterator[Metric]:
        from roost.broker.link.core import LinkState

        links = self._broker.links
        statuses = links.snapshot() if links is not None else []
        state = GaugeMetricFamily("roost_cluster_link_state",
                                  "1 for a link's current state on this broker (ACTIVE, SOURCE_UNAVAILABLE, FAILED, "
                                  "PAUSED), 0 for the others", labels=["link", "state"])
        lag = GaugeMetricFamily("roost_cluster_link_mirror_lag_records",
                                "Records the source holds below its high watermark that a mirror led here does not "
                                "(-1: not known yet)", labels=["link", "topic", "partition"])
        lag_ms = GaugeMetricFamily("roost_cluster_link_mirror_lag_ms",
                                   "At most this old is the oldest source record a mirror led here lacks: the time "
                                   "since it last held all the source had (0: caught up)",
                                   labels=["link", "topic", "partition"])
        size = CounterMetricFamily("roost_cluster_link_mirrored_bytes",
                                   "Bytes of source batches mirrored by this broker", labels=["link"])
        records = CounterMetricFamily("roost_cluster_link_mirrored_records",
                                      "Records of source batches mirrored by this broker", labels=["link"])
        for status in statuses:
            name = status["link"]
            for value in LinkState:
                state.add_metric([name, value.value], 1.0 if status["state"] == value.value else 0.0)
            for p in status["partitions"]:
                lag.add_metric([name, p["topic"], str(p["partition"])], p["lag_records"])
                lag_ms.add_metric([name, p["topic"], str(p["partition"])], p["lag_ms"])
            size.add_metric([name], status["bytes"])
            records.add_metric([name], status["records"])
        yield from (state, lag, lag_ms, size, records)


def broker_registry(broker: Broker) -> CollectorRegistry:
    """A registry of its own for `broker` (several brokers may share a process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(BrokerCollector(broker))
    return registry
