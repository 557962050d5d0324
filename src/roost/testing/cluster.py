"""A Roost cluster for tests, with fault injection: keepers (`roost keeper`, an ensemble) and
brokers (`roost broker`) as separate processes, each of which a test can kill, stop, pause or
restart at the same address.

The configs are planned by roost.cli.servers.cluster_plan, exactly as `roost up --brokers N --keepers K`
writes them (the same files, DIR/broker-ID.toml and DIR/keeper-ID.toml, and logs DIR/<name>.log);
the processes are run here rather than by `roost up`'s supervisor, which never restarts a child.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from roost.testing.clients import KafkaHelpers, confluent
from roost.testing.process import START_TIMEOUT_S, RoostStartError, ServerProcess

# Fast failover for tests (on top of roost up --brokers's own choices: 2 s broker sessions,
# keepers ticking every 500 ms): a follower that fell behind leaves the ISR after 6 s, a restarted
# broker gets its leaderships back within ~2 s, and a consumer group forms at once.
CLUSTER_TEST_SETTINGS: dict[str, Any] = {
    "replica.lag.time.max.ms": 6000,
    "replica.fetch.wait.max.ms": 200,
    "leader.imbalance.check.interval.seconds": 2,
    "controlled.shutdown.retry.backoff.ms": 200,
    "group.initial.rebalance.delay.ms": 0,
    # A test decides where its replicas are; `roost up --brokers`'s self-balancing would move
    # them under it (settings={"balancer.mode": "continuous"} asks for it).
    "balancer.mode": "off",
}
PORT_ATTEMPTS = 3  # a port chosen free may be taken by someone else before the child binds it
READY_TIMEOUT_S = 60.0


@dataclass
class Member:
    """One broker or keeper: how to start it, and its process (None before the first start)."""

    kind: str  # "broker" or "keeper"
    ident: int
    config_path: Path
    log_path: Path
    address: tuple[str, int]
    process: ServerProcess | None = None
    started_pids: list[int] = field(default_factory=list)

    @property
    def listen_name(self) -> str:
        """The name in its listening line."""
        return f"broker {self.ident} kafka" if self.kind == "broker" else "keeper"

    @property
    def hostport(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.running and self.process is not None else None

    def launch(self) -> int:
        """Start it (it must not be running); returns the log offset its new lines start at."""
        assert not self.running, f"{self.kind} {self.ident} is running"
        since = self.log_path.stat().st_size if self.log_path.exists() else 0
        self.process = ServerProcess.launch([self.kind, "--config", str(self.config_path)], self.log_path)
        self.started_pids.append(self.process.pid)
        return since

    def await_listening(self, since: int, timeout: float = START_TIMEOUT_S) -> None:
        assert self.process is not None
        self.process.wait_listening((self.listen_name,), timeout, since)


class RoostCluster(KafkaHelpers):
    """`brokers` (ids 1..N) and `keepers` (members 1..K) as processes, on fixed loopback ports so
    that a restarted one comes back at the same address. `bootstrap` lists every broker,
    `zookeeper` every keeper."""

    def __init__(self, root: Path, brokers: dict[int, Member], keepers: dict[int, Member]) -> None:
        self.root = root
        self.brokers = brokers
        self.keepers = keepers
        self.bootstrap = ",".join(member.hostport for member in brokers.values())
        self.zookeeper = ",".join(member.hostport for member in keepers.values())

    # starting -----------------------------------------------------------------------------------
    @classmethod
    def start(cls, root: Path, brokers: int = 3, keepers: int = 1, settings: Mapping[str, Any] | None = None,
              keeper_settings: Mapping[str, Any] | None = None, timeout: float = READY_TIMEOUT_S) -> RoostCluster:
        """Start `keepers` keepers and `brokers` brokers with their data under `root` and return
        once every broker is registered. `settings` (Kafka's names) go to every broker,
        `keeper_settings` (ZooKeeper's names) to every keeper. Ports are chosen free just before
        the start; should one be taken in between, the whole start is tried again on new ports."""
        for attempt in range(1, PORT_ATTEMPTS + 1):
            cluster = cls.plan(root / f"attempt-{attempt}", brokers, keepers, settings, keeper_settings)
            try:
                cluster._start_all(timeout)
                return cluster
            except RoostStartError as error:
                cluster.close()
                if not error.port_taken or attempt == PORT_ATTEMPTS:
                    raise
            except BaseException:
                cluster.close()
                raise
        raise AssertionError("unreachable")

    @classmethod
    def plan(cls, root: Path, brokers: int, keepers: int, settings: Mapping[str, Any] | None,
             keeper_settings: Mapping[str, Any] | None) -> RoostCluster:
        """Choose ports and write every config, as `roost up --brokers` would; start nothing."""
        from roost.cli.servers import cluster_plan as planning
        from roost.cli.servers.node_runner import GivenSettings

        if keepers not in planning.ENSEMBLE_SIZES:
            raise ValueError(f"keepers={keepers}: an ensemble has 1, 3, 5 or 7 members")
        if brokers < 1:
            raise ValueError(f"brokers={brokers}: at least one")
        given = GivenSettings([("roost.testing", {**CLUSTER_TEST_SETTINGS, **(settings or {})})],
                              dict(keeper_settings or {}))
        host = "127.0.0.1"
        peers = keepers if keepers > 1 else 0  # a single keeper runs standalone: no peer port
        ports = planning.choose_ports(host, [None] * (keepers + peers + brokers))
        keeper_specs = planning.plan_keepers(root, host, ports[:keepers], ports[keepers:keepers + peers], given)
        connect = ",".join(planning.hostport(*spec.address) for spec in keeper_specs)
        broker_specs = planning.plan_brokers(root, host, ports[keepers + peers:], connect, given)
        planning.ClusterPlan(root, keeper_specs, broker_specs, connect).write_configs()

        def members(specs: list[Any]) -> dict[int, Member]:
            return {spec.ident: Member(spec.kind, spec.ident, spec.config_path, spec.log_path, spec.address)
                    for spec in specs}

        return cls(root, members(broker_specs), members(keeper_specs))

    def _start_all(self, timeout: float) -> None:
        # Everyone at once: the brokers wait for the keepers' quorum themselves.
        offsets = {id(member): member.launch() for member in self.members()}
        for member in self.members():
            member.await_listening(offsets[id(member)], timeout)
        self.wait_for_brokers(set(self.brokers), timeout)

    def members(self) -> list[Member]:
        return [*self.keepers.values(), *self.brokers.values()]

    # what the cluster says ----------------------------------------------------------------------
    def registered_brokers(self) -> set[int]:
        """The broker ids Metadata lists (empty while no broker answers)."""
        try:
            return set(self.admin().list_topics(timeout=5).brokers)
        except confluent().KafkaException:
            return set()

    def wait_for_brokers(self, ids: set[int], timeout: float = READY_TIMEOUT_S) -> None:
        """Wait until Metadata lists exactly the brokers `ids`."""
        deadline = time.monotonic() + timeout
        while (seen := self.registered_brokers()) != ids:
            if time.monotonic() > deadline:
                raise TimeoutError(f"brokers {sorted(ids)} not registered after {timeout:.0f} s; Metadata "
                                   f"lists {sorted(seen)}")
            time.sleep(0.05)

    def leader(self, topic: str, partition: int = 0, timeout: float = READY_TIMEOUT_S) -> int:
        """The broker leading `topic`'s `partition`, waiting (bounded) until a running broker does:
        Metadata goes on naming a killed leader until its session expires and the controller
        moves the leadership."""
        found: list[int] = []

        def running_leader() -> bool:
            leader = self.wait_for_leaders(topic, timeout=timeout)[partition][0]
            found[:] = [leader]
            return self.brokers[leader].running if leader in self.brokers else False

        self._wait(running_leader, timeout, f"a running leader of {topic!r} partition {partition}")
        return found[0]

    # brokers ------------------------------------------------------------------------------------
    def kill(self, broker_id: int) -> None:
        """SIGKILL broker `broker_id`: no controlled shutdown, no flush."""
        self._process(self.brokers, broker_id).kill()

    def stop(self, broker_id: int) -> int:
        """SIGTERM broker `broker_id` (a controlled shutdown: its leaderships move first); returns
        its exit status."""
        return self._process(self.brokers, broker_id).stop()

    def restart(self, broker_id: int, timeout: float = READY_TIMEOUT_S) -> None:
        """Start broker `broker_id` again at its address (stopping it first if it runs) and
        return once it is registered again."""
        member = self.brokers[broker_id]
        if member.running:
            self.stop(broker_id)
        member.await_listening(member.launch(), timeout)
        self.wait_for_brokers({ident for ident, other in self.brokers.items() if other.running}, timeout)

    def expire_session(self, broker_id: int, timeout: float = 30.0) -> None:
        """Expire broker `broker_id`'s ZooKeeper session: pause it (SIGSTOP) until the keepers
        have expired the session and removed its registration, then resume it (SIGCONT) and wait
        until it has registered again. Its leaderships fail over meanwhile, as after a long GC
        pause or a stalled VM."""
        from kazoo.client import KazooClient

        process = self._process(self.brokers, broker_id)
        path = f"/brokers/ids/{broker_id}"
        zk = KazooClient(hosts=self.zookeeper, timeout=10.0)
        zk.start(timeout=timeout)
        try:
            process.pause()
            try:
                self._wait(lambda: zk.exists(path) is None, timeout, f"broker {broker_id}'s session to expire")
            finally:
                process.resume()
            self._wait(lambda: zk.exists(path) is not None, timeout, f"broker {broker_id} to register again")
        finally:
            zk.stop()
            zk.close()

    # keepers ------------------------------------------------------------------------------------
    def stop_keeper(self, member: int, kill: bool = False) -> None:
        """Stop keeper `member` (SIGTERM, or SIGKILL with `kill`)."""
        process = self._process(self.keepers, member)
        if kill:
            process.kill()
        else:
            process.stop()

    def start_keeper(self, member: int, timeout: float = READY_TIMEOUT_S) -> None:
        """Start keeper `member` again at its address (with its data); returns once it listens."""
        keeper = self.keepers[member]
        keeper.await_listening(keeper.launch(), timeout)

    # ending -------------------------------------------------------------------------------------
    @property
    def pids(self) -> list[int]:
        """Every process this cluster has started, running or not."""
        return [pid for member in self.members() for pid in member.started_pids]

    def close(self) -> None:
        """Stop everything: the brokers killed (their data is thrown away, so a controlled shutdown
        would only cost time), then the keepers stopped."""
        self.close_clients()
        for member in self.brokers.values():
            if member.process is not None:
                member.process.kill()
        for member in self.keepers.values():
            if member.process is not None:
                member.process.stop()

    # helpers ------------------------------------------------------------------------------------
    @staticmethod
    def _process(members: dict[int, Member], ident: int) -> ServerProcess:
        member = members[ident]
        if member.process is None or not member.running:
            raise RuntimeError(f"{member.kind} {ident} is not running")
        return member.process

    @staticmethod
    def _wait(predicate: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
            time.sleep(0.05)

    def __repr__(self) -> str:
        return f"RoostCluster(bootstrap={self.bootstrap!r}, zookeeper={self.zookeeper!r})"
