"""A real Roost cluster for tests: keeper processes (`roost keeper`, an ensemble) or a given
ZooKeeper, and broker processes (`roost broker`), each on fixed loopback ports so that a broker
restarted after a kill comes back at the same address.

Brokers can sit behind fault proxies: with `proxied=True` each broker reaches ZooKeeper through
its own proxy and advertises a proxy address (so clients and the other brokers reach it through
that proxy), while its real listener stays reachable directly. Cutting a broker's two proxies
isolates it from the keepers and its peers but not from a test that talks to its real port.

Every process and proxy started is stopped by `close()`; waits are bounded.
"""

from __future__ import annotations

import signal
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from tests.support.faultproxy import ThreadedFaultProxy
from tests.support.procs import RoostProcess, free_ports, start_roost, wait_for

# Fast failover for tests: a dead broker is noticed within ~2 s.
TEST_BROKER_SETTINGS: dict[str, Any] = {
    "zookeeper.session.timeout.ms": 2000,
    "replica.lag.time.max.ms": 6000,
    "replica.fetch.wait.max.ms": 200,
    "leader.imbalance.check.interval.seconds": 2,
    "controlled.shutdown.retry.backoff.ms": 200,
    "group.initial.rebalance.delay.ms": 0,
    "log.retention.check.interval.ms": 60_000,
}


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _flat(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """TOML's dotted keys read back as the flat names written (`broker.id`, not {broker: {id}})."""
    flat: dict[str, Any] = {}
    for key, value in table.items():
        if isinstance(value, dict):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def write_toml(path: Path, settings: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f'{k} = {_toml_value(v)}\n' for k, v in settings.items()))


@dataclass
class BrokerNode:
    broker_id: int
    port: int  # the real listener
    config: Path
    advertised_port: int  # where clients and peers are sent (a proxy's port when proxied)
    process: RoostProcess | None = None
    zk_proxy: ThreadedFaultProxy | None = None
    peer_proxy: ThreadedFaultProxy | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.popen.poll() is None


@dataclass
class KeeperNode:
    myid: int
    client_port: int
    config: Path
    process: RoostProcess | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.client_port}"


