"""One simulated broker process: Roost's real replication parts, driven by the simulation.

Real objects, called as the real broker calls them:
- `ReplicaManager` (LeaderAndIsr through `InterBrokerApi.handle_leader_and_isr`, which checks
  broker and controller epochs; `_apply_state`; StopReplica; the append door's `_append_to_leader`; `read`;
  `follower_fetched` and `diverging_epoch`), `Partition`, `PartitionState`, `MetadataCache`
  (UpdateMetadata), real `PartitionLog`s (see logs.py);
- the leader's side of a replica fetch: the real `FetchApi` and fetch door (`ReplicaManager.fetch`,
  `FetchPlan`: its follower checks, divergence, follower positions, ISR expansion trigger, reads;
  the long-poll `DelayedFetch`);
- the follower's side and the ISR: the real `ReplicaFetchers`/`LeaderFetcher` activities and the
  real `IsrManager` (expand, the shrink check, the AlterPartition sender), run on the simulation's
  shell (shell.py: their requests on the simulated network, their fsyncs on the simulated
  committer, their sleeps on the simulated clock);
- registration: the real `registration_steps`, its calls on the simulated ZooKeeper;
- produce: the real `ProduceApi`, the append door (`ReplicaManager.append`) and the purgatory
  (`DelayedProduce`); their futures and timers, and the long-poll's, on the simulated clock
  (`SimWaits`);
- controlled shutdown: the real `controlled_shutdown` activity, on the simulation's shell;
- the controller: the real activities (controller.py).

Timings are the real ones scaled down (see the constants).
"""

from __future__ import annotations

import itertools
from collections.abc import Generator
from typing import TYPE_CHECKING, Any

from roost.broker.activity import effects
from roost.broker.admin.controlled_shutdown import controlled_shutdown
from roost.broker.controller.core import ELECTION_PREFERRED
from roost.broker.handlers.cluster import InterBrokerApi
from roost.broker.handlers.fetch import FetchApi
from roost.broker.handlers.offsets import OffsetsApi
from roost.broker.handlers.produce import ProduceApi
from roost.broker.metadata.cache import MetadataCache
from roost.broker.net.request import NO_RESPONSE, Request
from roost.broker.replica.append import Appending, AppendOrigin, AppendOutcome
from roost.broker.replica.fetcher import ReplicaFetchers
from roost.broker.replica.isr import IsrManager
from roost.broker.replica.manager import ReplicaManager
from roost.broker.replica.partition import Partition
from roost.broker.zk import layout
from roost.broker.zk.layout import BrokerRegistration
from roost.broker.zk.membership import CreateNode, ReadNode, registration_steps
from roost.config import BrokerConfig, parse_topic_configs
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.framing import RequestHeader
from roost.wire.zk.constants import EventType
from roost.zkclient import ZkError
from tests.sim.replication.controller import ControllerMoved, SimControllerShell
from tests.sim.replication.logs import SimCommitter, SimLogManager, SimPartitionLog, abandon
from tests.sim.replication.runtime import Rpc, SimFuture, SimWaits, Sleep, Task, TaskLoop
from tests.sim.replication.shell import SimShell
from tests.sim.replication.zk import Event, SimZkClient, ZkCall

if TYPE_CHECKING:
    from tests.sim.replication.cluster import Cluster

Gen = Generator[Any, Any, Any]
TopicPartition = tuple[str, int]

# Kafka's settings, scaled to the simulation's clock (the real defaults in brackets).
SESSION_TIMEOUT_MS = 1200  # zookeeper.session.timeout.ms [6000]
REPLICA_LAG_MAX_MS = 2000  # replica.lag.time.max.ms [30000]; above the session timeout (KIP-537)
FETCH_WAIT_MAX_MS = 100  # replica.fetch.wait.max.ms [500]
FETCH_BACKOFF_MS = 100  # replica.fetch.backoff.ms
FETCH_TIMEOUT_MS = 1000  # the fetcher's request timeout [30 s]
ALTER_PARTITION_TIMEOUT_MS = 1000  # [10 s]
CONTROLLED_SHUTDOWN_RETRIES = 3
CONTROLLED_SHUTDOWN_BACKOFF_MS = 500
CONTROLLED_SHUTDOWN_TIMEOUT_MS = 1000  # [10 s]
LEADERSHIPS_GONE_WAIT_MS = 2000
EARLIEST = -2  # ListOffsets' timestamp for the log start
HW_CHECKPOINT_INTERVAL_MS = 1000  # replica.high.watermark.checkpoint.interval.ms [5000]

