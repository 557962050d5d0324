"""Several log directories (`log.dirs` a list) against a real `roost up` process: DescribeLogDirs
through kafka-python's admin (and v1, the oldest advertised, on the raw wire), new partitions
spread over the directories, AlterReplicaLogDirs moving a partition during a produce stream with
every acknowledged record kept, a kill -9 while the future copy exists, and a directory whose disk
fails (its directory replaced by a file, so opens and new files there fail) taking only its own
partitions offline with KAFKA_STORAGE_ERROR (and, told through /log_dir_event_notification, the
controller of the node's one-broker cluster leaving them without a leader)."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaProducer
from kafka.errors import KafkaStorageError, LogDirNotFoundError, NoError, ReplicaNotAvailableError

from tests.broker.conftest import StartBroker
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, wait_for

LIST_OFFSETS, METADATA, DESCRIBE_LOG_DIRS = 2, 3, 35
KAFKA_STORAGE_ERROR = 56


def two_dir_broker(start_broker: StartBroker, tmp_path: Path, *flags: str) -> tuple[RoostProcess, Path, Path]:
    first, second = tmp_path / "data", tmp_path / "second-disk"
    proc = start_broker("--set", f"log.dirs={first},{second}", *flags)
    return proc, first, second


def create_topic(bootstrap: str, name: str, partitions: int, **configs: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, 1, config=configs)]).values():
        future.result(30)


def describe(bootstrap: str) -> dict[str, dict[str, Any]]:
    """{log dir: kafka-python's entry for it} for the one broker."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (answer,) = admin.describe_log_dirs()
    finally:
        admin.close()
    return {entry["log_dir"]: entry for entry in answer["log_dirs"]}


def placement(entries: dict[str, dict[str, Any]], topic: str) -> dict[int, tuple[str, bool]]:
    """{partition: (log dir, future?)}: where each copy of `topic`'s partitions is."""
    found: dict[int, tuple[str, bool]] = {}
    for log_dir, entry in entries.items():
        for named in entry["topics"]:
            if named["name"] == topic:
                for p in named["partitions"]:
                    if not p["is_future_key"]:
                        found[p["partition_index"]] = (log_dir, False)
    return found


def futures(entries: dict[str, dict[str, Any]], topic: str) -> list[dict[str, Any]]:
    return [p for entry in entries.values() for named in entry["topics"] if named["name"] == topic
            for p in named["partitions"] if p["is_future_key"]]


def move(bootstrap: str, topic: str, index: int, to: Path) -> Any:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        (broker,) = admin.describe_cluster()["brokers"]
        (error,) = admin.alter_replica_log_dirs({(topic, index, broker["broker_id"]): str(to)}).values()
    finally:
        admin.close()
    return error


def read_all(bootstrap: str, topic: str, indexes: tuple[int, ...] = (0,)) -> dict[tuple[int, int], bytes]:
    """Every record of `topic`'s partitions `indexes`, by (partition, offset), read from the start
    without a group."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    ends = {}
    for index in indexes:
        ends[index] = consumer.get_watermark_offsets(TopicPartition(topic, index), timeout=30)[1]
    consumer.assign([TopicPartition(topic, index, 0) for index in indexes])
    found: dict[tuple[int, int], bytes] = {}
    try:
        for _ in range(2000):  # bounded: polls of up to 0.1 s
            if all(sum(1 for (p, _o) in found if p == index) >= ends[index] for index in ends):
                break
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                found[(message.partition(), message.offset())] = message.value()
    finally:
        consumer.close()
    return found


class ProduceStream:
    """A confluent-kafka producer (acks=all) sending numbered records to one partition from a
    thread until stopped; `acked` holds (offset, value) of each acknowledged record."""

    def __init__(self, bootstrap: str, topic: str, index: int, size: int = 200) -> None:
        self.producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
        self.topic, self.index, self.size = topic, index, size
        self.acked: list[tuple[int, bytes]] = []
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            self.acked.append((message.offset(), message.value()))
        else:
            self.failed.append(str(error))

    def _run(self) -> None:
        sent = 0
        while not self._stop.is_set() and sent < 200_000:
            value = f"{sent:08d}".encode().ljust(self.size, b".")
            self.producer.produce(self.topic, value, partition=self.index, on_delivery=self._delivered)
            sent += 1
            self.producer.poll(0.002)  # about 500 records/s: slower than the move copies
        self.producer.flush(30)

    def __enter__(self) -> ProduceStream:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)


def prefill(bootstrap: str, topic: str, index: int, count: int, size: int = 1000) -> list[tuple[int, bytes]]:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 20})
    acked: list[tuple[int, bytes]] = []
    for n in range(count):
        producer.produce(topic, f"pre-{n:06d}".encode().ljust(size, b"-"), partition=index,
                         on_delivery=lambda err, msg: acked.append((msg.offset(), msg.value())) if err is None else None)
        if n % 500 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    assert len(acked) == count
    return acked


def assert_offline(bootstrap: str, topic: str, index: int) -> None:
    """The partition's only replica is on a failed directory: the controller (told through
    /log_dir_event_notification) leaves it without a leader, its replica listed offline, and the
    broker answers KAFKA_STORAGE_ERROR for it."""
    raw = WireClient(bootstrap)
    try:
        def offline_in_metadata() -> bool:
            answer = raw.request(METADATA, 12, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})
            partition = next(p for p in answer["topics"][0]["partitions"] if p["partition_index"] == index)
            return partition["leader_id"] == -1 and partition["offline_replicas"] == partition["replica_nodes"]

        wait_for(offline_in_metadata, what=f"{topic}-{index} offline in Metadata")
        answer = raw.request(LIST_OFFSETS, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": index, "current_leader_epoch": -1, "timestamp": -1}]}]})
        assert answer["topics"][0]["partitions"][0]["error_code"] == KAFKA_STORAGE_ERROR
    finally:
        raw.close()


def test_describe_log_dirs_reports_both_directories_and_new_partitions_are_spread(
        start_broker: StartBroker, tmp_path: Path) -> None:
    proc, first, second = two_dir_broker(start_broker, tmp_path)
    bootstrap = proc.address("kafka")
    create_topic(bootstrap, "spread", 4)
    prefill(bootstrap, "spread", 0, 20)
    entries = describe(bootstrap)
    assert set(entries) == {str(first), str(second)}
    for entry in entries.values():
        assert entry["error_code"] == 0 and entry["total_bytes"] > 0 and 0 <= entry["usable_bytes"] <= entry["total_bytes"]
    where = placement(entries, "spread")
    assert sorted(where) == [0, 1, 2, 3]
    # The fewest-partitions rule alternates between two empty directories.
    assert sorted(d for d, _ in where.values()) == sorted([str(first)] * 2 + [str(second)] * 2)
    sizes = {p["partition_index"]: p["partition_size"] for e in entries.values() for t in e["topics"]
             if t["name"] == "spread" for p in t["partitions"]}
    assert sizes[0] > 20 * 1000 and sizes[1] == sizes[2] == sizes[3] == 0
    assert all(p["offset_lag"] == 0 for e in entries.values() for t in e["topics"] for p in t["partitions"])
    for directory in (first, second):  # each directory's identity, Kafka's file
        assert "directory.id=" in (directory / "meta.properties").read_text()

    # v1 (non-flexible, the oldest advertised) on the raw wire, asking for one partition.
    raw = WireClient(bootstrap)
    try:
        answer = raw.request(DESCRIBE_LOG_DIRS, 1, {"topics": [{"topic": "spread", "partitions": [0]}]})
    finally:
        raw.close()
    listed = [(r["log_dir"], t["name"], p["partition_index"]) for r in answer["results"] for t in r["topics"]
              for p in t["partitions"]]
    assert listed == [(where[0][0], "spread", 0)]

    # Errors, as Kafka's: an unknown directory, a partition with no replica here.
    assert move(bootstrap, "spread", 0, tmp_path / "nowhere") is LogDirNotFoundError
    assert move(bootstrap, "no-such-topic", 0, second) is ReplicaNotAvailableError

    # Restarted, every partition is found where it was.
    assert proc.stop() == 0
    proc, _, _ = two_dir_broker(start_broker, tmp_path)
    assert placement(describe(proc.address("kafka")), "spread") == where


def test_a_partition_moves_between_directories_during_a_produce_stream(
        start_broker: StartBroker, tmp_path: Path) -> None:
    # Throttled so that the copy takes a second or two while the stream goes on.
    proc, first, second = two_dir_broker(start_broker, tmp_path,
                                         "--set", "replica.alter.log.dirs.io.max.bytes.per.second=400000")
    bootstrap = proc.address("kafka")
    create_topic(bootstrap, "moving", 1)
    acked = prefill(bootstrap, "moving", 0, 600)
    source = placement(describe(bootstrap), "moving")[0][0]
    target = second if source == str(first) else first
    seen_future: list[dict[str, Any]] = []
    with ProduceStream(bootstrap, "moving", 0) as stream:
        wait_for(lambda: len(stream.acked) > 50, what="the stream to start")
        assert move(bootstrap, "moving", 0, target) is NoError

        def moved() -> bool:
            entries = describe(bootstrap)
            seen_future.extend(futures(entries, "moving"))
            return placement(entries, "moving")[0][0] == str(target) and not futures(entries, "moving")

        wait_for(moved, timeout=60, interval=0.2, what="the move to finish")
        during = len(stream.acked)
        wait_for(lambda: len(stream.acked) > during + 100, what="appends after the swap")
    assert stream.failed == []
    assert seen_future, "the future copy was never seen: the move did not overlap the stream"
    assert all(p["offset_lag"] >= 0 for p in seen_future)
    assert not (Path(source) / "logs" / "moving-0").exists()
    acked += stream.acked
    stored = read_all(bootstrap, "moving")
    assert len(stored) == len(acked)
    assert all(stored[(0, offset)] == value for offset, value in acked)


def test_a_kill_while_the_future_copy_exists_loses_nothing(start_broker: StartBroker, tmp_path: Path) -> None:
    slow = ("--set", "replica.alter.log.dirs.io.max.bytes.per.second=100000")
    proc, first, second = two_dir_broker(start_broker, tmp_path, *slow)
    bootstrap = proc.address("kafka")
    create_topic(bootstrap, "crashing", 1)
    acked = prefill(bootstrap, "crashing", 0, 1500)
    source = placement(describe(bootstrap), "crashing")[0][0]
    target = second if source == str(first) else first
    assert move(bootstrap, "crashing", 0, target) is NoError
    wait_for(lambda: list((target / "logs").glob("crashing-0.*-future")), what="the future copy on disk")
    proc.kill9()

    proc, _, _ = two_dir_broker(start_broker, tmp_path)
    bootstrap = proc.address("kafka")
    # The unfinished copy is discarded; the current one serves everything acknowledged.
    assert not list((target / "logs").glob("crashing-0.*"))
    assert placement(describe(bootstrap), "crashing") == {0: (source, False)}
    stored = read_all(bootstrap, "crashing")
    assert len(stored) == len(acked)
    assert all(stored[(0, offset)] == value for offset, value in acked)
    # And the move can be asked again and finish.
    assert move(bootstrap, "crashing", 0, target) is NoError
    wait_for(lambda: placement(describe(bootstrap), "crashing") == {0: (str(target), False)}, timeout=60,
             interval=0.2, what="the second move")
    assert len(read_all(bootstrap, "crashing")) == len(acked)


def test_a_failed_directory_takes_only_its_partitions_offline(start_broker: StartBroker, tmp_path: Path) -> None:
    proc, first, second = two_dir_broker(start_broker, tmp_path)
    bootstrap = proc.address("kafka")
    # Small segments: appends soon need a new segment file, which a failed disk cannot make.
    create_topic(bootstrap, "fragile", 2, **{"segment.bytes": "2000"})
    where = placement(describe(bootstrap), "fragile")
    healthy = next(i for i, (d, _) in where.items() if d == str(first))
    broken = next(i for i, (d, _) in where.items() if d == str(second))
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, acks=1)
    try:
        for index in (healthy, broken):
            producer.send("fragile", b"before", partition=index).get(timeout=30)
        # The disk fails: its logs directory is gone and a file stands in its place.
        shutil.rmtree(second / "logs")
        (second / "logs").write_bytes(b"not a directory")
        error = None
        for n in range(200):  # bounded: each append fills the small segment until a roll must open a file
            try:
                producer.send("fragile", b"x" * 200 + str(n).encode(), partition=broken).get(timeout=30)
            except KafkaStorageError as raised:
                error = raised
                break
        assert error is not None, "appends to the failed directory never failed"
        for _ in range(20):  # the other directory keeps serving
            producer.send("fragile", b"still", partition=healthy).get(timeout=30)
    finally:
        producer.close(10)
    assert_offline(bootstrap, "fragile", broken)
    entries = describe(bootstrap)
    assert entries[str(second)]["error_code"] == KAFKA_STORAGE_ERROR and entries[str(second)]["topics"] == []
    assert entries[str(first)]["error_code"] == 0
    assert placement(entries, "fragile") == {healthy: (str(first), False)}
    assert move(bootstrap, "fragile", healthy, second) is KafkaStorageError
    stored = read_all(bootstrap, "fragile", (healthy,))
    assert sum(1 for (p, _o) in stored if p == healthy) == 21

    # Restarted with the directory still failed: it starts offline, and its partition is not
    # created afresh in the healthy directory (it may be on the failed one: Kafka's rule).
    assert proc.stop() == 0
    proc, _, _ = two_dir_broker(start_broker, tmp_path)
    bootstrap = proc.address("kafka")
    entries = describe(bootstrap)
    assert entries[str(second)]["error_code"] == KAFKA_STORAGE_ERROR
    assert placement(entries, "fragile") == {healthy: (str(first), False)}
    assert not (first / "logs" / f"fragile-{broken}").exists()
    assert_offline(bootstrap, "fragile", broken)
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, acks=1)
    try:
        producer.send("fragile", b"again", partition=healthy).get(timeout=30)
    finally:
        producer.close(10)
    assert sum(1 for (p, _o) in read_all(bootstrap, "fragile", (healthy,)) if p == healthy) == 22
