"""Deterministic simulation of a replicated Roost cluster in Kafka's ZooKeeper mode.

Three to five simulated brokers (broker.py), each running Roost's real replication code and
the real controller core, a simulated ZooKeeper (zk.py: the keeper's own data tree), and a
network that delays (hence reorders), drops and partitions messages, all in one thread from
one seed. A producer appends acks=all (and some acks=1) records to topics with replication
factor 3 and min.insync.replicas 2, and others with RF 2 and 1. A nemesis kills brokers (kill -9,
or a power loss that drops what was not fsynced when the topics fsync before acknowledging),
restarts them, cuts brokers from ZooKeeper (their sessions expire while they live on), kills
the controller, partitions brokers from each other, shuts brokers down the controlled way and
asks for preferred elections. After every step the checker (checker.py) verifies the
invariants; `run_liveness` then heals everything and checks that every partition has a leader,
accepts acks=all writes, and that all replicas catch up and rejoin the ISR.

A failure raises SimulationFailure with the seed, the step, the transcript's tail and the
command that replays it: `python scripts/replication_soak.py --seed SEED --steps N [--bug B]`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import random
import shutil
import tempfile
import traceback
import uuid
from collections import Counter, deque
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from roost.broker.controller.assignment import assign_replicas
from roost.broker.controller.core import ControllerSettings
from roost.broker.controller.liveness import Probe
from roost.broker.zk import layout
from roost.broker.zk.layout import TopicAssignment
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from roost.wire.kafka.records import build_batch
from roost.zkclient import Create
from tests.sim.replication.broker import BrokerProcess
from tests.sim.replication.checker import Ack, Checker
from tests.sim.replication.controller import PeerError, Rpc
from tests.sim.replication.logs import SimPartitionLog, lose_unsynced
from tests.sim.replication.runtime import SimFuture, Sleep, Task, TaskLoop, Wait, World
from tests.sim.replication.zk import SimZooKeeper

CLOCK_BASE_MS = 1_700_000_000_000  # record timestamps: a fixed epoch plus the simulated time
PRODUCE_TIMEOUT_MS = 1500
PRODUCE_VERSION = 9
CLIENT = "client"
# The fixes for the bugs this simulation found are in the real code only (the simulation runs it):
# scripts/break_claims.py reverts each there, and the tests named in docs/replication-core.md fail.


class SimulationFailure(AssertionError):
    """An invariant broke (or the real code raised): the message says how to replay it."""


@dataclass
class Faults:
    """How hard a seed is on the cluster; drawn per seed so that seeds explore differently."""

    drop: float = 0.01  # chance a message is lost
    max_delay: int = 10  # ms, the usual latency spread
    slow: float = 0.01  # chance a message takes 100 ms .. slow_ms
    slow_ms: int = 1500
    nemesis_interval: int = 400  # mean ms between two nemesis actions
    max_down: int = 1  # brokers crashed, stopped or cut off at once
    power_loss: bool = False  # crashes may drop what was not fsynced (every topic fsyncs then)
    # Power losses also where topics do not fsync before acknowledging: Kafka's ZooKeeper mode
    # can then lose acknowledged writes (KIP-966's last replica standing); never drawn at random.
    power_loss_without_fsync: bool = False
    zk_lost_reply: float = 0.0  # chance a write is applied but its reply lost (the connection dropped)
    # Fast failure detection (controller/liveness.py): the chance that a killed broker's idle
    # connections are seen to end (else only its session's expiry tells), and the mean ms
    # between two false verdicts (a live broker, the controller too, declared dead; 0: never).
    dead_signal: float = 0.0
    false_dead_interval: int = 0
    produce_interval: int = 8  # mean ms between two produce requests
    acks_all: float = 0.8


def random_faults(rng: random.Random) -> Faults:
    return Faults(
        drop=rng.choice([0.0, 0.01, 0.03]),
        max_delay=rng.choice([2, 10, 30]),
        slow=rng.choice([0.0, 0.01, 0.03]),
        slow_ms=rng.choice([300, 1500]),
        nemesis_interval=rng.choice([100, 250, 600]),
        max_down=rng.choice([1, 2, 2]),
        power_loss=rng.random() < 0.4,
        zk_lost_reply=rng.choice([0.0, 0.0, 0.02]),
        produce_interval=rng.choice([3, 8, 20]),
        acks_all=rng.choice([0.7, 0.9, 1.0]),
    )


def with_fast_detection(faults: Faults, rng: random.Random) -> Faults:
    """The fast failure detection's signals drawn on top (a separate draw, so that the seeds
    without it keep their histories, and the seeds that found bugs keep finding them)."""
    return dataclasses.replace(faults, dead_signal=rng.choice([0.8, 1.0]),
                               false_dead_interval=rng.choice([700, 1500, 4000]))


@dataclass(frozen=True)
class TopicSpec:
    name: str
    partitions: int
    replication: int
    min_insync: int


def topic_specs(brokers: int) -> list[TopicSpec]:
    rf3 = min(3, brokers)
    return [TopicSpec("a", 3, rf3, 2), TopicSpec("b", 2, rf3, 2), TopicSpec("c", 1, 2, 1),
            TopicSpec("d", 1, 1, 1)]


def sim_root() -> Path:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else Path(tempfile.gettempdir())


class Network:
    """Messages between brokers and from the producer: latency, loss, partitions."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.world = cluster.world

    def latency(self) -> int:
        faults, rng = self.cluster.faults, self.world.rng
        if faults.slow and rng.random() < faults.slow:
            return rng.randint(100, faults.slow_ms)
        return rng.randint(1, max(1, faults.max_delay))

    def lost(self, source: int | str, destination: int | str) -> bool:
        if (source, destination) in self.cluster.blocked:
            return True
        drop = self.cluster.faults.drop
        return bool(drop) and self.world.rng.random() < drop

    def rpc(self, source: int | str, loop: TaskLoop, task: Task, token: int, rpc: Rpc) -> None:
        loop.resume_token(task, token, rpc.timeout_ms, error=PeerError("no answer in time"))
        if self.lost(source, rpc.destination):
            return
        self.world.after(self.latency(), self._arrive, source, loop, task, token, rpc)

    def _arrive(self, source: int | str, loop: TaskLoop, task: Task, token: int, rpc: Rpc) -> None:
        proc = self.cluster.process(rpc.destination)
        if proc is None:  # nobody listens there: the connection is refused
            loop.resume_token(task, token, self.latency(), error=PeerError("connection refused"))
            return
        if (source, rpc.destination) in self.cluster.blocked:
            return

        def respond(answer: Any) -> None:
            if not proc.alive or self.lost(rpc.destination, source):
                return
            self.world.after(self.latency(), self._answer, loop, task, token, answer)

        proc.receive(rpc.api_key, rpc.version, rpc.body, f"{source}", respond)

    def connect(self, source: int, destination: int) -> Generator[Any, Any, Probe]:
        """A liveness.Connect: one connection attempt, refused where no process of that broker
        runs (any incarnation listens on the same port), no answer across a cut link; a
        connection made is held until the cluster ends it (`_connections_end`)."""
        yield Sleep(self.latency())
        if (source, destination) in self.cluster.blocked or (destination, source) in self.cluster.blocked:
            return Probe.NO_ANSWER
        if self.cluster.process(destination) is None:
            return Probe.REFUSED
        ended = SimFuture()
        self.cluster.held.setdefault(destination, []).append((source, ended))
        yield Wait(ended)
        return Probe.CONNECTED

    def _answer(self, loop: TaskLoop, task: Task, token: int, answer: Any) -> None:
        if loop.alive:
            loop.resume_token(task, token, 0, value=answer)