FETCH_SETTINGS = {"replica.fetch.wait.max.ms": FETCH_WAIT_MAX_MS, "replica.fetch.min.bytes": 1,
                  "replica.fetch.response.max.bytes": 10 * 1024 * 1024, "replica.fetch.max.bytes": 1024 * 1024,
                  "replica.fetch.backoff.ms": FETCH_BACKOFF_MS}
ISR_SETTINGS = {"replica.lag.time.max.ms": REPLICA_LAG_MAX_MS}

_correlation = itertools.count(1)


def run_sync(coroutine: Any) -> Any:
    """Run a coroutine that never waits (the real async handlers only await the topic configs,
    which the simulation answers at once, and `asyncio.sleep(0)`, a bare yield to let the loop
    run between many new logs, which here just goes on)."""
    for _ in range(1_000_000):
        try:
            yielded = coroutine.send(None)
        except StopIteration as stop:
            return stop.value
        if yielded is not None:
            break  # a future: the handler really waits
    coroutine.close()
    raise AssertionError("a handler suspended in the simulation")


def wire_copy(response: dict[str, Any]) -> dict[str, Any]:
    """What the network delivers: the records as bytes read now, every dict a copy."""
    out = dict(response)
    topics = []
    for topic in response["responses"]:
        partitions = []
        for entry in topic["partitions"]:
            entry = dict(entry)
            records = entry.get("records")
            if isinstance(records, list):
                entry["records"] = b"".join(bytes(r) for r in records)
            partitions.append(entry)
        topics.append({**topic, "partitions": partitions})
    out["responses"] = topics
    return out


def _reraise(leader: int, error: BaseException) -> None:
    raise error  # in the simulation a bug applying a fetch answer fails the run


class SimReplicaFetchers(ReplicaFetchers):
    """The real fetchers on the simulation's shell, its clock, and a bug failing the run."""

    def __init__(self, proc: BrokerProcess) -> None:
        shell = SimShell(proc.loop, lambda broker: broker in self.endpoints, proc.committer, proc.observe)
        super().__init__(proc.broker_id, FETCH_SETTINGS, proc.logs, None,  # type: ignore[arg-type]
                         clock_ms=proc.cluster.world_clock, spawn=shell.spawn)
        self.request_timeout_ms = FETCH_TIMEOUT_MS
        self.on_bug = _reraise


class SimReplicaManager(ReplicaManager):
    """The real replica manager; it also keeps what its append door's last call appended to
    which partition (the checker notes each acknowledged write's log digest)."""

    last_append: list[tuple[Partition, AppendOutcome]] = []

    def append(self, entries: Any, acks: int, origin: AppendOrigin, timeout_s: float,
               transactional_id: str | None = None) -> Appending:
        appending = super().append(entries, acks, origin, timeout_s, transactional_id)
        hosted = self.partitions
        self.last_append = [(partition, outcome) for (key, _), outcome in zip(entries, appending.outcomes, strict=True)
                            if (partition := hosted.get(key)) is not None]
        return appending


