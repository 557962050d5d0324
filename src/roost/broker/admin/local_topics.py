"""Creating, growing and deleting topics on a single broker: the catalog and the hosted logs
change together. (In a cluster the controller does this through ZooKeeper.)"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from roost.broker.metadata.catalog import TopicCatalog, TopicInfo, topic_name_problem
from roost.broker.replica.manager import ReplicaManager
from roost.config import BrokerConfig

log = logging.getLogger("roost.broker")


class TopicAdmin:
    def __init__(self, config: BrokerConfig, catalog: TopicCatalog, replicas: ReplicaManager) -> None:
        self.config = config
        self.catalog = catalog
        self.replicas = replicas
        self._on_delete: list[Callable[[str], None]] = []
        for info in catalog:
            replicas.host_partitions(info, range(info.partitions), new=False)

    def on_delete(self, callback: Callable[[str], None]) -> None:
        """Call `callback(topic)` after a topic is deleted (its group offsets go too)."""
        self._on_delete.append(callback)

    def live_broker_ids(self) -> list[int]:
        return self.replicas.metadata.live_broker_ids()

    def create_topic(self, name: str, partitions: int, configs: dict[str, Any], replication: int = 1,
                     assignment: dict[int, list[int]] | None = None) -> TopicInfo:
        info = self.catalog.add(name, partitions, configs)
        self.replicas.host_partitions(info, range(partitions))
        log.info("created topic %s with %d partitions %s", name, partitions, configs or "")
        return info

    def auto_create(self, name: str) -> TopicInfo | None:
        """The topic `name`, created with the defaults if it is new and its name is legal."""
        if topic_name_problem(name) is not None:
            return None
        existing = self.catalog.get(name)
        if existing is not None:
            return existing
        return self.create_topic(name, self.config["num.partitions"], {})

    def add_partitions(self, name: str, total: int, assignment: dict[int, list[int]] | None = None) -> None:
        info = self.catalog.get(name)
        assert info is not None and total > info.partitions
        old = info.partitions
        self.catalog.set_partitions(name, total)
        self.replicas.host_partitions(info, range(old, total))
        log.info("topic %s now has %d partitions", name, total)

    def topic_overrides(self, name: str) -> dict[str, Any] | None:
        info = self.catalog.get(name)
        return None if info is None else dict(info.configs)

    def set_topic_configs(self, name: str, overrides: dict[str, Any]) -> None:
        """Persist the topic's new overrides in the catalog and apply them to its logs at once."""
        self.catalog.set_configs(name, overrides)
        self.replicas.apply_topic_configs(name, overrides)
        log.info("topic %s configs now %s", name, overrides or "the defaults")

    def delete_topic(self, name: str) -> None:
        info = self.catalog.remove(name)
        self.replicas.drop_partitions(name, range(info.partitions))
        for index in range(info.partitions):
            self.replicas.metadata.remove_partition(name, index)
        for callback in self._on_delete:
            callback(name)
        log.info("deleted topic %s", name)
