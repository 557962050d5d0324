"""Share-group administration against a real `roost up`: the offsets admin APIs
(DescribeShareGroupOffsets, AlterShareGroupOffsets, DeleteShareGroupOffsets, 90-92) over the wire
as Kafka 4.2 answers them, `roost share-group reset-offsets` / `describe --offsets` and Apache
Kafka 4's own kafka-share-groups.sh (ShareGroupCommand) on them; Roost's dead-letter topic
(`roost.share.dead.letter.topic`) and `roost share-group replay`. Records come from
confluent-kafka's ShareConsumer (its AdminClient has no share-offset calls).

One broker for the module (the cross-broker paths, persister and ListOffsets or Produce to a
remote leader, are the same code the three-broker share tests run)."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    AcknowledgeType,
    Consumer,
    KafkaException,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
)

from roost.admin.errors import AdminError
from roost.admin.share_groups import describe_share_offsets, reset_share_offsets
from roost.admin.target import Target
from roost.cli.main import main as roost_main
from tests.support import referees
from tests.support.jvm import java_binary, referee_classpath
from tests.support.kafka_wire import WireClient
from tests.support.procs import RoostProcess, start_roost
from tests.support.share_configs import read_from_earliest, set_group_configs

API_VERSIONS, FIND_COORDINATOR = 18, 10
DESCRIBE_OFFSETS, ALTER_OFFSETS, DELETE_OFFSETS = 90, 91, 92
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_GROUP_ID, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP = 0, 3, 24, 69, 68
ZERO_UUID = uuid.UUID(int=0)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoostProcess]:
    directory = tmp_path_factory.mktemp("share-admin")
    proc = start_roost(["up", "--data-dir", str(directory), "--kafka-port", "0",
                        "--group.share.min.record.lock.duration.ms", "1000"], expect=("kafka", "keeper"))
    yield proc
    proc.stop()


def make_topic(broker: RoostProcess, name: str, records: int, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": broker.address("kafka")})
    for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": broker.address("kafka"), "linger.ms": 5})
    for i in range(records):
        producer.produce(name, key=f"k{i}".encode(), value=f"v{i}".encode(), partition=i % partitions)
    assert producer.flush(30) == 0


def consume(broker: RoostProcess, group: str, topic: str, count: int, timeout: float = 30.0,
            close: bool = True) -> tuple[list[Any], ShareConsumer]:
    """`count` records accepted by one share consumer (implicit acknowledgement, committed)."""
    consumer = ShareConsumer({"bootstrap.servers": broker.address("kafka"), "group.id": group})
    consumer.subscribe([topic])
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got.extend(m for m in consumer.poll(0.5) or [] if m.error() is None)
    consumer.commit_sync(30)
    if close:
        consumer.close()
    return got, consumer


def coordinator(broker: RoostProcess, group: str) -> WireClient:
    raw = WireClient(broker.address("kafka"))
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        found = raw.request(FIND_COORDINATOR, 3, {"key": group, "key_type": 0})
        if found["error_code"] == 0:
            raw.close()
            return WireClient(f"{found['host']}:{found['port']}")
        time.sleep(0.2)
    raise AssertionError("no coordinator")


def describe(raw: WireClient, group: str, topics: list[dict[str, Any]] | None = None,
             version: int = 1) -> dict[str, Any]:
    answer = raw.request(DESCRIBE_OFFSETS, version, {"groups": [{"group_id": group, "topics": topics}]})
    (found,) = answer["groups"]
    return found


def offsets(raw: WireClient, group: str, topic: str) -> dict[int, tuple[int, int]]:
    """partition -> (start offset, lag) of the group's share-partitions of `topic`, asked by name."""
    found = describe(raw, group, [{"topic_name": topic, "partitions": [0]}])
    assert found["error_code"] == NONE, found
    return {p["partition_index"]: (p["start_offset"], p["lag"]) for t in found["topics"] for p in t["partitions"]}


