"""Apache Kafka itself as a referee: real Kafka brokers started and stopped by tests.

How other tests use it
----------------------
Either as a context manager (any scope)::

    from tests.support import kafka_referee as kr

    with kr.kafka_zk(tmp_path, brokers=3) as kafka:           # Kafka 3.9, ZooKeeper mode, on
        bootstrap = kafka.bootstrap                              # Kafka 3.9's own ZooKeeper
    with kr.kafka_zk(tmp_path, zookeeper=keeper_address):      # ... on Roost's keeper instead
        ...
    with kr.kafka_kraft(tmp_path) as kafka:                    # Kafka 4.x, combined KRaft node
        ...

or through the shared fixtures (one JVM per session, because a JVM start costs seconds): put
`pytest_plugins = ["tests.support.kafka_referee"]`-style imports in a conftest, e.g.

    from tests.support.kafka_referee import kafka39, kafka4  # noqa: F401  (fixtures)

`kafka39` is a one-broker Apache Kafka 3.9 in ZooKeeper mode on a real ZooKeeper; `kafka4` one
combined KRaft node of the newest Kafka 4. Both are session-scoped `KafkaCluster`s: topics
created by one test stay, so each test names its own topics. Settings for either start come as a
dict of server.properties keys (`settings=`); `REFEREE_SETTINGS` are those every start gets (the
same as tests/support/cluster.py's TEST_BROKER_SETTINGS where both have the key), so a Roost broker
started with the same dict is configured alike. When the referee's jars are not installed
(`scripts/setup.sh test` installs them) the fixture skips as a missing referee, which fails the run
under `make test`.

Every process started here is stopped by the context manager that started it (SIGTERM, then
SIGKILL), also on failure; start waits are bounded: a broker is ready when it answers ApiVersions
and its Metadata lists every broker of the cluster.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.support import referees
from tests.support.jvm import JvmProcess, referee_classpath, run_java, start_java
from tests.support.kafka_wire import WireClient
from tests.support.procs import free_ports

KAFKA_3 = "kafka-3.9"  # referee cache names (referees/<name>/pom.xml)
KAFKA_4 = "kafka-4"
# For tests (not benchmarks: pass `tuned_for_tests=False`): C1 only and the serial collector start
# a JVM with about half the CPU, which matters on 2 shared cores; steady-state speed does not.
TEST_JVM_FLAGS = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-XX:CICompilerCount=1")
START_TIMEOUT = 120.0  # seconds for a broker to answer (generous: 2 shared cores, JIT warming up)

# Every referee start: quick rebalances, internal topics that fit the cluster, no waiting on
# fsync, and the log cleaner on (Roost's default) with a short backoff so compaction tests end.
REFEREE_SETTINGS: dict[str, Any] = {
    "group.initial.rebalance.delay.ms": 0,
    "num.partitions": 1,
    "log.cleaner.backoff.ms": 1000,
    "zookeeper.session.timeout.ms": 18000,
}

_LOG4J1 = """log4j.rootLogger=WARN, FILE
log4j.appender.FILE=org.apache.log4j.FileAppender
log4j.appender.FILE.File={path}
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.server.KafkaServer=INFO
log4j.logger.kafka.server.KafkaRaftServer=INFO
"""

_LOG4J2 = """status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {path}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
"""


def available(name: str = KAFKA_3) -> bool:
    return referee_classpath(name) is not None


def require(name: str = KAFKA_3) -> str:
    """The referee's classpath, or skip the running test as a missing referee."""
    classpath = referee_classpath(name)
    if classpath is None:
        referees.skip(referees.KAFKA_39 if name == KAFKA_3 else referees.KAFKA_4)
    return classpath


def _properties(settings: dict[str, Any]) -> str:
    def text(value: Any) -> str:
        return ("true" if value else "false") if isinstance(value, bool) else str(value)
    return "".join(f"{key}={text(value)}\n" for key, value in settings.items())


@dataclass
class KafkaNode:
    node_id: int
    port: int
    directory: Path
    properties: Path
    jvm_args: tuple[str, ...]
    heap: str = "512m"
    process: JvmProcess | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.running()


