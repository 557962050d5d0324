"""Dynamic broker configs: the defaults of topic configs (log.retention.ms, message.max.bytes, ...)
changed while the brokers run, cluster-wide (`<default>`) or for one broker (`<id>`), as Kafka's
AlterConfigs on a BROKER resource does.

The layers live in the BrokerConfig (`config.dynamic`), so every reader of a setting sees them;
after a change every hosted partition takes its recomputed topic configs. In a cluster they are
kept in /config/brokers/<default> and /config/brokers/<id> with a change notification (each broker
reloads its two layers when one names them); without a keeper, in meta/dynamic-configs.json.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from roost.broker.admin.config_alterations import render
from roost.broker.replica.manager import ReplicaManager
from roost.broker.zk.membership import ClusterMembership
from roost.config import BrokerConfig, ConfigError, parse_dynamic_broker_configs
from roost.log.files import atomic_write
from roost.wire.kafka.errors import ErrorCode
from roost.zkclient import ZkError

log = logging.getLogger("roost.broker")

DEFAULT_ENTITY = "<default>"


class DynamicBrokerConfigs:
    """Base: holds and applies the layers; subclasses persist them."""

    def __init__(self, config: BrokerConfig, broker_id: int, replicas: ReplicaManager) -> None:
        self.config = config
        self.broker_id = broker_id
        self.replicas = replicas

    def entity_for(self, resource_name: str) -> str | None:
        """The layer a BROKER resource names: "" the cluster default, this broker's id its own;
        None for another broker's (its own broker must be asked)."""
        if resource_name == "":
            return DEFAULT_ENTITY
        return str(self.broker_id) if resource_name == str(self.broker_id) else None

    def layer(self, entity: str) -> dict[str, Any]:
        dynamic = self.config.dynamic
        return dynamic.cluster_default if entity == DEFAULT_ENTITY else dynamic.this_broker

    def below(self, entity: str) -> dict[str, Any]:
        """What a setting is when the layer `entity` does not set it (the base of an APPEND)."""
        static = dict(self.config.values)
        if entity != DEFAULT_ENTITY:
            static.update(self.config.dynamic.cluster_default)
        return static

    def apply(self, entity: str, configs: dict[str, Any]) -> None:
        layer = self.layer(entity)
        if layer == configs:
            return
        layer.clear()
        layer.update(configs)
        changed = self.replicas.reapply_configs()
        log.info("dynamic broker configs %s now %s (%d partitions reconfigured)", entity, configs or "empty",
                 changed)

    def set(self, entity: str, configs: dict[str, Any]) -> Any:
        raise NotImplementedError


class LocalDynamicConfigs(DynamicBrokerConfigs):
    """A broker without a keeper: both layers in one JSON file in its data directory."""

    def __init__(self, config: BrokerConfig, broker_id: int, replicas: ReplicaManager, path: Path) -> None:
        super().__init__(config, broker_id, replicas)
        self.path = path
        if path.exists():
            stored = json.loads(path.read_text())
            for entity in (DEFAULT_ENTITY, str(broker_id)):
                try:
                    self.layer(entity).update(parse_dynamic_broker_configs(
                        {k: render(v) for k, v in stored.get(entity, {}).items()}, str(path)))
                except ConfigError as error:
                    log.warning("ignoring the dynamic broker configs %s in %s: %s", entity, path, error)

    def set(self, entity: str, configs: dict[str, Any]) -> None:
        self.apply(entity, configs)
        dynamic = self.config.dynamic
        atomic_write(self.path, json.dumps({DEFAULT_ENTITY: dynamic.cluster_default,
                                            str(self.broker_id): dynamic.this_broker}, sort_keys=True).encode())


class ZkDynamicConfigs(DynamicBrokerConfigs):
    """A broker in a cluster: the layers in /config/brokers/<default> and /config/brokers/<id>."""

    def __init__(self, config: BrokerConfig, broker_id: int, replicas: ReplicaManager,
                 membership: ClusterMembership) -> None:
        super().__init__(config, broker_id, replicas)
        self.membership = membership

    def names_this_broker(self, entity_path: str) -> bool:
        return entity_path in (f"brokers/{DEFAULT_ENTITY}", f"brokers/{self.broker_id}")

    async def reload(self) -> None:
        """Read both layers from ZooKeeper and apply them (at start, and on a notification)."""
        for entity in (DEFAULT_ENTITY, str(self.broker_id)):
            raw = await self.membership.entity_config(f"brokers/{entity}")
            try:
                configs = parse_dynamic_broker_configs(raw, f"/config/brokers/{entity}")
            except ConfigError as error:
                log.warning("ignoring the dynamic broker configs in /config/brokers/%s: %s", entity, error)
                configs = {}
            self.apply(entity, configs)

    def set(self, entity: str, configs: dict[str, Any]) -> Any:
        return self._set(entity, configs)

    async def _set(self, entity: str, configs: dict[str, Any]) -> ErrorCode:
        try:
            await self.membership.change_entity_config(f"brokers/{entity}", {k: render(v) for k, v in configs.items()})
        except ZkError as error:
            log.warning("changing the dynamic broker configs %s failed: %r", entity, error)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        # At once here (a DescribeConfigs that follows sees it); the notification repeats it.
        self.apply(entity, configs)
        return ErrorCode.NONE
