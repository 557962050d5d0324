"""Two real Roost clusters (a keeper and two brokers each) and a cluster link between them, driven
by `roost link`: acks=all idempotent and transactional producers write to the source; the
destination's mirror holds the source's batches byte for byte at the same offsets (read raw with
Roost's wire client), read_committed reads the same on both sides, a mirror refuses produces, a
consumer group's offsets are synced, and after promotion the destination takes writes and the
group resumes there from the synced offsets."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.link.raw import batches, epoch_end, leader_epoch, produce_raw
from tests.support.cluster import LocalCluster
from tests.support.faultproxy import ThreadedFaultProxy
from tests.support.procs import retry, wait_for

pytestmark = pytest.mark.timeout(300)

TOPIC = "orders"
LINK = "eu"


def roost(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "roost.cli.main", *args], capture_output=True, text=True,
                          timeout=60, check=False)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, LocalCluster]]:
    root = tmp_path_factory.mktemp("link")
    source = LocalCluster.start(root / "source", brokers=2)
    try:
        # A frozen broker (the failback test's follower) keeps its session and its ISR place for
        # the seconds it is frozen, and leaders stay where the test put them.
        destination = LocalCluster.start(root / "destination", brokers=2, settings={
            "zookeeper.session.timeout.ms": 10_000, "replica.lag.time.max.ms": 30_000,
            "auto.leader.rebalance.enable": False})
    except BaseException:
        source.close()
        raise
    try:
        yield source, destination
    finally:
        destination.close()
        source.close()


def produce_source(source: LocalCluster) -> None:
    admin = source.admin()
    futures = admin.create_topics([NewTopic(TOPIC, 2, 2, config={"retention.ms": "86400000"})])
    futures[TOPIC].result(30)
    source.wait_for_isr(TOPIC)
    producer = Producer({"bootstrap.servers": source.bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 5})
    for i in range(300):
        producer.produce(TOPIC, key=f"k{i % 7}".encode(), value=f"plain-{i}".encode(), partition=i % 2,
                         headers=[("h", str(i).encode())])
    assert producer.flush(30) == 0
    txn = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": "t-link", "acks": "all"})
    txn.init_transactions(30)
    for commit in (True, False, True):
        txn.begin_transaction()
        for i in range(20):
            txn.produce(TOPIC, value=f"txn-{commit}-{i}".encode(), partition=i % 2)
        if commit:
            txn.commit_transaction(30)
        else:
            txn.abort_transaction(30)
    # A group on the source that read part of the topic.
    consumer = Consumer({"bootstrap.servers": source.bootstrap, "group.id": "billing",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 100 and time.monotonic() < deadline:
        if (message := consumer.poll(0.5)) is not None and message.error() is None:
            seen += 1
    consumer.commit(asynchronous=False)
    consumer.close()


def read_committed(bootstrap: str) -> list[tuple[int, int, bytes | None]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(TOPIC, 0, 0), TopicPartition(TOPIC, 1, 0)])
    found, ended = [], set()
    deadline = time.monotonic() + 60
    while len(ended) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            if message.error().code() == KafkaError._PARTITION_EOF:
                ended.add(message.partition())
            continue
        found.append((message.partition(), message.offset(), message.value()))
    consumer.close()
    assert len(ended) == 2, "both partitions read to their end"
    return sorted(found)


def committed(bootstrap: str, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    found = consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=15)
    consumer.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def link_status(destination: LocalCluster) -> dict[str, object]:
    out = roost("link", "describe", LINK, "--zookeeper", destination.zookeeper, "--format", "json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_mirror_same_batches_offsets_groups_then_promote(clusters: tuple[LocalCluster, LocalCluster]) -> None:
    try:
        mirror_then_promote(*clusters)
    except BaseException:  # what the brokers said explains a failure
        for name, cluster in zip(("source", "destination"), clusters, strict=True):
            for broker_id in cluster.brokers:
                Path(f"/tmp/links-{name}-{broker_id}.log").write_text(cluster.broker_output(broker_id))
                tail = "".join(cluster.broker_output(broker_id).splitlines(keepends=True)[-30:])
                print(f"--- {name} broker {broker_id} ---\n{tail}")
        raise


def mirror_then_promote(source: LocalCluster, destination: LocalCluster) -> None:
    produce_source(source)
    out = roost("link", "create", LINK, "--zookeeper", destination.zookeeper, "--source-bootstrap", source.bootstrap,
                "-c", "topics=literal:orders", "-c", "consumer.offset.sync.ms=1000", "-c", "metadata.max.age.ms=1000")
    assert out.returncode == 0, out.stderr
    assert "exists" in roost("link", "create", LINK, "--zookeeper", destination.zookeeper, "--source-bootstrap",
                             source.bootstrap).stderr

    source_batches = {p: batches(source.bootstrap, TOPIC, p) for p in (0, 1)}
    assert all(source_batches.values())

    def mirrored() -> bool:
        try:
            return all(batches(destination.bootstrap, TOPIC, p) == source_batches[p] for p in (0, 1))
        except Exception:
            return False
    wait_for(mirrored, 90, interval=0.5, what="the mirror to hold the source's batches byte for byte")
    # Control batches (commit and abort markers) came too, at their offsets.
    assert any(b[22] & 0x20 for b in source_batches[0]), "the source has control batches"
    assert read_committed(destination.bootstrap) == read_committed(source.bootstrap)
    assert not any(b"txn-False" in (v or b"") for _, _, v in read_committed(destination.bootstrap))

    # The mirror is read-only: a produce to it is refused with INVALID_REQUEST (42).
    assert produce_raw(destination.bootstrap, TOPIC, 0, source_batches[0][0]) == 42

    # The group's offsets came across (it is not active on the destination), same numbers.
    wanted = committed(source.bootstrap, "billing")
    assert sum(wanted.values()) == 100
    wait_for(lambda: committed(destination.bootstrap, "billing") == wanted, 60, interval=0.5,
             what="the group's offsets synced to the destination")

    status = link_status(destination)
    assert status["state"] == "ACTIVE"
    assert {(p["topic"], p["partition"]) for p in status["partitions"]} == {(TOPIC, 0), (TOPIC, 1)}
    wait_for(lambda: all(p["lag_records"] == 0 for p in link_status(destination)["partitions"]), 30,
             what="lag 0 once caught up")

    out = roost("link", "promote", LINK, "--topic", TOPIC, "-b", destination.bootstrap, "--zookeeper", destination.zookeeper)
    assert out.returncode == 0, out.stderr
    assert "orders" in out.stdout

    # Promoted: writable, offsets continue where the mirror ended; nothing mirrored after.
    ends = {p: int.from_bytes(source_batches[p][-1][:8], "big") + int.from_bytes(source_batches[p][-1][23:27], "big")
            + 1 for p in (0, 1)}
    producer = Producer({"bootstrap.servers": destination.bootstrap, "acks": "all", "enable.idempotence": True})
    delivered: list[tuple[int, int]] = []

    def report(error: object, message: object) -> None:
        if error is None:
            delivered.append((message.partition(), message.offset()))  # type: ignore[attr-defined]

    def produce_until_accepted() -> bool:
        producer.produce(TOPIC, value=b"after-promotion", partition=0, on_delivery=report)
        producer.flush(10)
        return bool(delivered)
    wait_for(produce_until_accepted, 30, interval=0.5, what="a produce accepted on the promoted topic")
    assert delivered[0] == (0, ends[0])
    # A write on the old source (a split brain: it was cut off, not gone) no longer reaches the
    # promoted topic; it is the divergent suffix a failback must cut.
    late = Producer({"bootstrap.servers": source.bootstrap, "acks": "all"})
    late.produce(TOPIC, value=b"late", partition=1)
    assert late.flush(30) == 0

    # The group resumes on the destination from its synced offsets.
    consumer = Consumer({"bootstrap.servers": destination.bootstrap, "group.id": "billing",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([TOPIC])
    first: dict[int, int] = {}
    deadline = time.monotonic() + 60
    while len(first) < 2 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            first.setdefault(message.partition(), message.offset())
    consumer.close()
    for partition, offset in first.items():
        assert offset >= wanted.get(partition, 0), "resumed at or after the synced offset"
    assert len(batches(destination.bootstrap, TOPIC, 1)) == len(source_batches[1])
    failback(source, destination, ends)


def failback(source: LocalCluster, destination: LocalCluster, ends: dict[int, int]) -> None:
    """`roost link failback`, one command: the old source mirrors the promoted side, truncating
    what it took after the promotion point (leader-epoch rules), catches up, is promoted again,
    and the destination mirrors it again: the original roles, offsets kept."""
    assert len(batches(source.bootstrap, TOPIC, 1)) == len(batches(destination.bootstrap, TOPIC, 1)) + 1
    # The old source returns: its brokers restart, and their elections begin leader epochs at each
    # log end that nothing is written in; restarted until these are numbered above the
    # destination's promotion epoch (what makes an empty epoch kept by a mirror hide it).
    promoted_epoch = int.from_bytes(batches(destination.bootstrap, TOPIC, 0)[-1][12:16], "big")
    for _ in range(4):
        if leader_epoch(source.bootstrap, TOPIC, 0) > promoted_epoch:
            break
        for broker_id in source.brokers:
            source.kill(broker_id)
        for broker_id in source.brokers:
            source.start_broker(broker_id, wait=False)
        for broker_id in source.brokers:
            source._await_broker(broker_id)
        source.wait_for_brokers(set(source.brokers))
        # Leaders settled on their preferred replicas: a later election (on a mirror, which
        # begins no epoch of its own) would hide what this test is about.
        source.wait_for_isr(TOPIC, preferred=True)
    # The old source reaches the destination another way than this command does (a gateway
    # between regions): the reverse link bootstraps through a proxy, which must see it connect.
    first_broker = destination.bootstrap.split(",")[0]
    host, port = first_broker.rsplit(":", 1)
    with ThreadedFaultProxy((host, int(port))) as gateway:
        gateway_address = f"{gateway.address[0]}:{gateway.address[1]}"
        failback_command = ["link", "failback", LINK, "--topic", TOPIC, "--source-zookeeper", source.zookeeper,
                            "-b", destination.bootstrap, "--zookeeper", destination.zookeeper,
                            "--reverse-bootstrap", gateway_address, "--catch-up-timeout", "45",
                            "-c", "metadata.max.age.ms=1000", "-c", "consumer.offset.sync.enable=false"]
        out = roost(*failback_command, "--reverse-only")
        assert out.returncode == 0, out.stdout + out.stderr
        reverse = roost("link", "describe", f"{LINK}-reverse", "--zookeeper", source.zookeeper,
                        "-b", source.bootstrap, "--format", "json")
        described = json.loads(reverse.stdout)
        assert described["settings"]["bootstrap.servers"] == gateway_address, reverse.stdout
        # The old source leads its two partitions as mirrors of the reverse link (read-only there).
        assert {(p["topic"], p["partition"]) for p in described["leading"]} == {(TOPIC, 0), (TOPIC, 1)}, reverse.stdout
        assert gateway.proxy.connections >= 1, "the reverse link never bootstrapped through --reverse-bootstrap"
        # The cut is reported: partition 1 from after "late" back to the promotion point.
        assert f"{ends[1] + 1} -> {ends[1]}" in out.stdout, out.stdout
        assert "roles reversed" in out.stdout
        # The old source, mirroring the destination, has the destination's epochs as its batches
        # carry them: asked where the destination's promotion epoch ends, it names its own end
        # (kept, an empty epoch of its restart would hide that epoch, and its followers and later
        # the destination would be sent back to the promotion point).
        wait_for(lambda: epoch_end(source.bootstrap, TOPIC, 0, promoted_epoch)
                 == (promoted_epoch, log_end(batches(destination.bootstrap, TOPIC, 0))), 30, interval=0.5,
                 what="the old source to hold the destination's promotion epoch to its end")
        in_flight = switch_back_with_a_record_in_flight(destination, failback_command)
        logs = {p: batches(source.bootstrap, TOPIC, p) for p in (0, 1)}
        assert logs == {p: batches(destination.bootstrap, TOPIC, p) for p in (0, 1)}
        assert in_flight in records_of(logs[0]), "the record acknowledged after the switch began was handed over"
        assert not any(b"late" in b for b in logs[1]), "the divergent suffix was cut"
        assert any(b"after-promotion" in b for b in logs[0])
        # The original roles: the destination is a mirror again (refuses produces), the old source
        # takes writes in a later epoch and they are mirrored to the destination at the same offsets.
        assert produce_raw(destination.bootstrap, TOPIC, 0, logs[0][0]) == 42
        producer = Producer({"bootstrap.servers": source.bootstrap, "acks": "all", "enable.idempotence": True})
        producer.produce(TOPIC, value=b"after-failback", partition=0)
        assert producer.flush(30) == 0

        def mirrored_again() -> bool:
            try:
                return batches(destination.bootstrap, TOPIC, 0) == batches(source.bootstrap, TOPIC, 0) != logs[0]
            except Exception:
                return False
        wait_for(mirrored_again, 60, interval=0.5, what="the destination to mirror the old source again")


def switch_back_with_a_record_in_flight(destination: LocalCluster, failback_command: list[str]) -> tuple[int, bytes]:
    """The switch-back (`roost link failback` without --reverse-only) while the destination holds
    a record it has appended and not yet acknowledged: its leader of partition 0 takes it with
    its only follower frozen (SIGSTOP), and acknowledges it when the follower is thawed, seconds
    after the command has made the topic read-only. The command must wait for it and hand it over
    (a high watermark read while the follower is frozen ends below it). Returns (offset, value)."""
    leader, follower = lead_alone(destination)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{destination.brokers[leader].advertised_port}",
                         "acks": "all", "message.timeout.ms": 120_000})
    producer.produce(TOPIC, value=b"warm-up", partition=0)  # connected before the follower freezes
    assert producer.flush(30) == 0
    delivered: list[tuple[object, int, bytes]] = []

    def report(error: object, message: object) -> None:
        delivered.append((error, message.offset(), message.value()))  # type: ignore[attr-defined]
    frozen = destination.brokers[follower].process
    assert frozen is not None
    frozen.popen.send_signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        producer.produce(TOPIC, value=b"in-flight", partition=0, on_delivery=report)
        producer.poll(0.5)
        assert not delivered, "not acknowledged while its follower is frozen"
        command = subprocess.Popen([sys.executable, "-m", "roost.cli.main", *failback_command],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        output: list[str] = []
        reader = threading.Thread(target=lambda: output.extend(command.stdout or []), daemon=True)
        reader.start()
        # Frozen on until the command has made the topic read-only and had time to read the ends
        # (a status round is 2 s), within the frozen broker's 10 s session.
        wait_for(lambda: any("read-only here" in line for line in output) or time.monotonic() - frozen_at > 5.5,
                 10, interval=0.05, what="the switch to begin")
        time.sleep(max(0.0, min(3.5, 7.5 - (time.monotonic() - frozen_at))))
    finally:
        frozen.popen.send_signal(signal.SIGCONT)
    try:
        command.wait(120)
    finally:
        command.kill()
    reader.join(5)
    text = "".join(output)
    assert command.returncode == 0, text
    assert "failed back" in text
    assert producer.flush(30) == 0
    assert len(delivered) == 1 and delivered[0][0] is None, delivered
    destination.wait_for_isr(TOPIC)
    return delivered[0][1], delivered[0][2]


def lead_alone(destination: LocalCluster) -> tuple[int, int]:
    """Make one broker lead both partitions of the topic (its other broker shut down and back,
    with automatic leader rebalancing off), so that freezing the other stalls replication
    without leaving a partition leaderless. Returns (leader, follower)."""
    leaders = {leader for leader, _, _ in destination.partitions(TOPIC).values()}
    if len(leaders) == 1:
        (leader,) = leaders
        return leader, next(b for b in destination.brokers if b != leader)
    leader, follower = sorted(destination.brokers)
    assert destination.stop_broker(follower) == 0
    wait_for(lambda: {lead for lead, _, _ in destination.partitions(TOPIC).values()} == {leader}, 30,
             interval=0.2, what=f"broker {leader} to lead every partition")
    destination.start_broker(follower)
    destination.wait_for_isr(TOPIC)
    return leader, follower


def records_of(log: list[bytes]) -> set[tuple[int, bytes]]:
    """(offset, value) of every record in the partition's batches (uncompressed, as a test's
    producers write them)."""
    from roost.wire.kafka.records import iter_records

    return {(record.offset, record.value or b"") for record in iter_records(b"".join(log), include_control=False)}


def topic_id_config(cluster: LocalCluster, topic: str) -> str:
    from confluent_kafka.admin import ConfigResource

    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    admin = cluster.admin()
    configs = admin.describe_configs([resource])[resource].result(30)
    entry = configs.get("roost.mirror.source.topic.id")
    return entry.value if entry is not None and entry.value else ""


def source_topic_id(cluster: LocalCluster, topic: str) -> str:
    from confluent_kafka import TopicCollection

    admin = cluster.admin()
    described = admin.describe_topics(TopicCollection([topic]))[topic].result(30)
    # confluent-kafka writes a Uuid in standard base64 ('+', '/'); Kafka (kafka-topics --describe)
    # and the mirror's roost.mirror.source.topic.id in base64url ('-', '_'): about one id in two
    # has one of those characters.
    return str(described.topic_id).replace("+", "-").replace("/", "_")


def test_a_recreated_source_topic_stops_its_mirror(clusters: tuple[LocalCluster, LocalCluster]) -> None:
    """The source topic deleted and recreated under its name (a new topic id): the mirror stops
    with the reason named (state FAILED) and keeps the first topic's records, never mixing the
    second topic's offsets into them."""
    source, destination = clusters
    topic, link = "recreated", "re"
    admin = source.admin()
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": source.bootstrap, "acks": "all"})
    for i in range(40):
        producer.produce(topic, value=f"first-{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    out = roost("link", "create", link, "--zookeeper", destination.zookeeper, "--source-bootstrap", source.bootstrap,
                "-c", f"topics=literal:{topic}", "-c", "metadata.max.age.ms=500",
                "-c", "consumer.offset.sync.enable=false")
    assert out.returncode == 0, out.stderr
    first = batches(source.bootstrap, topic, 0)

    def mirrored() -> bool:
        try:
            return batches(destination.bootstrap, topic, 0) == first
        except Exception:
            return False
    wait_for(mirrored, 60, interval=0.5, what="the mirror of the first topic")
    recorded = wait_for(lambda: topic_id_config(destination, topic), 30, interval=0.5,
                        what="the mirror recording its source topic's id")
    assert recorded == source_topic_id(source, topic)

    admin.delete_topics([topic])[topic].result(30)
    wait_for(lambda: topic not in admin.list_topics(timeout=10).topics, 30, interval=0.3, what="the topic deleted")
    # A deletion finishes on the brokers after the topic leaves Metadata: create until it is taken.
    retry(lambda: admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30), retry_on=(KafkaException,),
          attempts=60, interval=0.5, what="creating the topic again")
    # A new producer for the new topic: librdkafka's cached leader epoch of the deleted topic is
    # higher than the new topic's, and metadata it takes for older may hold the old one's sends.
    producer = Producer({"bootstrap.servers": source.bootstrap, "acks": "all"})
    for i in range(60):
        producer.produce(topic, value=f"second-{i}".encode(), partition=0)
    assert producer.flush(30) == 0

    last: list[object] = []

    def failed() -> dict[str, object] | None:
        out = roost("link", "describe", link, "--zookeeper", destination.zookeeper, "--format", "json")
        status = json.loads(out.stdout) if out.returncode == 0 else {}
        last[:] = [status]
        errors = [p["error"] for p in status.get("partitions", []) if p["error"]]
        return status if status.get("state") == "FAILED" and any("recreated" in e for e in errors) else None
    try:
        wait_for(failed, 60, interval=0.5, what="the link to report the recreated source topic")
    except AssertionError as timeout:
        raise AssertionError(f"{timeout}; last status {last}") from None
    assert source_topic_id(source, topic) != recorded
    assert batches(destination.bootstrap, topic, 0) == first, "the first topic's records, nothing of the second"
    assert roost("link", "delete", link, "--zookeeper", destination.zookeeper).returncode == 0