@dataclass
class KafkaCluster:
    """Running Apache Kafka brokers (and the ZooKeeper they use, when this started one)."""

    version: str  # the referee cache name: "kafka-3.9" or "kafka-4"
    classpath: str
    root: Path
    nodes: dict[int, KafkaNode] = field(default_factory=dict)
    zookeeper: str = ""  # ZooKeeper mode: the connect string ("" in KRaft mode)
    zookeeper_process: JvmProcess | None = None
    cluster_id: str = ""

    @property
    def bootstrap(self) -> str:
        return ",".join(node.address for node in self.nodes.values())

    @property
    def address(self) -> str:
        """The first broker's address (the only one of a one-broker cluster)."""
        return next(iter(self.nodes.values())).address

    def start_node(self, node_id: int) -> None:
        node = self.nodes[node_id]
        assert not node.running, f"Kafka node {node_id} runs"
        node.process = start_java("kafka.Kafka", [str(node.properties)], classpath=self.classpath,
                                  log=node.directory / "kafka.out", heap=node.heap, jvm_args=node.jvm_args)

    def wait_ready(self, node_ids: set[int] | None = None, timeout: float = START_TIMEOUT) -> None:
        ids = set(self.nodes) if node_ids is None else node_ids
        for node_id in ids:
            _wait_answering(self.nodes[node_id], set(self.nodes), timeout)

    def stop_node(self, node_id: int, timeout: float = 60.0) -> int:
        """SIGTERM: Kafka's controlled shutdown; returns the exit status."""
        process = self.nodes[node_id].process
        assert process is not None
        return process.stop(timeout)

    def kill9(self, node_id: int) -> None:
        process = self.nodes[node_id].process
        assert process is not None
        process.kill9()

    def restart(self, node_id: int, timeout: float = START_TIMEOUT) -> None:
        self.start_node(node_id)
        _wait_answering(self.nodes[node_id], set(self.nodes), timeout)

    def output(self, node_id: int) -> str:
        node = self.nodes[node_id]
        return node.process.output() if node.process else ""

    def close(self) -> None:
        for node in self.nodes.values():
            if node.process is not None:
                node.process.stop(timeout=20.0)
        if self.zookeeper_process is not None:
            self.zookeeper_process.stop(timeout=20.0)


def _answers(address: str, expected_brokers: set[int]) -> bool:
    """Whether the broker answers ApiVersions and its Metadata lists `expected_brokers`."""
    try:
        client = WireClient(address, timeout=5.0, client_id="roost-referee-probe")
    except OSError:
        return False
    try:
        versions = client.request(18, 3, {"client_software_name": "roost-test", "client_software_version": "1"})
        if versions["error_code"] != 0:
            return False
        metadata = client.request(3, 9, {"topics": [], "allow_auto_topic_creation": False})
        return {broker["node_id"] for broker in metadata["brokers"]} >= expected_brokers
    except (OSError, ConnectionError, KeyError):
        return False
    finally:
        client.close()