def test_offsets_are_described_altered_and_deleted(broker: RoostProcess) -> None:
    topic, group = "admin-orders", f"admin-{uuid.uuid4().hex[:8]}"
    make_topic(broker, topic, 10)
    read_from_earliest(broker.address("kafka"), group)
    raw = coordinator(broker, group)
    versions = {a["api_key"]: (a["min_version"], a["max_version"])
                for a in raw.request(API_VERSIONS, 3, {"client_software_name": "t",
                                                       "client_software_version": "1"})["api_keys"]}
    assert versions[DESCRIBE_OFFSETS] == (0, 1) and versions[ALTER_OFFSETS] == (0, 0) \
        and versions[DELETE_OFFSETS] == (0, 0)

    # Before anything: no state, no topics; an unknown topic is StartOffset -1 and a zero id.
    assert describe(raw, group)["topics"] == []
    missing = describe(raw, group, [{"topic_name": "no-such-topic", "partitions": [0]}])
    assert missing["topics"][0]["topic_id"] == ZERO_UUID
    assert missing["topics"][0]["partitions"][0]["start_offset"] == -1

    got, _ = consume(broker, group, topic, 10)
    assert sorted(m.offset() for m in got) == list(range(10))
    # Everything accepted: the start is 10 and nothing lags; null topics list the initialized ones.
    deadline = time.monotonic() + 20
    while offsets(raw, group, topic)[0] != (10, 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert offsets(raw, group, topic)[0] == (10, 0)
    every = describe(raw, group)
    assert [(t["topic_name"], [p["partition_index"] for p in t["partitions"]]) for t in every["topics"]] \
        == [(topic, [0])]
    v0 = describe(raw, group, version=0)["topics"][0]["partitions"][0]
    assert v0["start_offset"] == 10 and "lag" not in v0  # Lag is v1+

    # A member in the group: altering and deleting are refused.
    holder = ShareConsumer({"bootstrap.servers": broker.address("kafka"), "group.id": group})
    holder.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        refused: dict[str, Any] = {}
        while time.monotonic() < deadline:
            holder.poll(0.2)
            refused = raw.request(ALTER_OFFSETS, 0, {"group_id": group, "topics": [
                {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 3}]}]})
            if refused["error_code"] == NON_EMPTY_GROUP:
                break
        assert refused["error_code"] == NON_EMPTY_GROUP, refused
        assert raw.request(DELETE_OFFSETS, 0, {"group_id": group, "topics": [{"topic_name": topic}]})[
            "error_code"] == NON_EMPTY_GROUP
    finally:
        holder.close()

    # Empty again: the start goes back to 3 and a new consumer gets offsets 3..9 again.
    altered = raw.request(ALTER_OFFSETS, 0, {"group_id": group, "topics": [
        {"topic_name": topic, "partitions": [{"partition_index": 0, "start_offset": 3},
                                             {"partition_index": 7, "start_offset": 0}]},
        {"topic_name": "no-such-topic", "partitions": [{"partition_index": 0, "start_offset": 0}]}]})
    assert altered["error_code"] == NONE, altered
    codes = {(t["topic_name"], p["partition_index"]): p["error_code"]
             for t in altered["responses"] for p in t["partitions"]}
    assert codes == {(topic, 0): NONE, (topic, 7): UNKNOWN_TOPIC_OR_PARTITION,
                     ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    start, _lag = offsets(raw, group, topic)[0]
    assert start == 3
    again, _ = consume(broker, group, topic, 7)
    assert sorted(m.offset() for m in again) == list(range(3, 10)), "the altered start is not where delivery resumed"

    # Deleted: the state goes, null topics list nothing, a second delete has nothing to delete.
    deleted = raw.request(DELETE_OFFSETS, 0, {"group_id": group, "topics": [{"topic_name": topic},
                                                                            {"topic_name": "no-such-topic"}]})
    assert deleted["error_code"] == NONE, deleted
    assert {t["topic_name"]: t["error_code"] for t in deleted["responses"]} == {
        topic: NONE, "no-such-topic": UNKNOWN_TOPIC_OR_PARTITION}
    assert describe(raw, group)["topics"] == []
    assert offsets(raw, group, topic)[0][0] == -1
    twice = raw.request(DELETE_OFFSETS, 0, {"group_id": group, "topics": [{"topic_name": topic}]})
    assert twice["responses"][0]["error_code"] == UNKNOWN_TOPIC_OR_PARTITION
    assert twice["responses"][0]["error_message"] == "There is no offset information to delete."

    # Bad group ids.
    assert raw.request(ALTER_OFFSETS, 0, {"group_id": "", "topics": []})["error_code"] == INVALID_GROUP_ID
    assert raw.request(DELETE_OFFSETS, 0, {"group_id": "never-was", "topics": [{"topic_name": topic}]})[
        "error_code"] == GROUP_ID_NOT_FOUND
    raw.close()


SHARE_GROUP_COMMAND = "org.apache.kafka.tools.consumer.group.ShareGroupCommand"


def kafka_share_groups(*args: str) -> subprocess.CompletedProcess[str]:
    """Apache Kafka 4's kafka-share-groups.sh (its ShareGroupCommand class, as the script runs it)."""
    classpath, java = referee_classpath("kafka-4"), java_binary()
    if classpath is None or java is None:
        referees.skip(referees.KAFKA_4)
    assert classpath is not None and java is not None
    return subprocess.run([java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath, SHARE_GROUP_COMMAND, *args],
                          capture_output=True, text=True, timeout=120)


def start_offset(broker: RoostProcess, group: str, topic: str) -> tuple[int | None, int | None]:
    """What `roost share-group describe --offsets` shows (its library, in-process: CLI starts are slow)."""
    rows = describe_share_offsets(Target(broker.address("kafka")), group)
    (row,) = [r for r in rows if r["topic"] == topic and r["partition"] == 0]
    return row["start_offset"], row["lag"]


def roost(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`roost ARGS` run in this process (its main(), as the script calls it): status, stdout, stderr."""
    capsys.readouterr()
    code = roost_main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_reset_offsets_with_roost_and_kafka_share_groups(broker: RoostProcess,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    topic, group = "admin-reset", f"reset-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.address("kafka")
    make_topic(broker, topic, 6)
    read_from_earliest(broker.address("kafka"), group)
    got, _ = consume(broker, group, topic, 6)
    assert len(got) == 6
    deadline = time.monotonic() + 20
    while start_offset(broker, group, topic) != (6, 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert start_offset(broker, group, topic) == (6, 0)

    # A member in the group: refused, with the reason.
    holder = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    holder.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:  # until its join has landed
            holder.poll(0.2)
            try:
                reset_share_offsets(Target(bootstrap), group, (topic,), "earliest", None, execute=True)
            except AdminError:
                break
        code, _, err = roost(capsys, "share-group", "reset-offsets", "--group", group, "--topic", topic,
                             "--to-earliest", "--execute", "-b", bootstrap)
        assert code != 0 and f"Share group '{group}' is not empty" in err, err
    finally:
        holder.close()

    # Dry run (the default) shows, --execute writes.
    code, out, err = roost(capsys, "share-group", "reset-offsets", "--group", group, "--topic", topic,
                           "--to-earliest", "-b", bootstrap, "--format", "json")
    assert code == 0, err
    assert json.loads(out) == [{"group": group, "topic": topic, "partition": 0, "new_offset": 0}]
    assert start_offset(broker, group, topic)[0] == 6
    code, _, err = roost(capsys, "share-group", "reset-offsets", "--group", group, "--topic", f"{topic}:0",
                         "--to-offset", "2", "--execute", "-b", bootstrap)
    assert code == 0, err
    code, out, _ = roost(capsys, "share-group", "describe", group, "--offsets", "-b", bootstrap, "--format", "json")
    assert json.loads(out) == [{"group": group, "topic": topic, "partition": 0, "leader_epoch": -1,
                                "start_offset": 2, "lag": None}]
    # A re-initialized state has no DeliveryCompleteCount until its leader writes: no lag yet (Kafka's "-").
    assert start_offset(broker, group, topic) == (2, None)

    # Kafka's own tool sees the same and resets the same way.
    described = kafka_share_groups("--bootstrap-server", bootstrap, "--describe", "--offsets", "--group", group)
    assert described.returncode == 0, described.stderr
    assert [group, topic, "0", "2", "-"] in [line.split() for line in described.stdout.splitlines()], described.stdout
    reset = kafka_share_groups("--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, "--topic", topic,
                               "--to-latest", "--execute")
    assert reset.returncode == 0, reset.stderr + reset.stdout
    assert start_offset(broker, group, topic)[0] == 6
    # No --topic: every share-partition the group has state for (delivery from a reset start is
    # the wire test's and the three-broker test's).
    rows = reset_share_offsets(Target(bootstrap), group, (), "earliest", None, execute=True)
    assert [(r["topic"], r["partition"], r["new_offset"]) for r in rows] == [(topic, 0, 0)]
    assert start_offset(broker, group, topic)[0] == 0

    code, _, err = roost(capsys, "share-group", "reset-offsets", "--group", group, "--topic", topic, "-b", bootstrap)
    assert code != 0 and "exactly one of" in err


DLT_HEADERS = ("roost.dlt.origin.topic", "roost.dlt.origin.partition", "roost.dlt.origin.offset", "roost.dlt.group",
               "roost.dlt.delivery.count", "roost.dlt.reason")


def read_topic(broker: RoostProcess, topic: str, count: int, timeout: float = 20.0, start: int = OFFSET_BEGINNING
               ) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": broker.address("kafka"), "group.id": f"read-{uuid.uuid4().hex[:6]}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, start)])  # no group join: quick
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message)
    finally:
        consumer.close()
    return got


def test_rejected_and_exhausted_records_land_in_the_dead_letter_topic(broker: RoostProcess,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Offset 0 accepted, 1 rejected, 2 released until the delivery limit (5): 1 and 2 are copied
    to the dead-letter topic with their headers and where and why they came from; 0 is not. The
    dead-letter topic does not exist at the first rejection: that copy fails, so record 1 is not
    archived but delivered again, and dead-lettered once the topic exists. Then `roost share-group
    replay` sends both back to their origin partition as they were, once."""
    topic, dlt, group = "dl-work", "dl-letters", f"dl-{uuid.uuid4().hex[:8]}"
    make_topic(broker, topic, 0)
    producer = Producer({"bootstrap.servers": broker.address("kafka")})
    for i in range(3):
        producer.produce(topic, key=f"k{i}".encode(), value=f"v{i}".encode(), headers=[("trace", f"t{i}".encode())])
    assert producer.flush(30) == 0
    with pytest.raises(KafkaException, match="INVALID_CONFIG"):
        set_group_configs(broker.address("kafka"), group, {"roost.share.dead.letter.topic": "not a topic!"})
    set_group_configs(broker.address("kafka"), group, {"share.auto.offset.reset": "earliest",
                                                       "roost.share.dead.letter.topic": dlt})

    consumer = ShareConsumer({"bootstrap.servers": broker.address("kafka"), "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    deliveries: Counter[int] = Counter()
    last_count: dict[int, int] = {}  # the delivery count of each offset's latest delivery
    verdict = {0: AcknowledgeType.ACCEPT, 1: AcknowledgeType.REJECT, 2: AcknowledgeType.RELEASE}
    created = False
    deadline = time.monotonic() + 40
    try:
        while time.monotonic() < deadline:
            for message in consumer.poll(0.3) or []:
                if message.error() is None:
                    deliveries[message.offset()] += 1
                    last_count[message.offset()] = message.delivery_count()
                    consumer.acknowledge(message, verdict[message.offset()])
            if not created and deliveries[1] >= 2:  # the first rejection's copy failed: it came back
                admin = AdminClient({"bootstrap.servers": broker.address("kafka")})
                for future in admin.create_topics([NewTopic(dlt, 1, 1)]).values():
                    future.result(30)
                created = True
            if created and last_count.get(2) == 5:  # its last delivery, released: the limit
                break
        consumer.commit_sync(30)  # the last release: answered once its dead letter is written
    finally:
        consumer.close()
    letters = read_topic(broker, dlt, 2)
    assert deliveries[1] >= 2, (f"record 1 was rejected while the dead-letter topic was missing and never "
                                f"came back: archived without its dead letter ({dict(deliveries)})")
    # Released every time: archived at the limit. (The failed copy's change took record 2's first
    # release with it: the reloaded share-partition delivered it again from its persisted count.)
    assert deliveries[2] >= 5, dict(deliveries)
    assert len(letters) == 2, f"dead letters: {len(letters)}, deliveries {dict(deliveries)}"
    by_offset = {int(dict(m.headers())["roost.dlt.origin.offset"]): m for m in letters}
    assert set(by_offset) == {1, 2}, "only the rejected and the exhausted records are dead letters"
    for offset, reason in ((1, b"rejected"), (2, b"delivery_limit")):
        message = by_offset[offset]
        headers = message.headers()
        assert headers[0] == ("trace", f"t{offset}".encode()), "the record's own headers come first, kept"
        got = dict(headers)
        assert set(DLT_HEADERS) <= set(got)
        assert got["roost.dlt.origin.topic"] == topic.encode() and got["roost.dlt.origin.partition"] == b"0"
        assert got["roost.dlt.group"] == group.encode() and got["roost.dlt.reason"] == reason
        count = int(got["roost.dlt.delivery.count"])
        assert count == 5 if offset == 2 else 1 <= count <= deliveries[offset], (offset, count)
        assert message.key() == f"k{offset}".encode() and message.value() == f"v{offset}".encode()
    assert read_topic(broker, dlt, 3, timeout=1)[2:] == [], "nothing else, the accepted record least of all"

    # Replayed: a dry run lists them and sends nothing; the replay sends each back to its origin
    # partition with its own key, value and headers; a second replay has nothing left.
    bootstrap = broker.address("kafka")
    code, out, err = roost(capsys, "share-group", "replay", "--group", group, "--dry-run", "-b", bootstrap,
                           "--format", "json")
    assert code == 0, err
    assert [(r["origin"], r["reason"], r["to"]) for r in json.loads(out)] == [
        (f"{topic}-0@1", "rejected", f"{topic}-0"), (f"{topic}-0@2", "delivery_limit", f"{topic}-0")]
    assert read_topic(broker, topic, 4, timeout=1, start=3) == [], "a dry run produced"
    code, out, err = roost(capsys, "share-group", "replay", "--group", group, "-b", bootstrap, "--format", "json")
    assert code == 0 and len(json.loads(out)) == 2, err
    back = read_topic(broker, topic, 2, start=3)
    assert [(m.partition(), m.key(), m.value(), m.headers()) for m in back] == [
        (0, b"k1", b"v1", [("trace", b"t1")]), (0, b"k2", b"v2", [("trace", b"t2")])]
    code, out, err = roost(capsys, "share-group", "replay", "--group", group, "-b", bootstrap, "--format", "json")
    assert code == 0 and json.loads(out) == [], "replayed twice"
    code, _, err = roost(capsys, "share-group", "replay", "--group", f"none-{group}", "-b", bootstrap)
    assert code != 0 and "has no dead-letter topic" in err, err


def test_deleting_a_share_group_deletes_its_share_state(broker: RoostProcess,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    """DeleteGroups (confluent-kafka's AdminClient) of a share group, as Kafka 4.2: refused with
    NON_EMPTY_GROUP while it has a member; once empty, its share-partitions' state leaves the share
    coordinator with it, so a new group of that name starts afresh from its
    `share.auto.offset.reset` (group configs outlive the group, as in Kafka)."""
    topic, group = "admin-delete", f"delete-{uuid.uuid4().hex[:8]}"
    bootstrap = broker.address("kafka")
    make_topic(broker, topic, 6)
    read_from_earliest(broker.address("kafka"), group)
    got, _ = consume(broker, group, topic, 6)
    assert len(got) == 6
    deadline = time.monotonic() + 20
    while start_offset(broker, group, topic) != (6, 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert start_offset(broker, group, topic) == (6, 0)

    admin = AdminClient({"bootstrap.servers": bootstrap})
    holder = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group})
    holder.subscribe([topic])
    try:
        refused: KafkaException | None = None
        deadline = time.monotonic() + 20
        while refused is None and time.monotonic() < deadline:  # until its join has landed
            holder.poll(0.2)
            try:
                admin.delete_consumer_groups([group])[group].result(30)
                raise AssertionError("a share group with a member was deleted")
            except KafkaException as error:
                refused = error
        assert refused is not None and refused.args[0].name() == "NON_EMPTY_GROUP", refused
    finally:
        holder.close()
    assert start_offset(broker, group, topic)[0] == 6  # the refusal deleted nothing

    deadline = time.monotonic() + 20
    while True:  # the holder's leave may still be on its way
        try:
            admin.delete_consumer_groups([group])[group].result(30)
            break
        except KafkaException as error:
            assert error.args[0].name() == "NON_EMPTY_GROUP" and time.monotonic() < deadline, error
            time.sleep(0.2)
    raw = coordinator(broker, group)
    (state,) = [p for t in describe(raw, group, [{"topic_name": topic, "partitions": [0]}])["topics"]
                for p in t["partitions"]]
    assert (state["error_code"], state["start_offset"]) == (NONE, -1)  # no state left in the share coordinator

    # A new group of the same name: every record again, each a first delivery.
    again, _ = consume(broker, group, topic, 6)
    assert sorted(m.offset() for m in again) == list(range(6))
    assert {m.delivery_count() for m in again} == {1}

    # `roost share-group delete` (kafka-share-groups.sh --delete) takes the same path.
    code, _, err = roost(capsys, "share-group", "delete", group, "-b", bootstrap)
    assert code == 0, err
    (state,) = [p for t in describe(raw, group, [{"topic_name": topic, "partitions": [0]}])["topics"]
                for p in t["partitions"]]
    assert state["start_offset"] == -1
    raw.close()