def read_committed_to_end(bootstrap: str, topic: str, partitions: int) -> tuple[list[bytes], dict[int, int]]:
    """Every value a read_committed consumer gets from the start, and where each partition
    ended for it (librdkafka's end of partition under read_committed is the last stable offset)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": True, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values, ends = [], {}
    deadline = time.monotonic() + 60
    while len(ends) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            if message.error().code() == KafkaError._PARTITION_EOF:
                ends[message.partition()] = message.offset()
            continue
        values.append(message.value() or b"")
    consumer.close()
    assert len(ends) == partitions, "every partition read to its end"
    return values, ends


def log_end(raw: list[bytes]) -> int:
    """The offset after the last of a partition's batches (its high watermark)."""
    last = raw[-1]
    return int.from_bytes(last[:8], "big") + int.from_bytes(last[23:27], "big") + 1


def test_an_open_transaction_at_the_source_loss_is_aborted_by_failover(
        clusters: tuple[LocalCluster, LocalCluster]) -> None:
    """The source region is lost while a producer's transaction is open: its records are on the
    mirror, its marker never comes. `roost link failover` aborts it on the promoted topic, so a
    read_committed consumer reads everything committed, before and after that transaction's
    first record, to the end of the log (not stuck at its first record), and none of its records."""
    source, destination = clusters
    topic, link = "payments", "lost"
    admin = source.admin()
    admin.create_topics([NewTopic(topic, 2, 2)])[topic].result(30)
    source.wait_for_isr(topic)
    plain = Producer({"bootstrap.servers": source.bootstrap, "acks": "all", "enable.idempotence": True})
    txn = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": "t-lost", "acks": "all"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(10):
        txn.produce(topic, value=f"committed-{i}".encode(), partition=i % 2)
    txn.commit_transaction(30)
    for i in range(6):
        plain.produce(topic, value=f"before-{i}".encode(), partition=i % 2)
    assert plain.flush(30) == 0
    txn.begin_transaction()
    for i in range(8):
        txn.produce(topic, value=f"open-{i}".encode(), partition=i % 2)
    assert txn.flush(30) == 0  # on the source's log, the transaction still open
    for i in range(6):
        plain.produce(topic, value=f"after-{i}".encode(), partition=i % 2)
    assert plain.flush(30) == 0
    out = roost("link", "create", link, "--zookeeper", destination.zookeeper, "--source-bootstrap", source.bootstrap,
                "-c", f"topics=literal:{topic}", "-c", "metadata.max.age.ms=1000",
                "-c", "consumer.offset.sync.enable=false")
    assert out.returncode == 0, out.stderr
    try:
        source_logs = {p: batches(source.bootstrap, topic, p) for p in (0, 1)}

        def mirrored() -> bool:
            try:
                return all(batches(destination.bootstrap, topic, p) == source_logs[p] for p in (0, 1))
            except Exception:
                return False
        wait_for(mirrored, 60, interval=0.5, what="the mirror to hold the source's batches, the open transaction's too")

        def open_on_mirror() -> bool:
            out = roost("link", "describe", link, "--zookeeper", destination.zookeeper, "--format", "json")
            parts = json.loads(out.stdout).get("partitions", []) if out.returncode == 0 else []
            return len(parts) == 2 and all(p["open_transactions"] == 1 for p in parts)
        wait_for(open_on_mirror, 30, interval=0.5, what="the link to report one open transaction per partition")
        # Before promotion the mirror is as the source: read_committed stops at the open transaction.
        values, _ = read_committed_to_end(destination.bootstrap, topic, 2)
        assert not any(v.startswith(b"after-") for v in values)

        for broker_id in source.brokers:  # the source region is lost
            source.kill(broker_id)
        out = roost("link", "failover", link, "--topic", topic, "-b", destination.bootstrap,
                    "--zookeeper", destination.zookeeper)
        assert out.returncode == 0, out.stdout + out.stderr
        # topic, lag at promotion 0 (all was mirrored; ">= 0 (source not answering)" once the link
        # noticed the loss), its age, 2 partitions, 2 transactions aborted
        assert re.search(rf"^{topic}\s+(>= )?0\s.*\s2\s+2\s*$", out.stdout, re.M), out.stdout

        expected = sorted([f"committed-{i}" for i in range(10)] + [f"before-{i}" for i in range(6)]
                          + [f"after-{i}" for i in range(6)])
        ends: dict[int, int] = {}

        def all_committed() -> bool:
            values, found = read_committed_to_end(destination.bootstrap, topic, 2)
            ends.update(found)
            return sorted(v.decode() for v in values) == expected
        wait_for(all_committed, 60, interval=1.0, what="read_committed to read every committed record, no open one")
        promoted = {p: batches(destination.bootstrap, topic, p) for p in (0, 1)}
        for p in (0, 1):
            assert promoted[p][:len(source_logs[p])] == source_logs[p], "the mirrored records stay, offsets kept"
            assert len(promoted[p]) == len(source_logs[p]) + 1, "one abort marker per partition"
            assert promoted[p][-1][22] & 0x30 == 0x30, "a transactional control batch"
            assert ends[p] == log_end(promoted[p]), "read_committed reaches the end of the log"
            assert any(b"open-" in b for b in promoted[p]), "the aborted records are still there, hidden"
        # The promoted topic goes on: a new record is read under read_committed after all that.
        fresh = Producer({"bootstrap.servers": destination.bootstrap, "acks": "all", "enable.idempotence": True})
        fresh.produce(topic, value=b"after-failover", partition=0)
        assert fresh.flush(30) == 0
        values, _ = read_committed_to_end(destination.bootstrap, topic, 2)
        assert b"after-failover" in values and not any(v.startswith(b"open-") for v in values)
    finally:
        del txn  # its transaction stays open on the source (its coordinator times it out later)
        roost("link", "delete", link, "--zookeeper", destination.zookeeper)
        for broker_id in source.brokers:  # the source comes back for the module's other tests
            if not source.brokers[broker_id].running:
                source.start_broker(broker_id, wait=False)
        for broker_id in source.brokers:
            source._await_broker(broker_id)
        source.wait_for_brokers(set(source.brokers))


