"""A keeper's Prometheus series, named as ZooKeeper's Prometheus metrics provider names them (no
prefix), so that the ZooKeeper Grafana dashboard (10465) fills without editing. The values are
those the `mntr` four-letter word reports, read when Prometheus scrapes, on the keeper's loop.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from roost.keeper.fourletter import open_file_descriptors
from roost.metrics.disk_space import KEEPER_WARN_RATIO, SpaceWatch

if TYPE_CHECKING:
    from roost.keeper.server import KeeperServer


class KeeperCollector(Collector):
    def __init__(self, server: KeeperServer) -> None:
        self._server = server
        self._space = SpaceWatch("roost_keeper_data_dir", "keeper data directory")

    def collect(self) -> Iterator[Metric]:
        server = self._server
        facts = server.facts()
        # ZooKeeper registers these as gauges, packet counts included; so do we.
        values: list[tuple[str, str, float]] = [
            ("znode_count", "Znodes in the data tree", facts.node_count),
            ("watch_count", "Watches set by clients", facts.watch_count),
            ("ephemerals_count", "Ephemeral znodes", facts.ephemerals_count),
            ("approximate_data_size", "Bytes of znode paths and data", facts.approximate_data_size),
            ("outstanding_requests", "Requests received and not yet answered", facts.outstanding),
            ("num_alive_connections", "Open client connections", facts.connections),
            ("global_sessions", "Client sessions", facts.sessions),
            ("local_sessions", "Local sessions (none: every session is global)", 0),
            ("packets_received", "Packets received from clients", facts.packets_received),
            ("packets_sent", "Packets sent to clients", facts.packets_sent),
            ("avg_latency", "Average request latency in ms", facts.avg_latency_ms),
            ("min_latency", "Minimum request latency in ms", facts.min_latency_ms),
            ("max_latency", "Maximum request latency in ms", facts.max_latency_ms),
            ("uptime", "Milliseconds since this keeper started", facts.uptime_ms),
            ("open_file_descriptor_count", "Open file descriptors of this process", open_file_descriptors()),
            ("quorum_size", "Voting members of the ensemble", max(1, len(server.config.servers))),
        ]
        follower_counts = getattr(server.replicator, "follower_counts", None)
        if server.mode() == "leader" and follower_counts is not None:
            learners, synced = follower_counts()
            values += [("learners", "Followers the leader tracks", learners),
                       ("synced_followers", "Followers replicating in step with the leader", synced)]
        for name, doc, value in values:
            yield GaugeMetricFamily(name, doc, value=value)
        yield from self._space.collect([server.config.data_dir], KEEPER_WARN_RATIO)


def keeper_registry(server: KeeperServer) -> CollectorRegistry:
    """A registry of its own for `server` (several keepers may share a process)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(KeeperCollector(server))
    return registry
