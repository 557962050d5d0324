"""A broker's place in the cluster's ZooKeeper: its registration, the cluster id, topic configs,
and the topic changes any broker may write (Kafka's KafkaZkClient / AdminZkClient, broker side).

Registration is the ephemeral /brokers/ids/<id> made with the broker's own session; its czxid is
the broker epoch, new on every registration. After a crash the previous registration lingers
until its session expires, so a restarting broker waits (bounded) for it to go; one that stays
belongs to another live broker with the same id, and the start is refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Generator
from dataclasses import dataclass
from typing import Any

from roost.broker.zk import layout
from roost.broker.zk.layout import BrokerRegistration, TopicAssignment
from roost.zkclient import (
    ConnectionLossError,
    Create,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionState,
    ZkClient,
    ZkError,
)
from roost.zkclient.watches import EventType, WatchedEvent

log = logging.getLogger("roost.broker.zk")

REGISTRATION_POLL_MS = 200


@dataclass(frozen=True, slots=True)
class CreateNode:
    """Create the ephemeral node; resumed with its Stat, or the ZooKeeper error thrown in."""

    path: str
    data: bytes


@dataclass(frozen=True, slots=True)
class ReadNode:
    """Read a node; resumed with (data, Stat), or the ZooKeeper error thrown in."""

    path: str


@dataclass(frozen=True, slots=True)
class Pause:
    ms: int


RegistrationStep = CreateNode | ReadNode | Pause


class RegistrationError(RuntimeError):
    """This broker cannot join the cluster (its id is taken, or the cluster id differs)."""


class ClusterMembership:
    def __init__(self, zk: ZkClient, registration: BrokerRegistration | None = None) -> None:
        self.zk = zk
        self.registration = registration  # set before start(): the port is known once listening
        self.broker_epoch = -1
        self.cluster_id = ""
        self.epoch_listeners: list[Callable[[int], None]] = []  # told the new broker epoch
        self._reregistering: asyncio.Task[None] | None = None
        self.stopping = False  # set by the broker before it closes its listeners
        zk.add_listener(self._on_session)

    @property
    def broker_id(self) -> int:
        assert self.registration is not None
        return self.registration.broker_id

    async def start(self, known_cluster_id: str | None) -> None:
        """Create the paths every cluster has, agree on the cluster id, and register."""
        for path in layout.PERSISTENT_PATHS:
            await self.zk.ensure_path(path)
        self.cluster_id = await self._cluster_id()
        if known_cluster_id and known_cluster_id != self.cluster_id:
            raise RegistrationError(
                f"this broker's data belongs to cluster {known_cluster_id}, but ZooKeeper at "
                f"{self.zk.server} holds cluster {self.cluster_id}: wrong zookeeper.connect or log.dirs?")
        await self.register()

    async def _cluster_id(self) -> str:
        try:
            data, _ = await self.zk.get(layout.CLUSTER_ID)
            return layout.decode_cluster_id(data)
        except NoNodeError:
            pass
        candidate = layout.new_cluster_id()
        try:
            await self.zk.create(layout.CLUSTER_ID, layout.encode_cluster_id(candidate), makepath=True)
            log.info("created cluster id %s", candidate)
            return candidate
        except NodeExistsError:
            data, _ = await self.zk.get(layout.CLUSTER_ID)
            return layout.decode_cluster_id(data)

    async def register(self) -> None:
        """Create /brokers/ids/<id> (ephemeral); waits up to a session timeout for a previous
        incarnation's node to expire. The decisions are `registration_steps`; this only does
        the ZooKeeper calls and the pauses it asks for."""
        assert self.registration is not None
        loop = asyncio.get_running_loop()
        steps = registration_steps(self.broker_id, self.registration.encode(), lambda: self.zk.session_id,
                                   int(self.zk.session_timeout * 1000), lambda: int(loop.time() * 1000))
        outcome: Any = None
        failure: ZkError | None = None
        while True:
            try:
                step = steps.throw(failure) if failure is not None else steps.send(outcome)
            except StopIteration as done:
                stat = done.value
                break
            outcome, failure = None, None
            try:
                if isinstance(step, CreateNode):
                    _, outcome = await self.zk.create_with_stat(step.path, step.data, ephemeral=True)
                elif isinstance(step, ReadNode):
                    outcome = await self.zk.get(step.path)
                else:
                    await asyncio.sleep(step.ms / 1000)
            except ZkError as error:
                failure = error
        self.broker_epoch = stat.czxid
        log.info("registered as broker %d (epoch %d) at %s:%d", self.broker_id, self.broker_epoch,
                 self.registration.host, self.registration.port)
        for listener in self.epoch_listeners:
            listener(self.broker_epoch)
        with contextlib.suppress(ZkError):
            await self.zk.exists(layout.broker_path(self.broker_id), watch=self._registration_watch)

    def _registration_watch(self, event: WatchedEvent) -> None:
        """Our registration was deleted while our session lives: the controller declared this
        broker dead on a fast signal (controller/liveness.py) that was wrong, or it was slow to
        tell. Register again, with a new broker epoch: the controller then handles this broker as
        bounced (new leader epochs, LeaderAndIsr), and nothing it did under the old epoch counts."""
        if event.type != EventType.NODE_DELETED or self.stopping:
            return
        if self._reregistering is not None and not self._reregistering.done():
            return
        log.warning("this broker's registration %s was deleted while its session lives (declared dead): "
                    "registering again", event.path)
        self._reregistering = asyncio.ensure_future(self._register_again())

    def _on_session(self, event: SessionEvent) -> None:
        if event.state == SessionState.EXPIRED:
            log.warning("ZooKeeper session expired (%s): this broker's registration is gone", event.reason)
        elif event.state == SessionState.CONNECTED and event.new_session and self.broker_epoch >= 0:
            log.info("new ZooKeeper session: registering again")
            self._reregistering = asyncio.ensure_future(self._register_again())

    async def _register_again(self) -> None:
        try:
            await self.register()
        except Exception:
            log.exception("registering again failed")

    # topics -----------------------------------------------------------------------------------
    async def topic_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(layout.topic_config_path(topic))
        except NoNodeError:
            return {}
        return layout.decode_topic_config(topic, data)

    async def change_topic_config(self, topic: str, configs: dict[str, str]) -> None:
        await self.change_entity_config(f"topics/{topic}", configs)

    async def change_entity_config(self, entity_path: str, configs: dict[str, str]) -> None:
        """Write the entity's new configs, then a change notification that every broker (and the
        controller) watches for (Kafka's AdminZkClient.changeConfigs)."""
        path, data = layout.entity_config_path(entity_path), layout.encode_topic_config(configs)
        try:
            await self.zk.set(path, data)
        except NoNodeError:
            try:
                await self.zk.create(path, data, makepath=True)
            except NodeExistsError:
                await self.zk.set(path, data)
        await self.zk.create(f"{layout.CONFIG_CHANGES}/{layout.CONFIG_CHANGE_PREFIX}",
                             layout.encode_entity_change(entity_path), sequential=True)

    async def entity_config(self, entity_path: str) -> dict[str, str]:
        """The configs stored for `brokers/<id>`, `brokers/<default>` or `topics/<t>` ({} if none)."""
        try:
            data, _ = await self.zk.get(layout.entity_config_path(entity_path))
        except NoNodeError:
            return {}
        return layout.decode_topic_config(entity_path, data)

    async def create_topic(self, name: str, assignment: TopicAssignment, configs: dict[str, str]) -> bool:
        """Write a new topic's config and then its assignment (the controller's watch takes it
        from there). False when the topic exists already."""
        try:
            await self.zk.multi([
                Create(layout.topic_config_path(name), layout.encode_topic_config(configs)),
                Create(layout.topic_path(name), assignment.encode()),
            ])
        except NodeExistsError:
            return False
        return True

    async def request_deletion(self, name: str) -> None:
        try:
            await self.zk.create(layout.delete_topic_path(name), b"")
        except NodeExistsError:
            pass

    async def topic_assignment(self, name: str) -> tuple[TopicAssignment, int] | None:
        try:
            data, stat = await self.zk.get(layout.topic_path(name))
        except NoNodeError:
            return None
        return TopicAssignment.decode(name, data), stat.version

    async def set_topic_assignment(self, name: str, assignment: TopicAssignment, version: int) -> None:
        await self.zk.set(layout.topic_path(name), assignment.encode(), version)

    async def wait_for_absence(self, path: str) -> None:
        """Return once `path` does not exist (a watch, not polling; the caller bounds the wait)."""
        while True:
            gone = asyncio.Event()
            if await self.zk.exists(path, watch=lambda _event, seen=gone: seen.set()) is None:
                return
            await gone.wait()

    def describe(self) -> dict[str, Any]:
        return {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch, "cluster_id": self.cluster_id}


def registration_steps(broker_id: int, data: bytes, session_id: Callable[[], int | None], session_timeout_ms: int,
                       clock_ms: Callable[[], int]) -> Generator[RegistrationStep, Any, Any]:
    """The decisions of a registration, sans I/O (the broker's ClusterMembership and the
    replication simulation drive it): create /brokers/ids/<id>; a node found there that is not
    this session's is a previous incarnation's, waited out (bounded); returns the node's Stat,
    whose czxid is the broker epoch."""
    path = layout.broker_path(broker_id)
    deadline = clock_ms() + session_timeout_ms + 2000
    warned = False
    while True:
        try:
            return (yield CreateNode(path, data))
        except ConnectionLossError:
            # The create may have been applied with its reply lost: ask again, and the node,
            # if there, is found to be ours below. (Giving up here left ZooKeeper holding a
            # registration whose epoch this broker never learned: every controller request
            # refused as stale, for good. Found by the replication simulation.)
            if clock_ms() > deadline:
                raise
            yield Pause(REGISTRATION_POLL_MS)
            continue
        except NodeExistsError:
            try:
                _, existing = yield ReadNode(path)
            except NoNodeError:
                continue
            if existing.ephemeral_owner == session_id():
                return existing  # ours already (a retried create)
            if clock_ms() > deadline:
                raise RegistrationError(
                    f"broker id {broker_id} is already registered in ZooKeeper by another live "
                    f"session: is another broker running with broker.id={broker_id}?") from None
            if not warned:
                log.warning("broker id %d is still registered (a previous run?); waiting for that "
                            "session to expire", broker_id)
                warned = True
            yield Pause(REGISTRATION_POLL_MS)