def test_a_planned_promotion_waits_for_the_source_transactions_to_end(
        clusters: tuple[LocalCluster, LocalCluster]) -> None:
    """`roost link promote` with the source alive and a transaction open there: it waits (within
    --timeout) until the transaction's marker is mirrored, so a transaction its producer commits
    during the cutover stays committed on the promoted topic, not aborted."""
    source, destination = clusters
    topic, link = "refunds", "planned"
    admin = source.admin()
    admin.create_topics([NewTopic(topic, 1, 2)])[topic].result(30)
    source.wait_for_isr(topic)
    txn = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": "t-planned", "acks": "all"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(5):
        txn.produce(topic, value=f"refund-{i}".encode(), partition=0)
    assert txn.flush(30) == 0
    out = roost("link", "create", link, "--zookeeper", destination.zookeeper, "--source-bootstrap", source.bootstrap,
                "-c", f"topics=literal:{topic}", "-c", "metadata.max.age.ms=1000",
                "-c", "consumer.offset.sync.enable=false")
    assert out.returncode == 0, out.stderr
    try:
        def open_on_mirror() -> bool:
            out = roost("link", "describe", link, "--zookeeper", destination.zookeeper, "--format", "json")
            parts = json.loads(out.stdout).get("partitions", []) if out.returncode == 0 else []
            return len(parts) == 1 and parts[0]["open_transactions"] == 1 and parts[0]["lag_records"] == 0
        wait_for(open_on_mirror, 60, interval=0.5, what="the mirror holding the open transaction, lag 0")
        promote = subprocess.Popen(
            [sys.executable, "-m", "roost.cli.main", "link", "promote", link, "--topic", topic,
             "-b", destination.bootstrap, "--zookeeper", destination.zookeeper, "--timeout", "60"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            time.sleep(3.0)
            assert promote.poll() is None, "promote waits while a source transaction is open on the mirror"
            txn.commit_transaction(30)
            stdout, stderr = promote.communicate(timeout=90)
        finally:
            if promote.poll() is None:
                promote.kill()
                promote.communicate()
        assert promote.returncode == 0, stdout + stderr
        assert re.search(rf"^{topic}\s+0\s.*\s1\s+0\s*$", stdout, re.M), stdout  # nothing aborted
        values: list[bytes] = []

        def committed_there() -> bool:
            values[:] = read_committed_to_end(destination.bootstrap, topic, 1)[0]
            return len(values) == 5
        wait_for(committed_there, 30, interval=0.5, what="the committed transaction readable on the promoted topic")
        assert sorted(values) == [f"refund-{i}".encode() for i in range(5)]
    finally:
        roost("link", "delete", link, "--zookeeper", destination.zookeeper)