class BrokerProcess:
    """One incarnation of a broker: everything it holds in memory dies with it."""

    def __init__(self, cluster: Cluster, broker_id: int, incarnation: int) -> None:
        self.cluster = cluster
        self.world = cluster.world
        self.broker_id = broker_id
        self.incarnation = incarnation
        self.loop = TaskLoop(self.world, f"b{broker_id}.{incarnation}", dispatch=self._dispatch)
        self.config = BrokerConfig.build([("sim", {"broker.id": broker_id})])
        self.metadata = MetadataCache()
        self.committer = SimCommitter(self.world, lambda: self.loop.alive, cluster.fsync_ms)
        self.logs = SimLogManager(cluster.data_dir(broker_id), self.committer, cluster.clock_ms, self._log_opened)
        self.replicas = SimReplicaManager(broker_id, self.config, self.logs, self.metadata,  # type: ignore[arg-type]
                                          clock_ms=cluster.world_clock,
                                          waits=SimWaits(self.world, lambda: self.loop.alive))
        self.produce = ProduceApi(self.replicas, self.metadata, None)
        self.fetch = FetchApi(self.replicas, self.metadata)
        self.fetchers = SimReplicaFetchers(self)
        self.inter = InterBrokerApi(self.replicas, self.metadata, self.fetchers, self._topic_config,
                                    lambda topic: None)
        self.offsets = OffsetsApi(self.replicas)
        self.isr = IsrManager(broker_id, ISR_SETTINGS, self.replicas, self.metadata, None,  # type: ignore[arg-type]
                              spawn=SimShell(self.loop, lambda broker: self.metadata.endpoint(broker) is not None).spawn)
        self.isr.request_timeout_ms = ALTER_PARTITION_TIMEOUT_MS
        self.replicas.on_become_follower = self.fetchers.follow
        self.replicas.on_stop_following = self.fetchers.unfollow
        self.open_logs: dict[TopicPartition, SimPartitionLog] = {}
        self.zk = SimZkClient(cluster.zk, self.world, self.loop, broker_id, SESSION_TIMEOUT_MS,
                              link_up=lambda: cluster.zk_link_up(broker_id), latency=cluster.zk_latency,
                              lost_reply=cluster.zk_lost_reply)
        self.zk.listeners.append(self._on_session)
        self.controller = SimControllerShell(self, cluster.controller_settings)
        self.registration = BrokerRegistration(broker_id, "sim", 9000 + broker_id)
        self.registered = False
        self._reregistering: Task | None = None
        self.stopping = False
        self.max_controller_epoch_applied = 0

    @property
    def alive(self) -> bool:
        return self.loop.alive

    def observe(self, effect: effects.Request) -> None:
        """Counts what the real fetchers ask for (the summary's out-of-range fetches)."""
        if effect.api_key == ApiKey.LIST_OFFSETS and \
                effect.body["topics"][0]["partitions"][0]["timestamp"] == EARLIEST:
            self.cluster.stats["offset_out_of_range"] += 1

    # start and stop -----------------------------------------------------------------------------
    def start(self) -> None:
        self.loop.spawn(self._join_cluster(), "join")

    def _join_cluster(self) -> Gen:
        try:
            self.zk.start()
            for path in layout.PERSISTENT_PATHS:
                yield from self.zk.ensure_path(path)
            yield from self._register()
        except ZkError as error:
            # Broker.start fails and the process exits (here: the cluster starts it again).
            self.cluster.note(f"b{self.broker_id} could not join the cluster ({error!r}): the process exits")
            self.cluster.start_failed(self)
            return
        self.isr.start()
        self.loop.spawn(self._checkpoint_loop(), "hw-checkpoints")
        self.controller.start()

    def _checkpoint_loop(self) -> Gen:
        """ReplicaManager.start_checkpoints."""
        while True:
            yield Sleep(HW_CHECKPOINT_INTERVAL_MS)
            self.replicas.checkpoint_high_watermarks()

    def _register(self) -> Gen:
        """ClusterMembership.register: the real decisions (registration_steps), their ZooKeeper
        calls and pauses made on the simulated ZooKeeper and clock."""
        steps = registration_steps(self.broker_id, self.registration.encode(self.world.now),
                                   lambda: self.zk.session_id, SESSION_TIMEOUT_MS, self.cluster.world_clock)
        outcome: Any = None
        failure: ZkError | None = None
        while True:
            try:
                step = steps.throw(failure) if failure is not None else steps.send(outcome)
            except StopIteration as done:
                node = done.value
                break
            outcome, failure = None, None
            try:
                if isinstance(step, CreateNode):
                    outcome = yield from self.zk.create(step.path, step.data, ephemeral=True)
                elif isinstance(step, ReadNode):
                    outcome = yield from self.zk.get(step.path)
                else:
                    yield Sleep(step.ms)
            except ZkError as error:
                failure = error
        epoch = node.czxid
        self.replicas.broker_epoch = epoch
        self.fetchers.broker_epoch = epoch
        self.registered = True
        self.cluster.note(f"b{self.broker_id} registered (broker epoch {epoch})")
        if self.cluster.fast_detection:  # see Cluster.fast_detection
            try:
                yield from self.zk.exists(layout.broker_path(self.broker_id), watch=self._registration_watch)
            except ZkError:
                pass

    def _registration_watch(self, event: Event) -> None:
        """ClusterMembership._registration_watch: our registration deleted while our session
        lives (declared dead on a fast signal): register again, with a new broker epoch."""
        if event.type != EventType.NODE_DELETED or self.stopping or not self.alive:
            return
        if self._reregistering is not None and not self._reregistering.done.done():
            return
        self.cluster.note(f"b{self.broker_id} finds its registration deleted while its session lives: "
                          "registering again")
        self._reregistering = self.loop.spawn(self._register_again(), "register-again")

    def _on_session(self, state: str, session: int, new_session: bool) -> None:
        if state == "expired":
            self.cluster.note(f"b{self.broker_id} ZooKeeper session 0x{session:x} expired")
        elif state == "connected" and new_session and self.registered:
            self._reregistering = self.loop.spawn(self._register_again(), "register-again")

    def _register_again(self) -> Gen:
        try:
            yield from self._register()
        except ZkError as error:
            # ClusterMembership._register_again logs it; the next new session tries again.
            self.cluster.note(f"b{self.broker_id} registering again failed: {error!r}")

    def crash(self, power_loss: bool) -> list[SimPartitionLog]:
        """kill -9 (or the machine's power): the process and its tasks are gone at once."""
        self.loop.kill()
        self.cluster.zk.contact_lost(self.zk.session_id)
        logs = list(self.open_logs.values())
        for plog in logs:
            abandon(plog)
        return logs

    def controlled_stop(self) -> Gen:
        """Broker.stop: controlled shutdown (the real activity, on the simulated network and
        clock), the controller's stop, then everything closes; logs close cleanly."""
        self.stopping = True
        shell = SimShell(self.loop, lambda broker: self.metadata.endpoint(broker) is not None)
        yield from shell.drive(controlled_shutdown(
            self.broker_id, self.replicas, self.metadata, CONTROLLED_SHUTDOWN_RETRIES, CONTROLLED_SHUTDOWN_BACKOFF_MS,
            self.cluster.world_clock, CONTROLLED_SHUTDOWN_TIMEOUT_MS, LEADERSHIPS_GONE_WAIT_MS))
        yield from self.controller.stop()
        self.zk.close()
        if self.replicas.partitions:  # ReplicaManager.close
            self.replicas.checkpoint_high_watermarks()
        for partition in list(self.replicas.partitions.values()):
            partition.close()
            partition.log.close()
        self.loop.kill()

    # logs and configs ---------------------------------------------------------------------------
    def _log_opened(self, topic: str, index: int, plog: SimPartitionLog) -> None:
        self.open_logs[(topic, index)] = plog

        def cut(before: int, after: int) -> None:
            self.cluster.note(f"b{self.broker_id} {topic}-{index}: truncated {before} -> {after}")
            self.cluster.stats["truncations"] += 1
        plog.on_cut = cut
        self.cluster.log_opened(self, (topic, index), plog)

    async def _topic_config(self, topic: str) -> dict[str, Any]:
        node = self.cluster.zk.tree.get(layout.topic_config_path(topic))
        raw = layout.decode_topic_config(topic, node.data) if node is not None else {}
        return parse_topic_configs(raw, f"/config/topics/{topic}")

    # the network ----------------------------------------------------------------------------------
    def _dispatch(self, task: Task, request: Any, token: int) -> bool:
        if isinstance(request, ZkCall):
            request.client.dispatch(task, request, token)
            return True
        if isinstance(request, Rpc):
            self.cluster.network.rpc(self.broker_id, self.loop, task, token, request)
            return True
        return False

    def receive(self, api_key: ApiKey, version: int, body: dict[str, Any], source: str,
                respond: Any) -> None:
        """A request arrived; `respond(answer)` sends the answer (now or later)."""
        request = Request(RequestHeader(api_key, version, next(_correlation), "sim"), body, source)
        if api_key == ApiKey.LEADER_AND_ISR:
            answer = run_sync(self.inter.handle_leader_and_isr(request))
            self._controller_request_applied(body, answer)
            respond(answer)
        elif api_key == ApiKey.UPDATE_METADATA:
            answer = self.inter.handle_update_metadata(request)
            self._controller_request_applied(body, answer)
            respond(answer)
        elif api_key == ApiKey.STOP_REPLICA:
            answer = run_sync(self.inter.handle_stop_replica(request))
            self._controller_request_applied(body, answer)
            respond(answer)
        elif api_key == ApiKey.FETCH:
            self._handle_fetch(request, respond)
        elif api_key == ApiKey.PRODUCE:
            self._handle_produce(request, respond)
        elif api_key == ApiKey.LIST_OFFSETS:
            respond(self.offsets.handle_list_offsets(request))
        elif api_key == ApiKey.ALTER_PARTITION:
            self.loop.spawn(self._controller_call(
                lambda core, token: core.alter_partition(token, body, version),
                {"throttle_time_ms": 0, "error_code": ErrorCode.NOT_CONTROLLER, "topics": []}, respond),
                "alter-partition")
        elif api_key == ApiKey.CONTROLLED_SHUTDOWN:
            self.loop.spawn(self._controller_call(
                lambda core, token: core.controlled_shutdown(token, body["broker_id"], body.get("broker_epoch", -1)),
                {"error_code": ErrorCode.NOT_CONTROLLER, "remaining_partitions": []}, respond),
                "controlled-shutdown")
        else:
            raise AssertionError(f"unexpected request {api_key!r}")

    def _controller_request_applied(self, body: dict[str, Any], answer: dict[str, Any]) -> None:
        # A controller request is applied only from a controller epoch at least as new as any
        # this process applied before (what InterBrokerApi._stale must guarantee).
        if answer.get("error_code", 0) == ErrorCode.NONE:
            epoch = body["controller_epoch"]
            if epoch < self.max_controller_epoch_applied:
                self.cluster.fail(f"b{self.broker_id} applied a request of controller epoch {epoch} after "
                                  f"one of epoch {self.max_controller_epoch_applied}")
            self.max_controller_epoch_applied = max(self.max_controller_epoch_applied, epoch)

    def _controller_call(self, action: Any, not_controller: dict[str, Any], respond: Any) -> Gen:
        """ControllerApi: the controller's answer, or NOT_CONTROLLER."""
        try:
            answer = yield from self.controller.call(action)
        except ControllerMoved:
            answer = not_controller
        respond(answer)

    def elect_preferred(self) -> None:
        """An operator's ElectLeaders(preferred) for every partition, if this is the controller."""
        self._operator_call(lambda core, token: core.elect_leaders(token, ELECTION_PREFERRED, None), "elect")

    def reassign(self, wanted: dict[TopicPartition, list[int] | None]) -> None:
        """An operator's AlterPartitionReassignments (ControllerApi.handle_alter_partition_reassignments)."""
        self._operator_call(lambda core, token: core.reassign(token, wanted), "reassign")

    def _operator_call(self, action: Any, name: str) -> None:
        if not self.controller.active:
            return

        def run() -> Gen:
            try:
                answer = yield from self.controller.call(action)
            except ControllerMoved:
                return
            codes = sorted({ErrorCode(p.get("error_code", 0)).name for t in answer.get("responses")
                            or answer.get("replica_election_results") or [] for p in t.get("partitions")
                            or t.get("partition_result") or []})
            self.cluster.note(f"b{self.broker_id} answered the operator's {name}: {codes}")
        self.loop.spawn(run(), name)

    # serving replica fetches ----------------------------------------------------------------------
    def _handle_fetch(self, request: Request, respond: Any) -> None:
        """The real FetchApi: its checks, reads and long-poll (DelayedFetch) on the simulated
        clock (SimWaits); what the network delivers is a copy of the answer."""
        answer = self.fetch.handle(request)
        if isinstance(answer, SimFuture):
            answer.add_done_callback(lambda done: respond(wire_copy(done.result())))
        else:
            respond(wire_copy(answer))

    # produce ----------------------------------------------------------------------------------------
    def _handle_produce(self, request: Request, respond: Any) -> None:
        """The real ProduceApi (no auto-creation): the real append door, purgatory and acks rule,
        waiting on the simulated clock (SimWaits)."""
        answer = self.produce.handle(request)
        if answer is NO_RESPONSE:
            return
        appended = self.replicas.last_append

        def send(response: dict[str, Any]) -> None:
            self.cluster.produce_answered(self, request.body, response, appended)
            respond(response)

        if isinstance(answer, SimFuture):
            answer.add_done_callback(lambda done: send(done.result()))
        else:
            send(answer)
