"""Topic changes in a cluster: written to ZooKeeper the way Kafka's AdminZkClient writes them, then
carried out by the controller; the request waits until the metadata cache shows the result.

CreateTopics, DeleteTopics and CreatePartitions are served by any broker (Kafka's brokers in
ZooKeeper mode answered NOT_CONTROLLER unless they were the controller, which failed clients whose
Metadata named a controller that had just moved; the work is the same ZooKeeper writes wherever it
starts, and ZooKeeper decides races: a second create of a name finds its znode). Auto-creation (a
Metadata or Produce request for an unknown topic) is any broker's: it writes the topic and
answers LEADER_NOT_AVAILABLE until the controller has given it leaders.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from roost.broker.controller.assignment import AssignmentError, assign_replicas
from roost.broker.controller.shell import ControllerShell
from roost.broker.metadata.cache import MetadataCache
from roost.broker.metadata.catalog import (
    OFFSETS_TOPIC,
    SHARE_GROUP_STATE_TOPIC,
    TRANSACTION_STATE_TOPIC,
    TopicInfo,
    topic_name_problem,
)
from roost.broker.zk import layout
from roost.broker.zk.layout import TopicAssignment
from roost.broker.zk.membership import ClusterMembership
from roost.config import BrokerConfig, ConfigError, parse_topic_configs
from roost.wire.kafka.errors import ErrorCode
from roost.zkclient import BadVersionError, ZkError

log = logging.getLogger("roost.broker.admin")


def _render(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


class ClusterTopicAdmin:
    def __init__(self, config: BrokerConfig, membership: ClusterMembership, shell: ControllerShell,
                 metadata: MetadataCache) -> None:
        self.config = config
        self.membership = membership
        self.shell = shell
        self.metadata = metadata
        self._creating: dict[str, asyncio.Task[None]] = {}

    @property
    def catalog(self) -> MetadataCache:
        return self.metadata

    def _racks(self) -> dict[int, str | None]:
        core = self.shell.core
        if core is not None:
            return {b: r.rack for b, r in core.brokers.items()}
        return {b: e.rack for b, e in self.metadata.brokers.items()}

    def live_broker_ids(self) -> list[int]:
        return sorted(self._racks())

    # the requests ------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int, configs: dict[str, Any], replication: int = 1,
                     assignment: dict[int, list[int]] | None = None) -> Any:
        return self._create(name, partitions, configs, replication, assignment)

    async def _create(self, name: str, partitions: int, configs: dict[str, Any], replication: int,
                      assignment: dict[int, list[int]] | None) -> ErrorCode:
        if assignment is None:
            try:
                assignment = assign_replicas(self._racks(), partitions, replication)
            except AssignmentError as error:
                log.warning("cannot create %s: %s", name, error)
                return ErrorCode.INVALID_REPLICATION_FACTOR
        created = await self.membership.create_topic(
            name, TopicAssignment(uuid.uuid4(), assignment), {k: _render(v) for k, v in configs.items()})
        if not created:
            return ErrorCode.TOPIC_ALREADY_EXISTS
        await self.metadata.wait_until(lambda: self._has_leaders(name, partitions))
        return ErrorCode.NONE

    def _has_leaders(self, name: str, partitions: int) -> bool:
        for index in range(partitions):
            info = self.metadata.partition(name, index)
            if info is None or info.leader < 0:
                return False
        return True

    def delete_topic(self, name: str) -> Any:
        return self._delete(name)

    async def _delete(self, name: str) -> ErrorCode:
        await self.membership.request_deletion(name)
        await self.metadata.wait_until(lambda: name not in self.metadata)
        # Answer once the deletion is complete (every replica deleted, the znodes gone), so that
        # the name can be used again at once.
        await self.membership.wait_for_absence(layout.topic_path(name))
        return ErrorCode.NONE

    def add_partitions(self, name: str, total: int, assignment: dict[int, list[int]] | None = None) -> Any:
        return self._add_partitions(name, total, assignment)

    async def _add_partitions(self, name: str, total: int, assignment: dict[int, list[int]] | None) -> ErrorCode:
        for _ in range(3):  # another writer may change the assignment between our read and write
            found = await self.membership.topic_assignment(name)
            if found is None:
                return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            current, version = found
            have = len(current.partitions)
            if total <= have:
                return ErrorCode.INVALID_PARTITIONS
            added = assignment
            if added is None:
                replication = len(current.partitions[0])
                try:
                    added = assign_replicas(self._racks(), total - have, replication, first_partition=have)
                except AssignmentError as error:
                    log.warning("cannot add partitions to %s: %s", name, error)
                    return ErrorCode.INVALID_REPLICATION_FACTOR
            grown = TopicAssignment(current.topic_id, {**current.partitions, **added}, current.adding,
                                    current.removing)
            try:
                await self.membership.set_topic_assignment(name, grown, version)
            except BadVersionError:
                continue
            await self.metadata.wait_until(lambda: self._has_leaders(name, total))
            return ErrorCode.NONE
        return ErrorCode.UNKNOWN_SERVER_ERROR

    async def topic_overrides(self, name: str) -> dict[str, Any] | None:
        """The topic's own configs from ZooKeeper, parsed (None: no such topic)."""
        if name not in self.metadata and await self.membership.topic_assignment(name) is None:
            return None
        raw = await self.membership.topic_config(name)
        try:
            return parse_topic_configs(raw, f"/config/topics/{name}")
        except ConfigError as error:
            log.warning("topic %s has unusable configs in ZooKeeper: %s", name, error)
            return {}

    def set_topic_configs(self, name: str, overrides: dict[str, Any]) -> Any:
        return self._set_topic_configs(name, overrides)

    async def _set_topic_configs(self, name: str, overrides: dict[str, Any]) -> ErrorCode:
        """Any broker may write it (as in Kafka's ZooKeeper mode); each broker applies it when it
        sees the change notification."""
        try:
            await self.membership.change_topic_config(name, {k: _render(v) for k, v in overrides.items()})
        except ZkError as error:
            log.warning("changing the configs of topic %s failed: %r", name, error)
            return ErrorCode.UNKNOWN_SERVER_ERROR
        return ErrorCode.NONE

    # auto-creation -----------------------------------------------------------------------------
    def auto_create(self, name: str) -> TopicInfo | None:
        """Start creating `name` with the defaults (in the background); the topic if it exists."""
        known = self.metadata.get(name)
        if known is not None or topic_name_problem(name) is not None:
            return known
        if name not in self._creating:
            task = asyncio.ensure_future(self._auto_create(name))
            self._creating[name] = task
            task.add_done_callback(lambda _t: self._creating.pop(name, None))
        return None

    async def _auto_create(self, name: str) -> None:
        if name == OFFSETS_TOPIC:
            partitions = self.config["offsets.topic.num.partitions"]
            replication = self.config["offsets.topic.replication.factor"]
            configs: dict[str, Any] = {"cleanup.policy": "compact",
                                       "segment.bytes": self.config["offsets.topic.segment.bytes"],
                                       "retention.ms": -1}
        elif name == TRANSACTION_STATE_TOPIC:
            partitions = self.config["transaction.state.log.num.partitions"]
            replication = self.config["transaction.state.log.replication.factor"]
            configs = {"cleanup.policy": "compact", "retention.ms": -1,
                       "segment.bytes": self.config["transaction.state.log.segment.bytes"],
                       "min.insync.replicas": self.config["transaction.state.log.min.isr"]}
        elif name == SHARE_GROUP_STATE_TOPIC:
            from roost.broker.share.coordinator import share_state_topic_settings

            partitions, replication, configs = share_state_topic_settings(self.config, len(self._racks()))
        else:
            partitions = self.config["num.partitions"]
            replication = self.config["default.replication.factor"]
            configs = {}
        try:
            assignment = assign_replicas(self._racks(), partitions, replication)
        except AssignmentError as error:
            log.warning("cannot auto-create topic %s yet: %s", name, error)
            return
        try:
            if await self.membership.create_topic(name, TopicAssignment(uuid.uuid4(), assignment),
                                                  {k: _render(v) for k, v in configs.items()}):
                log.info("auto-created topic %s: %d partitions, replication factor %d", name, partitions,
                         replication)
        except ZkError as error:
            log.warning("auto-creating topic %s failed: %r", name, error)
