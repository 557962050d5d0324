"""The metadata cache: what this broker tells clients about the cluster.

Brokers and their endpoints, the controller, and for every partition its leader, leader epoch,
replicas, in-sync replicas and offline replicas. Metadata, FindCoordinator and the "where is the
leader" answers of produce and fetch read it. On a single broker it is filled from the broker's
own partitions; in a cluster, the controller's UpdateMetadata requests fill it.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()


@dataclass
class MetadataCache:
    controller_id: int = -1
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    partitions: dict[tuple[str, int], PartitionInfo] = field(default_factory=dict)

    def set_brokers(self, brokers: list[BrokerEndpoint], controller_id: int) -> None:
        self.brokers = {b.node_id: b for b in brokers}
        self.controller_id = controller_id

    def set_partition(self, topic: str, index: int, info: PartitionInfo) -> None:
        known = self.partitions.get((topic, index))
        # Clients ignore a leader epoch that goes back; never tell them one.
        assert known is None or info.leader_epoch >= known.leader_epoch, (topic, index, known, info)
        self.partitions[(topic, index)] = info

    def remove_partition(self, topic: str, index: int) -> None:
        self.partitions.pop((topic, index), None)

    def partition(self, topic: str, index: int) -> PartitionInfo | None:
        return self.partitions.get((topic, index))

    def endpoint(self, node_id: int) -> BrokerEndpoint | None:
        return self.brokers.get(node_id)

    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)