@dataclass
class LocalCluster:
    root: Path
    brokers: dict[int, BrokerNode] = field(default_factory=dict)
    keepers: dict[int, KeeperNode] = field(default_factory=dict)
    zookeeper: str = ""

    # building ---------------------------------------------------------------------------------
    @classmethod
    def start(cls, root: Path, brokers: int = 3, keepers: int = 1, zookeeper: str | None = None,
              settings: dict[str, Any] | None = None, proxied: bool = False,
              keeper_tick_ms: int = 500, log_dirs: int = 1) -> LocalCluster:
        cluster = cls(root)
        try:
            cluster.zookeeper = zookeeper if zookeeper else cluster._start_keepers(keepers, keeper_tick_ms)
            ports = free_ports(brokers * (3 if proxied else 1))
            for index in range(brokers):
                broker_id = index + 1
                port = ports[index]
                node = BrokerNode(broker_id, port, root / f"broker-{broker_id}.toml", port)
                connect = cluster.zookeeper
                if proxied:
                    node.zk_proxy = ThreadedFaultProxy(_first(cluster.zookeeper),
                                                       ("127.0.0.1", ports[brokers + index]))
                    node.peer_proxy = ThreadedFaultProxy(("127.0.0.1", port),
                                                         ("127.0.0.1", ports[2 * brokers + index]))
                    connect = f"127.0.0.1:{ports[brokers + index]}"
                    node.advertised_port = ports[2 * brokers + index]
                write_toml(node.config, {
                    "broker.id": broker_id, "zookeeper.connect": connect,
                    "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                    "advertised.listeners": f"PLAINTEXT://127.0.0.1:{node.advertised_port}",
                    # More than one: broker-ID, then broker-ID-disk2, ...
                    "log.dirs": ",".join([str(root / f"broker-{broker_id}"), *(
                        str(root / f"broker-{broker_id}-disk{n}") for n in range(2, log_dirs + 1))]),
                    # As `roost up --brokers N` does: internal and default topics replicated.
                    "offsets.topic.replication.factor": min(3, brokers),
                    "transaction.state.log.replication.factor": min(3, brokers),
                    "default.replication.factor": min(3, brokers),
                    **TEST_BROKER_SETTINGS, **(settings or {})})
                cluster.brokers[broker_id] = node
            for broker_id in cluster.brokers:
                cluster.start_broker(broker_id, wait=False)
            for broker_id in cluster.brokers:
                cluster._await_broker(broker_id)
            cluster.wait_for_brokers(set(cluster.brokers))
            return cluster
        except BaseException:
            cluster.close()
            raise

    def _start_keepers(self, count: int, tick_ms: int) -> str:
        client_ports = free_ports(count * 2)
        peers = client_ports[count:]
        for index in range(count):
            myid = index + 1
            settings: dict[str, Any] = {"tickTime": tick_ms, "dataDir": str(self.root / f"keeper-{myid}"),
                                        "clientPort": client_ports[index], "clientPortAddress": "127.0.0.1"}
            if count > 1:
                settings["myid"] = myid
                for other in range(count):
                    settings[f"server.{other + 1}"] = f"127.0.0.1:{peers[other]}"
            node = KeeperNode(myid, client_ports[index], self.root / f"keeper-{myid}.toml")
            write_toml(node.config, settings)
            self.keepers[myid] = node
        for node in self.keepers.values():
            node.process = start_roost(["keeper", "--config", str(node.config)], expect=("keeper",))
        return ",".join(node.address for node in self.keepers.values())

    def add_broker(self, broker_id: int) -> int:
        """A broker joining the cluster later: broker 1's settings with its own id, port and
        directory, and a metrics endpoint, whose port is returned."""
        settings = _flat(tomllib.loads(self.brokers[1].config.read_text()))
        port, metrics_port = free_ports(2)
        settings.update({"broker.id": broker_id, "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                         "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                         "log.dirs": str(self.root / f"broker-{broker_id}"), "metrics.port": metrics_port})
        node = BrokerNode(broker_id, port, self.root / f"broker-{broker_id}.toml", port)
        write_toml(node.config, settings)
        self.brokers[broker_id] = node
        self.start_broker(broker_id)
        return metrics_port

    # brokers ----------------------------------------------------------------------------------
    def start_broker(self, broker_id: int, wait: bool = True) -> None:
        node = self.brokers[broker_id]
        assert not node.running, f"broker {broker_id} is running"
        node.process = start_roost(["broker", "--config", str(node.config)],
                                   expect=(f"broker {broker_id} kafka",), wait=wait)

    def _await_broker(self, broker_id: int) -> None:
        node = self.brokers[broker_id]
        assert node.process is not None
        node.process.wait_ready(60.0)

    def kill(self, broker_id: int) -> None:
        """kill -9: no controlled shutdown, no flush."""
        node = self.brokers[broker_id]
        assert node.process is not None
        node.process.stop(signal.SIGKILL)

    def stop_broker(self, broker_id: int) -> int:
        """SIGTERM: a controlled shutdown. Returns the exit status."""
        node = self.brokers[broker_id]
        assert node.process is not None
        return node.process.stop(signal.SIGTERM, timeout=60)

    def restart(self, broker_id: int) -> None:
        self.start_broker(broker_id)

    def broker_output(self, broker_id: int) -> str:
        process = self.brokers[broker_id].process
        return process.text() if process else ""

    def wait_for_output(self, broker_id: int, *texts: str, timeout: float = 30.0) -> str:
        """The broker's output once it holds every one of `texts` (its lines reach us through a
        pipe a moment after the broker writes them); fails the test after `timeout` seconds."""
        def output_with_texts() -> str:
            output = self.broker_output(broker_id)
            return output if all(text in output for text in texts) else ""
        try:
            return wait_for(output_with_texts, timeout, interval=0.1, what=f"broker {broker_id} to log {texts!r}")
        except AssertionError as missing:
            # What it did log instead is what explains the failure.
            tail = "".join(self.broker_output(broker_id).splitlines(keepends=True)[-80:])
            raise AssertionError(f"{missing}; its last lines:\n{tail}") from None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.advertised_port}" for n in self.brokers.values())

    def running_bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.advertised_port}" for n in list(self.brokers.values()) if n.running)

    def running_addresses(self) -> list[str]:
        """Each running broker's own listener (to ask one broker what it alone holds)."""
        return [n.address for n in self.brokers.values() if n.running]

    # what the cluster says ----------------------------------------------------------------------
    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.running_bootstrap(), "socket.timeout.ms": 10000})

    def metadata(self, topic: str | None = None) -> Any:
        """The cluster's Metadata answer (asked again, a bounded number of times, while brokers
        come and go and a request fails)."""
        for attempt in range(20):
            try:
                return self.admin().list_topics(topic=topic, timeout=15)
            except KafkaException:
                if attempt == 19:
                    raise
                time.sleep(0.25)
        raise AssertionError("unreachable")

    def partitions(self, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
        """partition -> (leader, replicas, isr), as Metadata tells it."""
        found = self.metadata(topic).topics.get(topic)
        if found is None or found.error is not None:
            return {}
        return {p.id: (p.leader, list(p.replicas), list(p.isrs)) for p in found.partitions.values()}

    def controller(self) -> int:
        return self.metadata().controller_id

    def wait_for_brokers(self, ids: set[int], timeout: float = 60.0) -> None:
        wait_for(lambda: set(self.metadata().brokers) == ids, timeout, what=f"brokers {sorted(ids)} registered")

    def wait_for_isr(self, topic: str, full: bool = True, preferred: bool = False, timeout: float = 60.0) -> None:
        """Every partition has a leader; with `full`, every replica is in sync; with
        `preferred`, each is led by its first replica."""
        def healthy() -> bool:
            partitions = self.partitions(topic)
            if not partitions:
                return False
            for leader, replicas, isr in partitions.values():
                if leader < 0 or (full and set(isr) != set(replicas)):
                    return False
                if preferred and leader != replicas[0]:
                    return False
            return True
        wait_for(healthy, timeout, interval=0.2, what=f"{topic} healthy (full={full}, preferred={preferred})")

    def led_partitions(self, topic: str) -> dict[int, set[int]]:
        """broker -> the partitions it leads (asking until every partition has a leader)."""
        partitions = wait_for(lambda: (found := self.partitions(topic)) and
                              all(leader >= 0 for leader, _, _ in found.values()) and found,
                              30, interval=0.1, what=f"leaders of {topic}")
        led: dict[int, set[int]] = {}
        for partition, (leader, _, _) in partitions.items():
            led.setdefault(leader, set()).add(partition)
        return led

    def leader_counts(self, topic: str) -> dict[int, int]:
        partitions = self.partitions(topic)
        counts: dict[int, int] = {}
        for leader, _, _ in partitions.values():
            counts[leader] = counts.get(leader, 0) + 1
        return counts

    # ending -----------------------------------------------------------------------------------
    def close(self) -> None:
        for node in self.brokers.values():
            if node.process is not None:
                node.process.stop(signal.SIGKILL)
            for proxy in (node.zk_proxy, node.peer_proxy):
                if proxy is not None:
                    proxy.close()
        for keeper in self.keepers.values():
            if keeper.process is not None:
                keeper.process.stop()


def _first(connect: str) -> tuple[str, int]:
    host, port = connect.split(",")[0].split("/")[0].rsplit(":", 1)
    return host, int(port)
