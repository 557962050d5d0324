"""The metadata cache: what this broker tells clients about the cluster.

Brokers and their endpoints, the controller, the topics (names and ids) and for every partition
its leader, leader epoch, replicas, in-sync replicas and offline replicas. Metadata,
FindCoordinator, DescribeCluster and the "where is the leader" hints of produce and fetch read it.
The controller's UpdateMetadata requests are its only input (Kafka's rule), applied whole: a
request from an older controller epoch is refused.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from roost.broker.metadata.catalog import TopicInfo
from roost.wire.kafka.errors import ErrorCode

LEADER_DURING_DELETE = -2
# A dead broker (seen refusing by the reachability hint) that the controller no longer lists
# stays in Metadata's broker list this long. librdkafka drops ("decommissions") a broker missing
# from a Metadata answer, and when the answer that names a dead leader's successors also drops the
# dead broker, the decommission resets the partitions it is moving to "no leader" — a second of
# silence until its next timed query (its debug log: "Reverting from preferred replica N to
# leader -1"). Listed a moment longer, the dead broker is dropped by a later answer, after the
# partitions have moved. A broker cut off (no refusal) is dropped at once: there the decommission
# is what ends librdkafka's requests stuck in flight to it (3 s later cost 3 s of silence).
DEPARTED_LISTED_S = 3.0


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: int
    host: str  # host and port: the inter-broker listener's (where brokers reach each other)
    port: int
    rack: str | None = None
    listeners: tuple[tuple[str, str, int], ...] = ()  # (listener name, host, port) of every listener

    def on_listener(self, listener: str) -> BrokerEndpoint | None:
        """This broker as a client that came in on `listener` must reach it: that listener's
        address, None when the broker has no such listener ("" or no list known: as it is)."""
        if not listener or not self.listeners:
            return self
        for name, host, port in self.listeners:
            if name == listener:
                return BrokerEndpoint(self.node_id, host, port, self.rack, self.listeners)
        return None


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
    controller_epoch: int = 0
    brokers: dict[int, BrokerEndpoint] = field(default_factory=dict)
    partitions: dict[tuple[str, int], PartitionInfo] = field(default_factory=dict)
    topic_ids: dict[str, uuid.UUID] = field(default_factory=dict)
    _partition_counts: dict[str, int] = field(default_factory=dict)
    _names_by_id: dict[uuid.UUID, str] = field(default_factory=dict)
    listeners: list[Callable[[], None]] = field(default_factory=list)  # told after each UpdateMetadata
    inter_broker_listener: str = ""  # whose address BrokerEndpoint.host/port give ("": the first)
    # Brokers the controller listed before and no longer does: endpoint and when they left.
    departed: dict[int, tuple[BrokerEndpoint, float]] = field(default_factory=dict)
    # Live brokers this broker has just seen go (metadata/reachability.py): a hint, not the
    # controller's word; Metadata answers no leader for their partitions, as Kafka does for a
    # leader that is not alive.
    unreachable: set[int] = field(default_factory=set)

    # changes ----------------------------------------------------------------------------------
    def set_brokers(self, brokers: list[BrokerEndpoint], controller_id: int) -> None:
        now = time.monotonic()
        listed = {b.node_id: b for b in brokers}
        for node_id, endpoint in self.brokers.items():
            # Only a broker seen gone here (its port refused: a dead process, whose requests fail
            # at once anyway). One cut off is dropped at once, as Kafka does: librdkafka's
            # requests in flight to it end only when it drops the broker.
            if node_id not in listed and node_id in self.unreachable:
                self.departed[node_id] = (endpoint, now)
        for node_id in listed:
            self.departed.pop(node_id, None)
        self.brokers = listed
        self.controller_id = controller_id

    def learn_controller(self, controller_id: int) -> None:
        """The controller as this broker's /controller watch saw it, which is often sooner than
        the new controller's first UpdateMetadata. Clients send admin requests to the broker
        Metadata names, so it is only named once it is a broker listed here."""
        if controller_id in self.brokers:
            self.controller_id = controller_id

    def set_partition(self, topic: str, index: int, info: PartitionInfo, topic_id: uuid.UUID | None = None) -> None:
        known = self.partitions.get((topic, index))
        # Clients ignore a leader epoch that goes back; never tell them one.
        assert known is None or info.leader_epoch >= known.leader_epoch, (topic, index, known, info)
        self.partitions[(topic, index)] = info
        self._partition_counts[topic] = max(self._partition_counts.get(topic, 0), index + 1)
        if topic_id is not None and self.topic_ids.get(topic) != topic_id:
            old = self.topic_ids.get(topic)
            if old is not None:
                self._names_by_id.pop(old, None)
            self.topic_ids[topic] = topic_id
            self._names_by_id[topic_id] = topic

    def remove_partition(self, topic: str, index: int) -> None:
        if self.partitions.pop((topic, index), None) is None:
            return
        remaining = [i for (t, i) in self.partitions if t == topic]
        if remaining:
            self._partition_counts[topic] = max(remaining) + 1
        else:
            self._partition_counts.pop(topic, None)
            old = self.topic_ids.pop(topic, None)
            if old is not None:
                self._names_by_id.pop(old, None)

    def apply_update_metadata(self, body: dict[str, Any]) -> ErrorCode:
        """An UpdateMetadata request (v5+ shape): the live brokers, and the partitions it names
        (leader -2: the partition is being deleted and is forgotten)."""
        if body["controller_epoch"] < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = body["controller_epoch"]
        brokers = []
        for broker in body["live_brokers"]:
            endpoints = broker.get("endpoints") or []
            if not endpoints:
                continue
            endpoint = next((e for e in endpoints if e["listener"] == self.inter_broker_listener), endpoints[0])
            brokers.append(BrokerEndpoint(broker["id"], endpoint["host"], endpoint["port"], broker.get("rack"),
                                          tuple((e["listener"], e["host"], e["port"]) for e in endpoints)))
        self.set_brokers(brokers, body["controller_id"])
        for topic in body["topic_states"]:
            name = topic["topic_name"]
            topic_id = topic.get("topic_id")
            for state in topic["partition_states"]:
                index = state["partition_index"]
                if state["leader"] == LEADER_DURING_DELETE:
                    self.remove_partition(name, index)
                    continue
                known = self.partitions.get((name, index))
                if known is not None and state["leader_epoch"] < known.leader_epoch:
                    continue  # an older state that crossed a newer one: keep the newer
                self.set_partition(name, index, PartitionInfo(
                    state["leader"], state["leader_epoch"], tuple(state["replicas"]), tuple(state["isr"]),
                    tuple(state.get("offline_replicas") or ())), topic_id if topic_id and topic_id.int else None)
        for listener in list(self.listeners):
            listener()
        return ErrorCode.NONE

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once `predicate()` holds, checking after each UpdateMetadata (the caller
        bounds the wait)."""
        if predicate():
            return
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()

        def check() -> None:
            if not done.done() and predicate():
                done.set_result(None)

        self.listeners.append(check)
        try:
            await done
        finally:
            self.listeners.remove(check)

    # questions --------------------------------------------------------------------------------
    def partition(self, topic: str, index: int) -> PartitionInfo | None:
        return self.partitions.get((topic, index))

    def endpoint(self, node_id: int) -> BrokerEndpoint | None:
        return self.brokers.get(node_id)

    def client_endpoint(self, node_id: int, listener: str) -> BrokerEndpoint | None:
        """Where a client on `listener` reaches broker `node_id`."""
        found = self.brokers.get(node_id)
        return found.on_listener(listener) if found is not None else None

    def client_brokers(self, listener: str) -> list[BrokerEndpoint]:
        """The live brokers as a client on `listener` reaches them (those without it left out)."""
        return [e for b in self.brokers.values() if (e := b.on_listener(listener)) is not None]

    def metadata_brokers(self, listener: str) -> list[BrokerEndpoint]:
        """Metadata's broker list: the live brokers and, for DEPARTED_LISTED_S after they left,
        the departed ones (see DEPARTED_LISTED_S; no partition names them as leader)."""
        now = time.monotonic()
        for node_id in [n for n, (_, left) in self.departed.items() if now - left > DEPARTED_LISTED_S]:
            del self.departed[node_id]
        recent = [e for b, _ in self.departed.values() if (e := b.on_listener(listener)) is not None]
        return sorted([*self.client_brokers(listener), *recent], key=lambda e: e.node_id)

    def live_broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    def coordinator_endpoint(self, topic: str, index: int) -> BrokerEndpoint | None:
        """Where a coordinator on this partition of an internal topic is found: its leader's
        endpoint; None while it has no leader or this broker has just seen its leader go (the
        reachability hint: FindCoordinator then answers COORDINATOR_NOT_AVAILABLE and the client
        asks again soon, rather than dialling a dead address)."""
        info = self.partitions.get((topic, index))
        if info is None or info.leader < 0 or info.leader in self.unreachable:
            return None
        return self.brokers.get(info.leader)

    def leader_endpoint(self, topic: str, index: int) -> tuple[int, int, BrokerEndpoint | None]:
        """(leader id, leader epoch, its endpoint if live) of a partition; (-1, -1, None) if unknown."""
        info = self.partitions.get((topic, index))
        if info is None:
            return -1, -1, None
        return info.leader, info.leader_epoch, self.brokers.get(info.leader)

    # the topic directory (what handlers list and look up) --------------------------------------
    def __contains__(self, name: object) -> bool:
        return name in self._partition_counts

    def __iter__(self) -> Iterator[TopicInfo]:
        return iter([info for name in sorted(self._partition_counts) if (info := self.get(name)) is not None])

    def get(self, name: str) -> TopicInfo | None:
        count = self._partition_counts.get(name)
        if count is None:
            return None
        return TopicInfo(name, self.topic_ids.get(name, uuid.UUID(int=0)), count)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        name = self._names_by_id.get(topic_id)
        return self.get(name) if name is not None else None