class Cluster:
    def __init__(self, seed: int, brokers: int | None = None, faults: Faults | None = None,
                 transcript: int = 400, verbose: bool = False,
                 power_loss_without_fsync: bool = False, fast_detection: bool = False) -> None:
        self.seed = seed
        # A scenario's own fault: the first ZooKeeper write matching it loses its reply.
        self.lose_reply_of: Callable[[list[Any]], bool] | None = None
        self.world = World(seed)
        rng = self.world.rng
        self.faults = faults or random_faults(rng)
        if power_loss_without_fsync:
            self.faults = dataclasses.replace(self.faults, power_loss_without_fsync=True)
        if fast_detection:
            self.faults = with_fast_detection(self.faults, rng)
        self.broker_ids = list(range(1, (brokers or rng.choice([3, 3, 4, 5])) + 1))
        self.controller_settings = ControllerSettings(imbalance_check_interval_ms=rng.choice([3000, 10000]))
        self.root = Path(tempfile.mkdtemp(prefix=f"roost-repl-sim-{seed}-", dir=sim_root()))
        self.zk = SimZooKeeper(self.world)
        self.network = Network(self)
        self.checker = Checker(self)
        self.zk.write_hooks.append(self.checker.on_zk_write)
        self.processes: dict[int, BrokerProcess | None] = {b: None for b in self.broker_ids}
        self.incarnations: Counter[int] = Counter()
        self.zk_cut: set[int] = set()
        self.blocked: set[tuple[int | str, int | str]] = set()
        # Connections held by the fast failure detection, by destination: (source, its end).
        self.held: dict[int, list[tuple[int, SimFuture]]] = {}
        self.disrupted: set[int] = set()  # brokers the nemesis has down, stopping or cut off
        self.transcript: deque[str] = deque(maxlen=transcript)
        self.verbose = verbose
        self.stats: Counter[str] = Counter()
        self.chaos = True
        self.producing = True
        self.replay_extra = ""
        self.replay_command: str | None = None  # a scripted scenario names its own test
        self.chaos_steps = 0
        self.client_loop = TaskLoop(self.world, CLIENT, dispatch=self._client_dispatch)
        self._values = itertools.count(1)
        self._pending_acks: dict[int, list[tuple[tuple[str, int], Ack]]] = {}
        self.specs = topic_specs(len(self.broker_ids))
        self.partitions = [(s.name, p) for s in self.specs for p in range(s.partitions)]
        all_fsync = self.faults.power_loss and not self.faults.power_loss_without_fsync
        self.fsync_topics = {s.name for s in self.specs} if all_fsync else \
            {s.name for s in self.specs if rng.random() < 0.5}
        self._create_topics()
        for broker in self.broker_ids:
            self.start_broker(broker)
        self.world.after(rng.randint(50, 200), self._produce_tick)
        self.world.after(rng.randint(300, 800), self._nemesis_tick)
        if self.faults.false_dead_interval:
            self.world.after(int(rng.expovariate(1 / self.faults.false_dead_interval)) + 1, self._false_dead_tick)
        self._closed = False

    # plumbing ----------------------------------------------------------------------------------
    def clock_ms(self) -> int:
        return CLOCK_BASE_MS + self.world.now

    def fsync_ms(self) -> int:
        return self.world.rng.randint(1, 15)

    def zk_latency(self) -> int:
        return self.world.rng.randint(1, 3)

    def zk_lost_reply(self, ops: list[Any]) -> bool:
        if self.lose_reply_of is not None and self.lose_reply_of(ops):
            self.lose_reply_of = None
            return True
        chance = self.faults.zk_lost_reply
        return bool(chance) and self.chaos and self.world.rng.random() < chance

    @property
    def fast_detection(self) -> bool:
        """The fast failure detection's signals are simulated. The ZooKeeper calls that only
        they need (a broker's watch on its own registration, a controller's check of its claim,
        the reads before watching the controller) are made only then, so that the seeds without
        them keep their histories and the seeds that found bugs keep finding them."""
        return bool(self.faults.dead_signal or self.faults.false_dead_interval)

    def zk_link_up(self, broker: int) -> bool:
        return broker not in self.zk_cut

    def data_dir(self, broker: int) -> Path:
        return self.root / f"broker-{broker}"

    def process(self, broker: int | str) -> BrokerProcess | None:
        # Called about twenty times per simulated event (the checker): kept lean. The processes
        # are keyed by broker id; any other name ("client") finds none.
        proc = self.processes.get(broker)  # type: ignore[call-overload]
        return proc if proc is not None and proc.loop.alive else None

    def live_processes(self) -> Iterator[BrokerProcess]:
        for broker in self.broker_ids:
            proc = self.process(broker)
            if proc is not None:
                yield proc

    def note(self, message: str) -> None:
        line = f"t={self.world.now:>7} {message}"
        self.transcript.append(line)
        if self.verbose:
            print(line, flush=True)

    def fail(self, message: str) -> None:
        raise SimulationFailure(self._describe(message))

    def _describe(self, message: str) -> str:
        tail = "\n".join(list(self.transcript)[-60:])
        return (f"{message}\n  seed {self.seed}, step {self.world.steps}, t={self.world.now} ms, "
                f"{len(self.broker_ids)} brokers, {self.faults}\n"
                f"  replay: {self.replay_command or self._soak_command()}\n  transcript (last lines):\n{tail}")

    def _soak_command(self) -> str:
        return (f".venv/bin/python scripts/replication_soak.py --seed {self.seed} --steps {self.chaos_steps}"
                f"{self.replay_extra} --verbose")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for broker in self.broker_ids:
            proc = self.processes.get(broker)
            if proc is not None and proc.alive:
                proc.crash(power_loss=False)
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # setup -------------------------------------------------------------------------------------
    def _create_topics(self) -> None:
        """What `roost` topic creation writes (config, then assignment), before any broker runs."""
        admin = self.zk.create_session(_AdminClient(), 10**9)
        for path in layout.PERSISTENT_PATHS:
            parts = path.split("/")
            for depth in range(2, len(parts) + 1):
                prefix = "/".join(parts[:depth])
                if self.zk.tree.get(prefix) is None:
                    self.zk.write(admin, [Create(prefix)], multi=False)
        rng = self.world.rng
        for spec in self.specs:
            configs = {"min.insync.replicas": str(spec.min_insync),
                       "segment.bytes": str(rng.choice([600, 2000, 100000]))}
            if spec.name in self.fsync_topics:
                configs["flush.messages"] = "1"
            assignment = assign_replicas({b: None for b in self.broker_ids}, spec.partitions, spec.replication,
                                         rng=rng)
            topic = TopicAssignment(uuid.UUID(int=rng.getrandbits(128)), assignment)
            self.zk.write(admin, [Create(layout.topic_config_path(spec.name), layout.encode_topic_config(configs)),
                                  Create(layout.topic_path(spec.name), topic.encode())], multi=True)
            self.note(f"topic {spec.name}: {assignment}, {configs}")
        self.zk.end_session(admin, expired=False)

    # brokers -----------------------------------------------------------------------------------
    def start_broker(self, broker: int) -> None:
        assert self.process(broker) is None
        self.incarnations[broker] += 1
        proc = BrokerProcess(self, broker, self.incarnations[broker])
        self.processes[broker] = proc
        self.note(f"b{broker} starts (incarnation {proc.incarnation})")
        proc.start()

    def start_failed(self, proc: BrokerProcess) -> None:
        if self.processes.get(proc.broker_id) is proc and proc.alive:
            self.crash_broker(proc.broker_id, power_loss=False)
            self.world.after(self.world.rng.randint(100, 1000), self._restart, proc.broker_id)

    def crash_broker(self, broker: int, power_loss: bool) -> None:
        proc = self.process(broker)
        assert proc is not None
        logs = proc.crash(power_loss)
        lost = 0
        self.stats["power_losses" if power_loss else "kills"] += 1
        if power_loss:
            rng = self.world.rng
            for plog in logs:
                lost += lose_unsynced(plog, lambda unsynced: rng.randint(0, unsynced) if rng.random() < 0.5 else 0)
            self.stats["unsynced_bytes_lost"] += lost
        self.note(f"b{broker} {'loses power' if power_loss else 'is killed (-9)'}"
                  + (f": {lost} unsynced bytes lost" if power_loss else ""))
        self._connections_end(broker)

    def _connections_end(self, broker: int) -> None:
        """The dead process's idle connections (from the controller, and from the other brokers
        if it was the controller) end, each seen with the chance `dead_signal` (else only the
        session's expiry tells): the fast failure detection may start."""
        rng = self.world.rng
        for source, ended in self.held.pop(broker, []):
            proc = self.process(source)
            if proc is None or ended.done():
                continue
            if self.faults.dead_signal and rng.random() < self.faults.dead_signal:
                self.world.after(self.network.latency(), self._connection_ended, proc, ended)

    @staticmethod
    def _connection_ended(proc: BrokerProcess, ended: SimFuture) -> None:
        if proc.alive and not ended.done():
            ended.set_result(None)

    def _false_dead_tick(self) -> None:
        """A false verdict "dead" on a live broker (a firewall that rejects, say): the controller
        declares it dead, or, if it is the controller, another broker gives its claim up."""
        rng = self.world.rng
        live = list(self.live_processes())
        if self.chaos and live:
            victim = rng.choice(live).broker_id
            controller = self.process(self.controller()) if self.controller() is not None else None
            if controller is not None and controller.broker_id != victim and controller.controller.active:
                registration = controller.controller.events.registration(victim)
                if registration is not None:
                    self.note(f"false signal: b{victim} looks dead to controller b{controller.broker_id}")
                    controller.controller.suspect(registration, "a false signal")
            elif controller is not None and controller.broker_id == victim:
                others = [p for p in live if p.broker_id != victim]
                if others:
                    watcher = rng.choice(others)
                    self.note(f"false signal: controller b{victim} looks dead to b{watcher.broker_id}")
                    watcher.controller.give_up_controller("a false signal")
        self.world.after(int(rng.expovariate(1 / self.faults.false_dead_interval)) + 1, self._false_dead_tick)

    def log_opened(self, proc: BrokerProcess, tp: tuple[str, int], plog: SimPartitionLog) -> None:
        if plog.recovery_problem is not None:
            self.fail(f"b{proc.broker_id} {tp[0]}-{tp[1]}: the log recovered after a crash is not contiguous: "
                      f"{plog.recovery_problem} (segments {[(s.base_offset, s.size) for s in plog.segments]})")
        self.note(f"b{proc.broker_id} opened {tp[0]}-{tp[1]}: offsets [{plog.log_start_offset}, "
                  f"{plog.log_end_offset}), recovery point {plog.recovery_point}, epochs "
                  f"{[tuple(e) for e in plog.leader_epochs.entries]}")

    # the producer ----------------------------------------------------------------------------------
    def _client_dispatch(self, task: Task, request: Any, token: int) -> bool:
        if isinstance(request, Rpc):
            self.network.rpc(CLIENT, self.client_loop, task, token, request)
            return True
        return False

    def _client_leader(self, tp: tuple[str, int]) -> int | None:
        """Where a client would send: the leader in some live broker's metadata."""
        live = list(self.live_processes())
        if not live:
            return None
        info = self.world.rng.choice(live).metadata.partition(*tp)
        return info.leader if info is not None and info.leader >= 0 else None

    def _produce_tick(self) -> None:
        rng = self.world.rng
        if self.producing:
            tp = rng.choice(self.partitions)
            acks = -1 if rng.random() < self.faults.acks_all else 1
            leader = self._client_leader(tp)
            if leader is None:
                self.stats["produce_no_leader"] += 1
            else:
                self.client_loop.spawn(self._produce(tp, acks, leader), "produce")
        self.world.after(rng.randint(1, 2 * self.faults.produce_interval), self._produce_tick)

    def _produce(self, tp: tuple[str, int], acks: int, leader: int) -> Generator[Any, Any, None]:
        value = f"{tp[0]}-{tp[1]}#{next(self._values)}".encode()
        records = bytearray(build_batch([(b"key", value)], timestamp_ms=self.clock_ms()))
        body = {"transactional_id": None, "acks": acks, "timeout_ms": PRODUCE_TIMEOUT_MS,
                "topic_data": [{"name": tp[0], "partition_data": [{"index": tp[1], "records": records}]}],
                "_sim_value": value}  # the producer's own note; brokers read only Kafka's fields
        self.stats["produce_sent"] += 1
        try:
            answer = yield Rpc(leader, ApiKey.PRODUCE, PRODUCE_VERSION, body, PRODUCE_TIMEOUT_MS + 500)
        except PeerError:
            self.stats["produce_no_answer"] += 1
            return
        code = answer["responses"][0]["partition_responses"][0]["error_code"]
        self.stats[f"produce_{ErrorCode(code).name.lower()}_acks{acks}"] += 1
        pending = self._pending_acks.pop(id(body), [])
        if code == ErrorCode.NONE and acks == -1:
            for ack_tp, ack in pending:
                self.checker.acknowledged_write(ack_tp, ack)

    def produce_answered(self, proc: BrokerProcess, body: dict[str, Any], response: dict[str, Any],
                         appended: list[Any]) -> None:
        """The leader answers a produce: for acks=all successes, note its log's digest now."""
        if body["acks"] != -1:
            return
        entries = {(t["name"], e["index"]): e for t in response["responses"] for e in t["partition_responses"]}
        for partition, outcome in appended:
            tp = (partition.topic, partition.index)
            if entries[tp]["error_code"] != ErrorCode.NONE:
                continue
            end = outcome.required_offset
            digest = partition.log.shadow.digest_at(end)
            if digest is None:
                self.fail(f"b{proc.broker_id} acknowledged {tp} up to {end}, not a batch boundary of its log "
                          f"(LEO {partition.log.log_end_offset})")
            value = body.get("_sim_value", b"")
            self._pending_acks.setdefault(id(body), []).append(
                (tp, Ack(end, digest, proc.broker_id, outcome.leader_epoch, value)))

    # the nemesis -----------------------------------------------------------------------------------
    def _nemesis_tick(self) -> None:
        rng = self.world.rng
        if self.chaos:
            self._nemesis_act(rng)
        self.world.after(int(rng.expovariate(1 / self.faults.nemesis_interval)) + 1, self._nemesis_tick)

    def _nemesis_act(self, rng: random.Random) -> None:
        up = [b for b in self.broker_ids if self.process(b) is not None and b not in self.disrupted]
        can_disrupt = len(self.disrupted) < self.faults.max_down and len(up) > 1
        action = rng.choice(["kill", "kill", "kill", "kill_controller", "zk_cut", "zk_cut", "isolate", "link",
                             "controlled", "preferred", "reassign"])
        if action in ("kill", "kill_controller", "zk_cut", "isolate", "controlled") and not can_disrupt:
            action = "preferred" if rng.random() < 0.3 else "nothing"
        if action == "kill" or action == "kill_controller":
            victim = self.controller() if action == "kill_controller" else None
            if victim is None or victim not in up:
                victim = rng.choice(up)
            power = (self.faults.power_loss or self.faults.power_loss_without_fsync) and rng.random() < 0.6
            self.disrupted.add(victim)
            self.crash_broker(victim, power)
            self.world.after(rng.randint(50, 1500), self._restart, victim)
        elif action == "zk_cut":
            self.cut_from_zookeeper(rng.choice(up), rng.choice([rng.randint(50, 800), rng.randint(1300, 2500)]))
        elif action == "isolate":
            victim = rng.choice(up)
            self.disrupted.add(victim)
            links = {(victim, b) for b in self.broker_ids if b != victim}
            links |= {(b, a) for a, b in links}
            self.blocked |= links
            duration = rng.randint(100, 1500)
            self.note(f"b{victim} isolated from the other brokers for {duration} ms (ZooKeeper and clients reach it)")
            self.world.after(duration, self._heal_links, victim, links)
        elif action == "link":
            a, b = rng.sample(self.broker_ids, 2)
            one_way = rng.random() < 0.3
            links = {(a, b)} if one_way else {(a, b), (b, a)}
            self.blocked |= links
            duration = rng.randint(100, 2000)
            self.note(f"link {a}{'->' if one_way else '<->'}{b} cut for {duration} ms")
            self.world.after(duration, self._heal_links, None, links)
        elif action == "controlled":
            victim = rng.choice(up)
            proc = self.process(victim)
            assert proc is not None
            self.disrupted.add(victim)
            self.note(f"b{victim} controlled shutdown")
            self.client_loop.spawn(self._controlled(victim, proc), "controlled")
        elif action == "reassign":
            controller = self.controller()
            proc = self.process(controller) if controller is not None else None
            if proc is not None:
                tp = rng.choice(self.partitions)
                live = [b for b in self.broker_ids if self.process(b) is not None]
                size = len(self.replicas(tp))
                if len(live) >= size:
                    target = rng.sample(live, size) if rng.random() < 0.8 else None  # None: cancel
                    self.note(f"reassignment of {tp[0]}-{tp[1]} to {target} asked of controller b{controller}")
                    proc.reassign({tp: target})
        elif action == "preferred":
            controller = self.controller()
            proc = self.process(controller) if controller is not None else None
            if proc is not None:
                self.note(f"preferred leader election asked of controller b{controller}")
                proc.elect_preferred()

    def replicas(self, tp: tuple[str, int]) -> list[int]:
        node = self.zk.tree.get(layout.topic_path(tp[0]))
        assert node is not None
        return TopicAssignment.decode(tp[0], node.data).partitions[tp[1]]

    def cut_from_zookeeper(self, victim: int, duration: int) -> None:
        proc = self.process(victim)
        assert proc is not None
        self.disrupted.add(victim)
        self.zk_cut.add(victim)
        proc.zk.link_changed(False)
        self.note(f"b{victim} cut from ZooKeeper for {duration} ms")
        self.world.after(duration, self._heal_zk, victim)

    def restart_later(self, broker: int, delay: int) -> None:
        self.disrupted.add(broker)
        self.world.after(delay, self._restart, broker)

    def _controlled(self, broker: int, proc: BrokerProcess) -> Generator[Any, Any, None]:
        # The broker's own stop sequence runs on its own tasks; the client loop only waits.
        stop = proc.loop.spawn(proc.controlled_stop(), "controlled-stop")
        from tests.sim.replication.runtime import Wait
        with contextlib.suppress(Exception):
            yield Wait(stop.done)
        if self.processes.get(broker) is proc and not proc.alive:
            self.note(f"b{broker} stopped cleanly")
            self.world.after(self.world.rng.randint(100, 1500), self._restart, broker)
        elif self.processes.get(broker) is proc and proc.alive:
            self.crash_broker(broker, power_loss=False)  # it was killed while stopping
            self.world.after(self.world.rng.randint(100, 2000), self._restart, broker)

    def _restart(self, broker: int) -> None:
        if self.process(broker) is None:
            self.start_broker(broker)
        self.disrupted.discard(broker)

    def _heal_zk(self, broker: int) -> None:
        self.zk_cut.discard(broker)
        self.disrupted.discard(broker)
        proc = self.process(broker)
        if proc is not None:
            proc.zk.link_changed(True)
        self.note(f"b{broker} reaches ZooKeeper again")

    def _heal_links(self, broker: int | None, links: set[tuple[int | str, int | str]]) -> None:
        self.blocked -= links
        if broker is not None:
            self.disrupted.discard(broker)
        self.note(f"links {sorted(links)} healed")

    def controller(self) -> int | None:
        node = self.zk.tree.get(layout.CONTROLLER)
        return layout.decode_controller(node.data) if node is not None else None

    # running -----------------------------------------------------------------------------------
    def world_clock(self) -> int:
        """The one clock of the replication cores in the simulation: the simulated time (ms)."""
        return self.world.now

    def run(self, steps: int) -> None:
        """`steps` events of chaos (a replay runs the same number, then the liveness phase)."""
        self.chaos_steps += steps
        for _ in range(steps):
            self._step()

    def run_for(self, ms: int) -> None:
        deadline = self.world.now + ms
        while self.world.now < deadline:
            self._step()

    def _step(self) -> None:
        try:
            if not self.world.step():
                self.fail("nothing left to do (the event queue is empty)")
            self.checker.check()
        except SimulationFailure:
            raise
        except Exception as error:
            raise SimulationFailure(self._describe(
                f"the code raised {error!r}\n{traceback.format_exc()}")) from error

    def heal(self) -> None:
        """Stop the nemesis and undo every fault: links back, brokers restarted."""
        self.chaos = False
        self.blocked.clear()
        for broker in sorted(self.zk_cut):
            self._heal_zk(broker)
        for broker in self.broker_ids:
            if self.process(broker) is None and self.processes.get(broker) is not None \
                    and not self.processes[broker].stopping:  # type: ignore[union-attr]
                self._restart(broker)

    def run_liveness(self, bound_ms: int = 20_000) -> None:
        """Heal; then within `bound_ms` every partition must have a leader with every replica in
        its ISR and acknowledge a new acks=all write; then, with the producer stopped, every
        replica must hold the leader's log and the leader's HW reach its log end."""
        self.heal()
        healed_at = self.world.now
        self.run_for(SESSION_SETTLE_MS)
        for broker in self.broker_ids:  # brokers still stopping (controlled) are back by now
            if self.process(broker) is None:
                self.start_broker(broker)
        self._run_until(lambda: self.convergence_problems(healed_at, quiet=False), bound_ms, "after healing")
        self.producing = False
        self._run_until(lambda: self.convergence_problems(healed_at, quiet=True), bound_ms,
                        "after the producer stopped")
        self.note("liveness: converged")

    def _run_until(self, problems: Callable[[], str], bound_ms: int, what: str) -> None:
        deadline = self.world.now + bound_ms
        while True:
            self._step()
            if self.world.steps % 100 == 0 and not problems():
                return
            if self.world.now > deadline:
                self.fail(f"liveness: not converged {bound_ms} ms {what}: {problems()}")

    def convergence_problems(self, since: int, quiet: bool) -> str:
        problems = []
        for tp in self.partitions:
            state = self.checker.zk_state(tp)
            if state is None or state.leader < 0:
                problems.append(f"{tp}: no leader ({state})")
                continue
            replicas = self.replicas(tp)
            if set(state.isr) != set(replicas):
                problems.append(f"{tp}: ISR {list(state.isr)} of replicas {replicas}")
                continue
            leader = self.process(state.leader)
            partition = leader.replicas.partition(*tp) if leader else None
            if partition is None or not partition.is_leader:
                problems.append(f"{tp}: leader {state.leader} does not lead yet")
                continue
            if self.checker.last_ack_time.get(tp, -1) < since:
                problems.append(f"{tp}: no acks=all write acknowledged since the healing")
                continue
            if not quiet:
                continue
            end = partition.log.log_end_offset
            if partition.high_watermark < end:
                problems.append(f"{tp}: HW {partition.high_watermark} below LEO {end}")
                continue
            digest = partition.log.shadow.digest_at(end)
            for member in replicas:
                proc = self.process(member)
                replica = proc.replicas.partition(*tp) if proc else None
                if replica is None or replica.log.shadow.digest_at(end) != digest \
                        or replica.log.log_end_offset != end:
                    problems.append(f"{tp}: replica {member} differs from leader {state.leader}")
        return "; ".join(problems)

    def summary(self) -> str:
        produced = {k: v for k, v in sorted(self.stats.items()) if k.startswith("produce")}
        return (f"seed {self.seed}: {len(self.broker_ids)} brokers, {self.world.steps} steps, t={self.world.now} ms, "
                f"{self.checker.acknowledged} acks=all writes acknowledged, {self.checker.state_writes} state writes, "
                f"controller epoch {self.checker.controller_epoch}, truncations {self.stats['truncations']}, "
                f"kills {self.stats['kills']}, power losses {self.stats['power_losses']}, "
                f"fetches out of range {self.stats['offset_out_of_range']}, "
                f"restarts {sum(self.incarnations.values()) - len(self.broker_ids)}, {produced}")


SESSION_SETTLE_MS = 3000


class _AdminClient:
    """The session that creates the topics (an operator's tool)."""

    broker_id = -1

    def notify(self, session: int, event: Any) -> None:
        pass


__all__ = ["Cluster", "Faults", "SimulationFailure"]