def _wait_answering(node: KafkaNode, expected_brokers: set[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        assert node.process is not None
        if not node.process.running():
            raise RuntimeError(f"Kafka node {node.node_id} exited ({node.process.popen.returncode}):\n"
                               f"{node.process.output()}")
        if _answers(node.address, expected_brokers):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kafka node {node.node_id} did not answer within {timeout}s:\n"
                               f"{node.process.output()}")
        time.sleep(0.25)


def _log_config(directory: Path, log4j2: bool) -> tuple[str, ...]:
    """JVM flags that send Kafka's log (WARN and up, plus its 'started' line) to a file."""
    directory.mkdir(parents=True, exist_ok=True)
    if log4j2:
        config = directory / "log4j2.properties"
        config.write_text(_LOG4J2.format(path=directory / "server.log"))
        return (f"-Dlog4j2.configurationFile={config}", f"-Dkafka.logs.dir={directory}")
    config = directory / "log4j.properties"
    config.write_text(_LOG4J1.format(path=directory / "server.log"))
    return (f"-Dlog4j.configuration=file:{config}", f"-Dkafka.logs.dir={directory}")


# ---------------------------------------------------------------------------- ZooKeeper


def _zookeeper_serving(address: str) -> bool:
    host, port = address.rsplit(":", 1)
    try:
        with socket.create_connection((host, int(port)), timeout=2.0) as sock:
            sock.sendall(b"ruok")
            return sock.recv(16) == b"imok"
    except OSError:
        return False


def start_zookeeper(directory: Path, classpath: str, timeout: float = 60.0) -> tuple[JvmProcess, str]:
    """A standalone ZooKeeper from `classpath` (Kafka 3.9's own jars hold ZooKeeper 3.8.4, the one
    its tarball's bin/zookeeper-server-start.sh runs); returns the process and its address."""
    (port,) = free_ports(1)
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "zoo.cfg"
    config.write_text(f"dataDir={directory / 'data'}\nclientPort={port}\nclientPortAddress=127.0.0.1\n"
                      "tickTime=500\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,srvr\n")
    process = start_java("org.apache.zookeeper.server.quorum.QuorumPeerMain", [str(config)],
                         classpath=classpath, log=directory / "zookeeper.out", heap="256m",
                         jvm_args=(*TEST_JVM_FLAGS, *_log_config(directory, log4j2=False)))
    address = f"127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while not _zookeeper_serving(address):
        if not process.running() or time.monotonic() > deadline:
            output = process.output()
            process.stop()
            raise RuntimeError(f"ZooKeeper did not start at {address}:\n{output}")
        time.sleep(0.2)
    return process, address


# ---------------------------------------------------------------------------- Kafka 3.9, ZooKeeper mode


@contextlib.contextmanager
def kafka_zk(root: Path, brokers: int = 1, zookeeper: str | None = None,
             settings: dict[str, Any] | None = None, version: str = KAFKA_3,
             heap: str = "512m", timeout: float = START_TIMEOUT,
             tuned_for_tests: bool = True) -> Iterator[KafkaCluster]:
    """Apache Kafka (3.9: the last with ZooKeeper mode) with `brokers` brokers, ids 1..N, on the
    ZooKeeper at `zookeeper` (e.g. a Roost keeper) or on one this starts; under a fresh chroot,
    so that several clusters can share one ZooKeeper."""
    classpath = require(version)
    cluster = KafkaCluster(version, classpath, root)
    try:
        if zookeeper is None:
            cluster.zookeeper_process, zookeeper = start_zookeeper(root / "zookeeper", classpath)
        chroot = f"/kafka-{uuid.uuid4().hex[:8]}"
        cluster.zookeeper = zookeeper + chroot
        ports = free_ports(brokers)
        flags = TEST_JVM_FLAGS if tuned_for_tests else ()
        for index in range(brokers):
            node_id = index + 1
            directory = root / f"kafka-{node_id}"
            directory.mkdir(parents=True, exist_ok=True)
            properties = directory / "server.properties"
            properties.write_text(_properties({
                "broker.id": node_id,
                "zookeeper.connect": cluster.zookeeper,
                "listeners": f"PLAINTEXT://127.0.0.1:{ports[index]}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{ports[index]}",
                "log.dirs": str(directory / "data"),
                "offsets.topic.replication.factor": min(3, brokers),
                "transaction.state.log.replication.factor": min(3, brokers),
                "transaction.state.log.min.isr": min(2, brokers),
                "default.replication.factor": min(3, brokers),
                **REFEREE_SETTINGS, **(settings or {})}))
            cluster.nodes[node_id] = KafkaNode(node_id, ports[index], directory, properties,
                                               (*flags, *_log_config(directory, log4j2=False)), heap)
        for node_id in cluster.nodes:
            cluster.start_node(node_id)
        cluster.wait_ready(timeout=timeout)
        yield cluster
    finally:
        cluster.close()


# ---------------------------------------------------------------------------- Kafka 4, KRaft


def new_cluster_id() -> str:
    """A cluster id as `kafka-storage random-uuid` makes: 16 random bytes, URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


@contextlib.contextmanager
def kafka_kraft(root: Path, settings: dict[str, Any] | None = None, version: str = KAFKA_4,
                heap: str = "512m", timeout: float = START_TIMEOUT,
                tuned_for_tests: bool = True) -> Iterator[KafkaCluster]:
    """One Apache Kafka 4 node in combined mode (broker and controller, node id 1): its storage
    formatted with `kafka-storage format` (kafka.tools.StorageTool), then started."""
    classpath = require(version)
    cluster = KafkaCluster(version, classpath, root, cluster_id=new_cluster_id())
    try:
        port, controller_port = free_ports(2)
        directory = root / "kafka-1"
        directory.mkdir(parents=True, exist_ok=True)
        properties = directory / "server.properties"
        merged = {key: value for key, value in REFEREE_SETTINGS.items() if not key.startswith("zookeeper.")}
        properties.write_text(_properties({
            "process.roles": "broker,controller",
            "node.id": 1,
            "controller.quorum.voters": f"1@127.0.0.1:{controller_port}",
            "listeners": f"PLAINTEXT://127.0.0.1:{port},CONTROLLER://127.0.0.1:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(directory / "data"),
            "offsets.topic.replication.factor": 1,
            "transaction.state.log.replication.factor": 1,
            "transaction.state.log.min.isr": 1,
            "share.coordinator.state.topic.replication.factor": 1,
            "share.coordinator.state.topic.min.isr": 1,
            **merged, **(settings or {})}))
        log_flags = (*(TEST_JVM_FLAGS if tuned_for_tests else ()), *_log_config(directory, log4j2=True))
        formatted = run_java("kafka.tools.StorageTool",
                             ["format", "-t", cluster.cluster_id, "-c", str(properties), "--ignore-formatted"],
                             classpath=classpath, log=directory / "format.out", jvm_args=log_flags)
        if formatted.returncode != 0:
            raise RuntimeError(f"kafka-storage format failed ({formatted.returncode}):\n"
                               f"{formatted.stdout}\n{formatted.stderr}")
        cluster.nodes[1] = KafkaNode(1, port, directory, properties, log_flags, heap)
        cluster.start_node(1)
        cluster.wait_ready(timeout=timeout)
        yield cluster
    finally:
        cluster.close()


# ---------------------------------------------------------------------------- shared fixtures


@pytest.fixture(scope="session")
def kafka39(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One Apache Kafka 3.9 broker (ZooKeeper mode, on Kafka's own ZooKeeper), shared by the session."""
    require(KAFKA_3)
    with kafka_zk(tmp_path_factory.mktemp("kafka39")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    """One Apache Kafka 4 node (combined KRaft), shared by the session."""
    require(KAFKA_4)
    with kafka_kraft(tmp_path_factory.mktemp("kafka4")) as cluster:
        yield cluster
