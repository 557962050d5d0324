"""The controller's shell: election through ZooKeeper, the watches that feed the core, the fenced
writes and the requests to brokers that the core asks for.

Election (Kafka's): one multi creates the ephemeral /controller and sets /controller_epoch to the
next epoch at the version just read; losing it (NODEEXISTS, BADVERSION) means another broker won.
Every broker watches /controller and runs for it again when it disappears.

Once elected, the shell reads the cluster from ZooKeeper, builds a ControllerCore and feeds it
one event at a time (a queue and one task: Kafka's controller event thread). After each event it
makes the core's writes, each multi starting with a check of /controller_epoch at the version
this controller set (so a deposed controller's writes fail as a whole), then hands the broker
requests to one channel per broker (sent in order, retried while that broker lives), then gives
the replies. A write that fails means the controller moved or ZooKeeper changed under it: it
resigns, drops /controller if still its own, and the election runs again from what ZooKeeper holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from roost.broker.controller.core import (
    BrokerRequest,
    ClusterSnapshot,
    ControllerCore,
    ControllerSettings,
    PartitionState,
    Ready,
    ZkWrite,
)
from roost.broker.controller.election import (
    ELECTION_RETRY_MS,
    AfterFailure,
    after_failure,
    bounced_at_activation,
    give_up_claim,
)
from roost.broker.controller.liveness import watch_endpoint
from roost.broker.peer import PeerError, PeerPool
from roost.broker.zk import layout
from roost.broker.zk.layout import BrokerRegistration, LayoutError, LeaderAndIsr, TopicAssignment
from roost.wire.kafka import ApiKey, KafkaCodecError
from roost.wire.kafka.errors import ErrorCode
from roost.zkclient import (
    BadVersionError,
    Check,
    Create,
    Delete,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionState,
    SetData,
    WatchedEvent,
    ZkClient,
    ZkError,
)

log = logging.getLogger("roost.controller")

OPS_PER_MULTI = 500
REQUEST_TIMEOUT_S = 30.0
CHANNEL_RETRY_S = 0.1
TICK_S = 1.0


def now_ms() -> int:
    return int(time.time() * 1000)


class ControllerMoved(Exception):
    """A fenced write failed: this broker is no longer (or never was) the controller."""


EARLY_RETRIES = 100  # a request refused for a broker epoch not learned yet: retried this often


def too_early(answer: dict[str, Any], retries: int) -> bool:
    """STALE_BROKER_EPOCH for a request made for the broker's current registration: it has not
    learned that epoch yet; worth asking again (bounded)."""
    return answer.get("error_code", 0) == ErrorCode.STALE_BROKER_EPOCH and retries < EARLY_RETRIES


class _Channel:
    """Requests to one broker, sent one at a time in order (Kafka's RequestSendThread)."""

    def __init__(self, shell: ControllerShell, broker: BrokerRegistration) -> None:
        self.broker = broker
        self._shell = shell
        self._queue: asyncio.Queue[BrokerRequest] = asyncio.Queue()
        self._task = asyncio.ensure_future(self._run())
        # The fast failure detection (controller/liveness.py): an idle connection to the broker's
        # registered endpoint, whose end followed by two refusals declares this incarnation dead.
        self._watch: asyncio.Task[None] | None = None
        if broker.broker_id != shell.broker_id:
            self._watch = asyncio.ensure_future(watch_endpoint(
                broker.host, broker.port, lambda evidence: shell.suspect(broker, evidence)))

    def send(self, request: BrokerRequest) -> None:
        self._queue.put_nowait(request)

    async def _run(self) -> None:
        shell = self._shell
        while True:
            request = await self._queue.get()
            early = 0
            while True:
                peer = shell.peers.get(self.broker.broker_id, self.broker.host, self.broker.port)
                try:
                    answer = await peer.request(request.api_key, request.version, request.body, REQUEST_TIMEOUT_S)
                    if too_early(answer, early) and shell.broker_is_live(self.broker):
                        # The broker has not learned its new epoch yet (the reply to its
                        # registration was lost or is late): the same request again shortly, or
                        # it would never learn its partitions' state.
                        early += 1
                        await asyncio.sleep(CHANNEL_RETRY_S)
                        continue
                    break
                except (PeerError, KafkaCodecError) as error:
                    if not shell.broker_is_live(self.broker):
                        answer = None
                        break
                    log.info("request %s to broker %d failed: %s; retrying", request.api_key.name,
                             self.broker.broker_id, error)
                    await asyncio.sleep(CHANNEL_RETRY_S)
            if answer is not None:
                shell.answered(self.broker.broker_id, request, answer)

    def close(self) -> None:
        self._task.cancel()
        if self._watch is not None:
            self._watch.cancel()


class ControllerShell:
    def __init__(self, zk: ZkClient, broker_id: int, settings: ControllerSettings, peers: PeerPool,
                 on_controller: Callable[[int], None] | None = None) -> None:
        self.zk = zk
        self.broker_id = broker_id
        self.settings = settings
        self.peers = peers
        self.on_controller = on_controller or (lambda controller_id: None)
        self.core: ControllerCore | None = None
        self.controller_id = -1
        self.epoch = -1
        self._epoch_version = -1
        self._events: asyncio.Queue[Callable[[], Awaitable[None]]] = asyncio.Queue()
        self._worker: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        self._channels: dict[int, _Channel] = {}
        self._waiting: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._tokens = 0
        self._topic_watched: set[str] = set()
        # The zxid of the last write of each partition state read at activation.
        self._state_mzxid: dict[tuple[str, int], int] = {}
        self._stopped = False
        self._controller_watcher: asyncio.Task[None] | None = None  # on another broker's controller
        zk.add_listener(self._on_session)

    @property
    def active(self) -> bool:
        return self.core is not None

    # lifecycle --------------------------------------------------------------------------------
    async def start(self) -> None:
        self._worker = asyncio.ensure_future(self._work())
        self._post(self._run_election)

    async def stop(self) -> None:
        self._stopped = True
        if self._controller_watcher is not None:
            self._controller_watcher.cancel()
        await self._resign("shutting down")
        for task in (self._worker, self._ticker):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    def _post(self, event: Callable[[], Awaitable[None]]) -> None:
        if not self._stopped:
            self._events.put_nowait(event)

    async def _work(self) -> None:
        while True:
            event = await self._events.get()
            try:
                await event()
            except ControllerMoved as moved:
                await self._resign(str(moved))
                self._post(self._run_election)
            except ZkError as error:
                log.warning("controller event failed on ZooKeeper: %r", error)
                await self._after_failure(f"ZooKeeper error {error!r}")
            except Exception:
                log.exception("controller event failed")
                await self._after_failure("internal error")

    async def _after_failure(self, reason: str) -> None:
        if after_failure(self.active) is AfterFailure.RESIGN_AND_ELECT:
            await self._resign(reason)
            self._post(self._run_election)
        else:
            asyncio.get_running_loop().call_later(ELECTION_RETRY_MS / 1000, self._post, self._run_election)

    def _on_session(self, event: SessionEvent) -> None:
        if event.state == SessionState.EXPIRED and self.active:
            # Our /controller is gone with the session: someone else may be elected any moment.
            self._post(lambda: self._resign("ZooKeeper session expired"))
        elif event.state == SessionState.CONNECTED and event.new_session:
            self._post(self._run_election)

    # election ---------------------------------------------------------------------------------
    async def _run_election(self) -> None:
        if self._stopped:
            return
        if self.active:
            # A broker that found this controller dead (a wrong verdict: we live) may have given
            # our claim up; another controller may be elected any moment: step aside now rather
            # than at our first fenced write.
            stat = await self.zk.exists(layout.CONTROLLER, watch=self._controller_watch)
            if stat is None or stat.ephemeral_owner != self.zk.session_id:
                await self._resign(f"{layout.CONTROLLER} is no longer this controller's claim")
                self._post(self._run_election)
            return
        try:
            data, stat = await self.zk.get(layout.CONTROLLER, watch=self._controller_watch)
            controller_id = layout.decode_controller(data)
            if give_up_claim(controller_id, stat.ephemeral_owner, self.broker_id, self.zk.session_id, self.active):
                log.warning("%s names this broker but no controller runs here: giving it up", layout.CONTROLLER)
                await self.zk.delete(layout.CONTROLLER, stat.version)
                return
            self._learn_controller(controller_id)
            return
        except NoNodeError:
            pass
        except LayoutError as error:
            log.warning("unreadable %s: %s", layout.CONTROLLER, error)
            return
        try:
            data, stat = await self.zk.get(layout.CONTROLLER_EPOCH)
            epoch, version = layout.decode_controller_epoch(data), stat.version
        except NoNodeError:
            try:
                await self.zk.create(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(0))
            except NodeExistsError:
                pass
            data, stat = await self.zk.get(layout.CONTROLLER_EPOCH)
            epoch, version = layout.decode_controller_epoch(data), stat.version
        try:
            await self.zk.multi([
                Create(layout.CONTROLLER, layout.encode_controller(self.broker_id), ephemeral=True),
                SetData(layout.CONTROLLER_EPOCH, layout.encode_controller_epoch(epoch + 1), version),
            ])
        except (NodeExistsError, BadVersionError):
            # Another broker won; learn who and watch for its end.
            self._post(self._run_election)
            return
        self.epoch, self._epoch_version = epoch + 1, version + 1
        log.info("broker %d is the controller (epoch %d)", self.broker_id, self.epoch)
        await self.zk.exists(layout.CONTROLLER, watch=self._controller_watch)
        self._learn_controller(self.broker_id)
        await self._activate()

    def _controller_watch(self, event: WatchedEvent) -> None:
        self._post(self._run_election)

    def _learn_controller(self, controller_id: int) -> None:
        if controller_id != self.controller_id:
            self.controller_id = controller_id
            self.on_controller(controller_id)
            if self._controller_watcher is not None:
                self._controller_watcher.cancel()
                self._controller_watcher = None
            if controller_id not in (-1, self.broker_id) and not self._stopped:
                self._controller_watcher = asyncio.ensure_future(self._watch_controller(controller_id))

    async def _watch_controller(self, controller_id: int) -> None:
        """The fast failure detection (controller/liveness.py) for the controller itself, run by
        every other broker: when the controller's process is gone, give its claim up (delete
        /controller) so that the election runs now rather than when its session expires. The
        delete is conditional on /controller_epoch's version read *before* the claim was read, so
        it can only delete the claim of the controller that was watched, never a newer one. A
        controller found dead wrongly sees its claim gone and resigns (and its writes were fenced
        by the next controller's epoch anyway)."""
        try:
            _, epoch_stat = await self.zk.get(layout.CONTROLLER_EPOCH)
            data, _ = await self.zk.get(layout.CONTROLLER)
            if layout.decode_controller(data) != controller_id:
                return
            data, stat = await self.zk.get(layout.broker_path(controller_id))
            registration = BrokerRegistration.decode(controller_id, data, stat.czxid)
        except (ZkError, LayoutError):
            return  # no fast path this time: the session's expiry still ends the claim
        found: list[str] = []
        await watch_endpoint(registration.host, registration.port, found.append)
        if self.controller_id != controller_id or self.active or self._stopped:
            return
        log.warning("the controller, broker %d, looks dead: %s; giving its claim up", controller_id, found[0])
        try:
            await self.zk.multi([Check(layout.CONTROLLER_EPOCH, epoch_stat.version), Delete(layout.CONTROLLER)])
        except ZkError:
            pass  # an election ran meanwhile, or the claim is gone already

    async def _activate(self) -> None:
        snapshot = await self._load()
        bounced = bounced_at_activation(snapshot, self._state_mzxid)
        everyone = dict(snapshot.brokers)
        snapshot.brokers = {b: r for b, r in everyone.items() if b not in bounced}
        self.core = ControllerCore(self.broker_id, self.epoch, self.settings, snapshot, now_ms())
        if bounced:
            log.warning("brokers %s registered after the partition states naming them were written: "
                        "handled as bounced", sorted(bounced))
            self.core.brokers_changed(everyone)
        self.core.check()
        for broker in everyone.values():
            self._channel(broker)
        await self._execute(self.core.ready())
        self._ticker = asyncio.ensure_future(self._tick_loop())
        await self._log_dir_events()

    async def _resign(self, reason: str) -> None:
        if self.core is None:
            return
        log.warning("controller %d resigns (epoch %d): %s", self.broker_id, self.epoch, reason)
        self.core = None
        if self._ticker is not None:
            self._ticker.cancel()
            self._ticker = None
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()
        self._topic_watched.clear()
        for future in self._waiting.values():
            if not future.done():
                future.set_exception(ControllerMoved(reason))
        self._waiting.clear()
        with contextlib.suppress(ZkError, LayoutError):
            data, stat = await self.zk.get(layout.CONTROLLER)
            if layout.decode_controller(data) == self.broker_id and stat.ephemeral_owner == self.zk.session_id:
                await self.zk.delete(layout.CONTROLLER, stat.version)
        self.controller_id = -1

    # reading the cluster -----------------------------------------------------------------------
    async def _load(self) -> ClusterSnapshot:
        self._state_mzxid.clear()
        brokers = await self._read_brokers()
        names = await self.zk.get_children(layout.BROKER_TOPICS, watch=self._topics_watch)
        topics: dict[str, TopicAssignment] = {}
        for name, assignment in zip(names, await asyncio.gather(*(self._read_topic(n) for n in names)),
                                    strict=True):
            if assignment is not None:
                topics[name] = assignment
        wanted = [(name, index) for name, a in topics.items() for index in a.partitions]
        found = await asyncio.gather(*(self._read_state(t, p) for t, p in wanted))
        states = {tp: state for tp, state in zip(wanted, found, strict=True) if state is not None}
        configs = dict(zip(topics, await asyncio.gather(*(self._read_config(t) for t in topics)), strict=True))
        deleting = set(await self.zk.get_children(layout.DELETE_TOPICS, watch=self._deletions_watch))
        await self.zk.get_children(layout.CONFIG_CHANGES, watch=self._config_changes_watch)
        return ClusterSnapshot(brokers, topics, states, configs, deleting)

    async def _read_brokers(self) -> dict[int, BrokerRegistration]:
        children = await self.zk.get_children(layout.BROKER_IDS, watch=self._brokers_watch)
        ids = [int(c) for c in children if c.isdigit()]

        async def read(broker: int) -> BrokerRegistration | None:
            try:
                data, stat = await self.zk.get(layout.broker_path(broker))
                return BrokerRegistration.decode(broker, data, stat.czxid)
            except NoNodeError:
                return None
            except LayoutError as error:
                log.warning("ignoring broker %d: %s", broker, error)
                return None

        found = await asyncio.gather(*(read(b) for b in ids))
        return {r.broker_id: r for r in found if r is not None}

    async def _read_topic(self, name: str) -> TopicAssignment | None:
        try:
            data, stat = await self.zk.get(layout.topic_path(name), watch=self._topic_watch)
            self._topic_watched.add(name)
            return TopicAssignment.decode(name, data, stat.version)
        except NoNodeError:
            return None
        except LayoutError as error:
            log.warning("ignoring topic %s: %s", name, error)
            return None

    async def _read_state(self, topic: str, index: int) -> PartitionState | None:
        path = layout.partition_state_path(topic, index)
        try:
            data, stat = await self.zk.get(path)
        except NoNodeError:
            return None
        self._state_mzxid[(topic, index)] = stat.mzxid
        return PartitionState(LeaderAndIsr.decode(path, data), stat.version)

    async def _read_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = await self.zk.get(layout.topic_config_path(topic))
            return layout.decode_topic_config(topic, data)
        except (NoNodeError, LayoutError):
            return {}

    # watches (each posts an event; the event reads what is there now) ---------------------------
    def _brokers_watch(self, event: WatchedEvent) -> None:
        self._post(self._brokers_changed)

    async def _brokers_changed(self) -> None:
        if self.core is None:
            return
        brokers = await self._read_brokers()
        for broker_id in list(self._channels):
            channel = self._channels[broker_id]
            known = brokers.get(broker_id)
            if known is None or known.epoch != channel.broker.epoch:
                channel.close()
                del self._channels[broker_id]
                self.peers.drop(broker_id)
        for broker in brokers.values():
            self._channel(broker)
        await self._run(lambda core: core.brokers_changed(brokers))

    def _topics_watch(self, event: WatchedEvent) -> None:
        self._post(self._topics_changed)

    def _topic_watch(self, event: WatchedEvent) -> None:
        self._topic_watched.discard(event.path.rsplit("/", 1)[-1])
        self._post(self._topics_changed)

    async def _topics_changed(self) -> None:
        if self.core is None:
            return
        names = await self.zk.get_children(layout.BROKER_TOPICS, watch=self._topics_watch)
        topics: dict[str, TopicAssignment] = {}
        for name in names:
            if self.core is None:
                return  # resigned meanwhile (stop() runs beside the events)
            known = self.core.topics.get(name)
            if known is not None and name in self._topic_watched:
                topics[name] = known  # unchanged since we read it (its data watch is armed)
                continue
            assignment = await self._read_topic(name)
            if assignment is not None:
                topics[name] = assignment
        new = [n for n in topics if n not in self.core.topics]
        configs = await asyncio.gather(*(self._read_config(n) for n in new))
        for name, config in zip(new, configs, strict=True):
            self.core.topic_configs[name] = config
        await self._run(lambda core: core.topics_changed(topics))

    def _deletions_watch(self, event: WatchedEvent) -> None:
        self._post(self._deletions_changed)

    async def _deletions_changed(self) -> None:
        if self.core is None:
            return
        names = await self.zk.get_children(layout.DELETE_TOPICS, watch=self._deletions_watch)
        await self._run(lambda core: core.delete_requested(names))

    def _log_dir_events_watch(self, event: WatchedEvent) -> None:
        self._post(self._log_dir_events)

    async def _log_dir_events(self) -> None:
        """Brokers' failed log directories: each notification is acted on, then deleted."""
        if self.core is None:
            return
        try:
            children = await self.zk.get_children(layout.LOG_DIR_EVENTS, watch=self._log_dir_events_watch)
        except NoNodeError:
            return
        for child in sorted(children):
            path = f"{layout.LOG_DIR_EVENTS}/{child}"
            try:
                data, _ = await self.zk.get(path)
                broker = layout.decode_log_dir_event(data)
            except (NoNodeError, LayoutError):
                continue
            await self._run(lambda core, b=broker: core.log_dir_failed(b))
            with contextlib.suppress(NoNodeError):
                await self.zk.delete(path)

    def _config_changes_watch(self, event: WatchedEvent) -> None:
        self._post(self._config_changes)

    async def _config_changes(self) -> None:
        if self.core is None:
            return
        children = await self.zk.get_children(layout.CONFIG_CHANGES, watch=self._config_changes_watch)
        for child in sorted(children)[-50:]:  # the recent ones; each names a topic to re-read
            try:
                data, _ = await self.zk.get(f"{layout.CONFIG_CHANGES}/{child}")
                topic = layout.decode_config_change(data)
            except (NoNodeError, LayoutError):
                continue
            if topic is not None and self.core is not None and topic in self.core.topics:
                config = await self._read_config(topic)
                if self.core.topic_configs.get(topic) != config:
                    await self._run(lambda core, t=topic, c=config: core.topic_configs_changed(t, c))

    async def _tick_loop(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            self._post(lambda: self._run(lambda core: core.tick(now_ms())))

    # requests from brokers ----------------------------------------------------------------------
    async def call(self, action: Callable[[ControllerCore, int], None]) -> dict[str, Any]:
        """Run `action(core, token)` as a controller event and wait for the reply it produces."""
        if self.core is None:
            raise ControllerMoved("not the controller")
        self._tokens += 1
        token = self._tokens
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._waiting[token] = future
        self._post(lambda: self._run(lambda core: action(core, token)))
        return await future

    # running the core -------------------------------------------------------------------------
    async def _run(self, step: Callable[[ControllerCore], None]) -> None:
        core = self.core
        if core is None:
            return
        step(core)
        core.check()
        await self._execute(core.ready())

    async def _execute(self, ready: Ready) -> None:
        if ready.empty():
            return
        await self._ensure_paths(ready.ensure_paths)
        ops = []
        for write in ready.writes:
            if write.op == "delete_if_present":
                await self._fenced(ops)
                ops = []
                await self._delete_if_present(write.path)
            else:
                ops.extend(await self._ops(write))
        await self._fenced(ops)
        for request in ready.requests:
            channel = self._channels.get(request.broker_id)
            if channel is not None:
                channel.send(request)
        for reply in ready.replies:
            future = self._waiting.pop(reply.token, None) if isinstance(reply.token, int) else None
            if future is not None and not future.done():
                future.set_result(reply.body)

    async def _fenced(self, ops: list[Any]) -> None:
        for start in range(0, len(ops), OPS_PER_MULTI):
            chunk = ops[start:start + OPS_PER_MULTI]
            try:
                await self.zk.multi([Check(layout.CONTROLLER_EPOCH, self._epoch_version), *chunk])
            except ZkError as error:
                raise ControllerMoved(f"a fenced write failed: {error!r}") from error

    async def _delete_if_present(self, path: str) -> None:
        """Delete `path` under the controller-epoch check; a node already gone is no failure."""
        try:
            await self.zk.multi([Check(layout.CONTROLLER_EPOCH, self._epoch_version), Delete(path)])
        except NoNodeError as error:
            if getattr(error, "op_index", None) != 1:
                raise ControllerMoved(f"a fenced write failed: {error!r}") from error
        except ZkError as error:
            raise ControllerMoved(f"a fenced write failed: {error!r}") from error

    async def _ensure_paths(self, paths: list[str]) -> None:
        """Create the paths and their missing ancestors, level by level, each level's creates
        pipelined (a thousand new partitions must not cost a thousand round trips in a row)."""
        wanted: set[str] = set()
        for path in paths:
            parts = path.strip("/").split("/")
            wanted.update("/" + "/".join(parts[:depth]) for depth in range(1, len(parts) + 1))
        by_depth: dict[int, list[str]] = {}
        for path in wanted:
            by_depth.setdefault(path.count("/"), []).append(path)

        async def create(path: str) -> None:
            try:
                await self.zk.create(path)
            except NodeExistsError:
                pass

        for depth in sorted(by_depth):
            await asyncio.gather(*(create(path) for path in sorted(by_depth[depth])))

    async def _ops(self, write: ZkWrite) -> list[Any]:
        if write.op == "create":
            return [Create(write.path, write.data)]
        if write.op == "set":
            return [SetData(write.path, write.data, write.version)]
        if write.op == "delete":
            return [Delete(write.path, write.version)]
        assert write.op == "delete_tree", write.op
        return [Delete(path) for path in await self._subtree(write.path)]

    async def _subtree(self, path: str) -> list[str]:
        """`path` and everything below it, deepest first (what exists now)."""
        try:
            children = await self.zk.get_children(path)
        except NoNodeError:
            return []
        below = []
        for child in children:
            below.extend(await self._subtree(f"{path}/{child}"))
        return [*below, path]

    def _channel(self, broker: BrokerRegistration) -> None:
        known = self._channels.get(broker.broker_id)
        if known is None or known.broker.epoch != broker.epoch:
            if known is not None:
                known.close()
            self._channels[broker.broker_id] = _Channel(self, broker)

    def suspect(self, broker: BrokerRegistration, evidence: str) -> None:
        """The fast failure detection's verdict on `broker` (this incarnation): the core decides."""
        log.warning("broker %d (epoch %d) looks dead: %s", broker.broker_id, broker.epoch, evidence)
        self._post(lambda: self._run(lambda core: core.broker_suspected_dead(broker.broker_id, broker.epoch,
                                                                             evidence)))

    def broker_is_live(self, broker: BrokerRegistration) -> bool:
        core = self.core
        return core is not None and core.brokers.get(broker.broker_id) == broker

    def answered(self, broker: int, request: BrokerRequest, answer: dict[str, Any]) -> None:
        """A broker answered a request: StopReplica answers drive topic deletion; LeaderAndIsr
        answers name the replicas on failed log directories."""
        if request.api_key == ApiKey.LEADER_AND_ISR and answer.get("error_code", 0) == ErrorCode.NONE:
            by_id = {topic["topic_id"]: topic["topic_name"] for topic in request.body["topic_states"]}
            offline = [(by_id[topic["topic_id"]], error["partition_index"])
                       for topic in answer.get("topics", []) if topic.get("topic_id") in by_id
                       for error in topic["partition_errors"] if error["error_code"] == ErrorCode.KAFKA_STORAGE_ERROR]
            if offline:
                self._post(lambda: self._run(lambda core: core.replicas_offline(broker, offline)))
        elif request.api_key == ApiKey.STOP_REPLICA:
            if answer.get("error_code", 0) != ErrorCode.NONE:
                return
            results = [(e["topic_name"], e["partition_index"], e["error_code"])
                       for e in answer.get("partition_errors", [])]
            self._post(lambda: self._run(lambda core: core.stop_replica_answered(broker, results)))
        elif answer.get("error_code", 0) != ErrorCode.NONE:
            log.warning("broker %d answered %s with error %d", broker, request.api_key.name, answer["error_code"])
