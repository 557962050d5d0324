"""The share coordinator on a three-broker cluster, through its state RPCs (Roost's client side
of wire/kafka, as a share-partition leader sends them): `__share_group_state` is created on first
use with Kafka's settings, a state write is answered only once it is on the in-sync replicas, and
after kill -9 of the coordinator's broker the broker that takes the state partition over answers
the same state (COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR meanwhile); the new leader's read
with a higher leader epoch fences the old leader's writes (FENCED_LEADER_EPOCH)."""

from __future__ import annotations

import importlib.util
import signal
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import ConfigResource, NewTopic

from roost.broker.share.coordinator_records import SHARE_GROUP_STATE_TOPIC, ShareKey, share_partition_for
from roost.wire.kafka import ApiKey
from roost.wire.kafka.errors import ErrorCode
from tests.support.cluster import LocalCluster
from tests.support.kafka_wire import WireClient
from tests.support.procs import wait_for
from tests.support.share_configs import read_from_earliest

STATE_PARTITIONS = 3
WRITE_TIMEOUT_MS = 1000
TOPIC = "sc-work"
RETRIABLE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.COORDINATOR_NOT_AVAILABLE}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    started = LocalCluster.start(tmp_path_factory.mktemp("share-coordinator"), brokers=3, keepers=1, settings={
        "share.coordinator.state.topic.num.partitions": STATE_PARTITIONS,
        # short, so that a write whose followers are frozen times out before their ZooKeeper
        # sessions would (2 s); the RPCs below are retried as the persister retries them
        "share.coordinator.write.timeout.ms": WRITE_TIMEOUT_MS})
    try:
        admin = started.admin()  # kept: the futures need their client alive
        admin.create_topics([NewTopic(TOPIC, 2, 3)])[TOPIC].result(30)
        started.wait_for_isr(TOPIC)
        yield started
    finally:
        started.close()


def topic_id(cluster: LocalCluster, name: str) -> uuid.UUID:
    client = WireClient(cluster.running_bootstrap().split(",")[0])
    try:
        answer = client.request(ApiKey.METADATA, 12, {"topics": [{"name": name, "topic_id": uuid.UUID(int=0)}],
                                                      "allow_auto_topic_creation": False,
                                                      "include_topic_authorized_operations": False})
        return answer["topics"][0]["topic_id"]
    finally:
        client.sock.close()


def state_rpc(cluster: LocalCluster, key: ShareKey, api: ApiKey, version: int, fields: dict[str, Any],
              timeout: float = 60.0) -> dict[str, Any]:
    """Send one partition's state RPC to its coordinator (the leader of its state partition),
    retried as the persister does while the coordinator moves or loads."""
    deadline = time.monotonic() + timeout
    index = share_partition_for(key, STATE_PARTITIONS)
    body = {"group_id": key.group_id, "topics": [{"topic_id": key.topic_id, "partitions": [
        {"partition": key.partition, **fields}]}]}
    last: Any = None
    while time.monotonic() < deadline:
        leader = cluster.partitions(SHARE_GROUP_STATE_TOPIC).get(index, (-1,))[0]
        address = cluster.brokers[leader].address if leader in cluster.brokers and cluster.brokers[leader].running \
            else cluster.running_bootstrap().split(",")[0]
        try:
            client = WireClient(address, timeout=15)
            try:
                answer = client.request(api, version, body)["results"][0]["partitions"][0]
            finally:
                client.sock.close()
        except OSError as error:
            last = error
            time.sleep(0.2)
            continue
        last = answer
        if ErrorCode(answer["error_code"]) not in RETRIABLE:
            return answer
        time.sleep(0.2)
    raise AssertionError(f"no answer from the share coordinator of {key}: {last}")


def batch(first: int, last: int, state: int, count: int) -> dict[str, int]:
    return {"first_offset": first, "last_offset": last, "delivery_state": state, "delivery_count": count}


def test_state_survives_kill_of_the_coordinator_and_the_old_leader_is_fenced(cluster: LocalCluster) -> None:
    key = ShareKey("sc-group", topic_id(cluster, TOPIC), 1)
    init = state_rpc(cluster, key, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0, {"state_epoch": 1, "start_offset": 0})
    assert init["error_code"] == 0, init
    # Kafka's topic settings, capped at the cluster: 3 replicas, min.isr 2, cleanup.policy delete
    cluster.wait_for_isr(SHARE_GROUP_STATE_TOPIC)
    admin = cluster.admin()
    configs = admin.describe_configs([ConfigResource("topic", SHARE_GROUP_STATE_TOPIC)])
    described = next(iter(configs.values())).result(30)
    assert described["cleanup.policy"].value == "delete"
    assert described["min.insync.replicas"].value == "2"
    assert all(len(replicas) == 3 for _leader, replicas, _isr in cluster.partitions(SHARE_GROUP_STATE_TOPIC).values())

    read = state_rpc(cluster, key, ApiKey.READ_SHARE_GROUP_STATE, 0, {"leader_epoch": 0})
    assert (read["error_code"], read["state_epoch"], read["start_offset"], read["state_batches"]) == (0, 1, 0, [])
    # an uninitialized share-partition cannot be read, an unknown topic is refused
    other = ShareKey("sc-group", key.topic_id, 0)
    assert state_rpc(cluster, other, ApiKey.READ_SHARE_GROUP_STATE, 0, {"leader_epoch": 0})["error_code"] == \
        ErrorCode.INVALID_REQUEST
    ghost = ShareKey("sc-group", uuid.uuid4(), 0)
    assert state_rpc(cluster, ghost, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
                     {"state_epoch": 0, "start_offset": 0})["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    # a leader in epoch 0 writes acknowledgements: 0-9 accepted, 10 archived, 11-12 released
    written = state_rpc(cluster, key, ApiKey.WRITE_SHARE_GROUP_STATE, 1, {
        "state_epoch": 1, "leader_epoch": 0, "start_offset": 10, "delivery_complete_count": 1,
        "state_batches": [batch(10, 10, 4, 5), batch(11, 12, 0, 2)]})
    assert written["error_code"] == 0, written

    index = share_partition_for(key, STATE_PARTITIONS)
    coordinator = cluster.partitions(SHARE_GROUP_STATE_TOPIC)[index][0]
    cluster.kill(coordinator)
    try:
        wait_for(lambda: cluster.partitions(SHARE_GROUP_STATE_TOPIC).get(index, (-1,))[0] not in (-1, coordinator),
                 60, what="a new share coordinator")
        # the data partition's new leader reads with its epoch: the state the old coordinator answered
        read = state_rpc(cluster, key, ApiKey.READ_SHARE_GROUP_STATE, 0, {"leader_epoch": 1})
        assert read["error_code"] == 0, read
        assert read["start_offset"] == 10 and read["state_epoch"] == 1
        assert read["state_batches"] == [batch(10, 10, 4, 5), batch(11, 12, 0, 2)]
        summary = state_rpc(cluster, key, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {"leader_epoch": 1})
        assert (summary["leader_epoch"], summary["start_offset"], summary["delivery_complete_count"]) == (1, 10, 1)
        # the old leader (epoch 0) is fenced now
        stale = state_rpc(cluster, key, ApiKey.WRITE_SHARE_GROUP_STATE, 1, {
            "state_epoch": 1, "leader_epoch": 0, "start_offset": 13, "delivery_complete_count": 0,
            "state_batches": []})
        assert stale["error_code"] == ErrorCode.FENCED_LEADER_EPOCH
        # a re-initialization bumps the state epoch; writes of the old state epoch are fenced
        assert state_rpc(cluster, key, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
                         {"state_epoch": 2, "start_offset": 100})["error_code"] == 0
        assert state_rpc(cluster, key, ApiKey.WRITE_SHARE_GROUP_STATE, 1, {
            "state_epoch": 1, "leader_epoch": 1, "start_offset": 13, "delivery_complete_count": 0,
            "state_batches": []})["error_code"] == ErrorCode.FENCED_STATE_EPOCH
        assert state_rpc(cluster, key, ApiKey.DELETE_SHARE_GROUP_STATE, 0, {})["error_code"] == 0
        assert state_rpc(cluster, key, ApiKey.READ_SHARE_GROUP_STATE, 0, {"leader_epoch": 1})["error_code"] == \
            ErrorCode.INVALID_REQUEST
    finally:
        cluster.restart(coordinator)


def test_a_write_is_not_answered_before_its_record_is_on_the_in_sync_replicas(cluster: LocalCluster) -> None:
    """The followers of the key's state partition are frozen (SIGSTOP): the coordinator's append
    cannot reach min.insync.replicas, and the write is answered with an error after
    share.coordinator.write.timeout.ms, never NONE."""
    key = ShareKey("sc-frozen", topic_id(cluster, TOPIC), 0)
    assert state_rpc(cluster, key, ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
                     {"state_epoch": 0, "start_offset": 0})["error_code"] == 0
    index = share_partition_for(key, STATE_PARTITIONS)
    body = {"group_id": key.group_id, "topics": [{"topic_id": key.topic_id, "partitions": [{
        "partition": key.partition, "state_epoch": 0, "leader_epoch": 0, "start_offset": 5,
        "delivery_complete_count": 5, "state_batches": []}]}]}
    # The previous test restarted a broker: the state partition's leadership may still move (its
    # replica rejoining, the preferred leader taking over). A quick retriable answer came from a
    # broker that was no longer the coordinator, not from a timed-out write: try again, bounded.
    for _attempt in range(5):
        cluster.wait_for_isr(SHARE_GROUP_STATE_TOPIC)
        leader, replicas, _isr = cluster.partitions(SHARE_GROUP_STATE_TOPIC)[index]
        followers = [cluster.brokers[b] for b in replicas if b != leader]
        client = WireClient(cluster.brokers[leader].address, timeout=15)
        for node in followers:
            node.process.popen.send_signal(signal.SIGSTOP)
        try:
            started = time.monotonic()
            answer = client.request(ApiKey.WRITE_SHARE_GROUP_STATE, 1, body)["results"][0]["partitions"][0]
            waited = time.monotonic() - started
        finally:
            for node in followers:
                node.process.popen.send_signal(signal.SIGCONT)
            client.sock.close()
        if ErrorCode(answer["error_code"]) not in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS):
            break  # NONE, or the timed-out write's COORDINATOR_NOT_AVAILABLE: judged below
        time.sleep(1.0)
    assert answer["error_code"] != 0, f"answered NONE after {waited:.2f} s with both followers frozen"
    assert ErrorCode(answer["error_code"]) in RETRIABLE, answer
    assert waited >= WRITE_TIMEOUT_MS / 1000 * 0.9, waited
    cluster.wait_for_isr(SHARE_GROUP_STATE_TOPIC)


@pytest.mark.skipif(importlib.util.find_spec("roost.broker.handlers.share") is None,
                    reason="the share protocol (ShareGroupHeartbeat, ShareFetch) is not in this tree yet")
def test_a_share_fetch_answers_its_acknowledgements_only_once_durable(cluster: LocalCluster) -> None:
    """A ShareFetch carrying acknowledgements acquires while their state write is in flight (as
    Kafka runs a ShareFetch's acknowledge and fetch side by side), yet answers them only once the
    write is durable: with the followers of the group's state partition frozen (SIGSTOP) the write
    cannot reach min.insync.replicas, and no answer with AcknowledgeErrorCode NONE comes while
    they are frozen; once they run again the answer comes, and the accepted records are done."""
    from confluent_kafka import Producer

    topic, probe = "sc-ack-durable", "sc-ack-probe"
    admin = cluster.admin()
    admin.create_topics([NewTopic(probe, 1, 1)])[probe].result(30)
    cluster.wait_for_isr(probe)
    state_rpc(cluster, ShareKey("sc-ack-probe", topic_id(cluster, probe), 0), ApiKey.INITIALIZE_SHARE_GROUP_STATE, 0,
              {"state_epoch": 0, "start_offset": 0})  # __share_group_state exists from here
    cluster.wait_for_isr(SHARE_GROUP_STATE_TOPIC)
    leaders = {index: leader for index, (leader, _r, _i) in cluster.partitions(SHARE_GROUP_STATE_TOPIC).items()}
    # The data partition on a broker that leads a state partition, and a group whose state lives
    # there: freezing that partition's followers leaves the data partition and the coordinator running.
    data_leader = leaders[0]
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[data_leader]])])[topic].result(30)
    cluster.wait_for_isr(topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "batch.num.messages": 1})
    for i in range(4):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(30) == 0
    tid = topic_id(cluster, topic)
    group = next(g for g in (f"sc-ack-{i}" for i in range(1000))
                 if leaders[share_partition_for(ShareKey(g, tid, 0), STATE_PARTITIONS)] == data_leader)
    _leader, replicas, _isr = cluster.partitions(SHARE_GROUP_STATE_TOPIC)[
        share_partition_for(ShareKey(group, tid, 0), STATE_PARTITIONS)]
    followers = [cluster.brokers[b] for b in replicas if b != data_leader]
    read_from_earliest(admin, group, seen_by=[cluster.brokers[data_leader].address])
    client = WireClient(cluster.brokers[data_leader].address, timeout=60)

    def fetch(epoch: int, acks: list[dict[str, Any]], max_wait_ms: int) -> int:
        return client.send(ApiKey.SHARE_FETCH, 1, {
            "group_id": group, "member_id": "m1", "share_session_epoch": epoch, "max_wait_ms": max_wait_ms,
            "min_bytes": 1, "max_bytes": 1 << 20, "max_records": 500, "batch_size": 500,
            "topics": [{"topic_id": tid, "partitions": [{"partition_index": 0, "acknowledgement_batches": acks}]}],
            "forgotten_topics_data": []})
    try:
        opened = client.receive(ApiKey.SHARE_FETCH, 1, fetch(0, [], 5000))
        acquired = opened["responses"][0]["partitions"][0]["acquired_records"]
        assert (acquired[0]["first_offset"], acquired[-1]["last_offset"]) == (0, 3), opened
        cluster.wait_for_isr(SHARE_GROUP_STATE_TOPIC)  # the first fetch's own start write is done
        for node in followers:
            node.process.popen.send_signal(signal.SIGSTOP)
        try:
            correlation = fetch(1, [{"first_offset": 0, "last_offset": 1, "acknowledge_types": [1]}], 0)
            deadline = time.monotonic() + 2 * WRITE_TIMEOUT_MS / 1000
            while time.monotonic() < deadline and not client.has_data():
                time.sleep(0.05)
            early = client.receive(ApiKey.SHARE_FETCH, 1, correlation) if client.has_data() else None
        finally:
            for node in followers:
                node.process.popen.send_signal(signal.SIGCONT)
        if early is not None:
            entry = early["responses"][0]["partitions"][0]
            assert entry["acknowledge_error_code"] != 0, f"acknowledgement answered NONE while not durable: {entry}"
        else:
            entry = client.receive(ApiKey.SHARE_FETCH, 1, correlation)["responses"][0]["partitions"][0]
            assert entry["acknowledge_error_code"] == 0, entry
            # 0-1 are done: releasing 2-3 brings back 2-3 alone, delivered a second time
            again = client.receive(ApiKey.SHARE_FETCH, 1, fetch(2, [
                {"first_offset": 2, "last_offset": 3, "acknowledge_types": [2]}], 5000))
            back = again["responses"][0]["partitions"][0]
            assert back["acknowledge_error_code"] == 0, back
            assert [(r["first_offset"], r["last_offset"], r["delivery_count"]) for r in back["acquired_records"]] \
                == [(2, 3, 2)], back
    finally:
        client.close()
    # A frozen broker can outlive its ZooKeeper session: the next test needs it registered again.
    cluster.wait_for_brokers(set(cluster.brokers))
    cluster.wait_for_isr(SHARE_GROUP_STATE_TOPIC)


@pytest.mark.skipif(importlib.util.find_spec("roost.broker.handlers.share") is None,
                    reason="the share protocol (ShareGroupHeartbeat, ShareFetch) is not in this tree yet")
def test_share_consumer_through_kills_of_the_data_leader_and_the_share_coordinator(cluster: LocalCluster) -> None:
    """confluent-kafka's ShareConsumer (explicit acknowledgement, commit_async with the commit
    callback) on a one-partition topic while the data partition's leader and then the share
    coordinator's broker are killed with kill -9 mid-stream: no record whose acknowledgement the
    callback reported done is delivered again, and every record ends accepted (the share
    coordinator's start offset passes them all)."""
    from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer

    topic, group, records = "sc-failover", f"failover-{uuid.uuid4().hex[:8]}", 1500
    cluster.wait_for_brokers(set(cluster.brokers))
    admin = cluster.admin()
    admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
    cluster.wait_for_isr(topic)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 5,
                         "batch.num.messages": 50})
    for i in range(records):
        producer.produce(topic, value=b"%d" % i)
    assert producer.flush(60) == 0
    read_from_earliest(admin, group, seen_by=cluster.running_addresses())
    key = ShareKey(group, topic_id(cluster, topic), 0)
    coordinator_index = share_partition_for(key, STATE_PARTITIONS)

    answered: set[int] = set()  # acknowledgements the broker answered as done
    redelivered_after_answer: list[tuple[int, int]] = []
    delivered: dict[int, list[int]] = {}

    def committed(offsets: Any, error: Any) -> None:
        if error is None:
            for done in offsets.values():
                answered.update(done)

    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.set_acknowledgement_commit_callback(committed)
    consumer.subscribe([topic])
    killed: list[int] = []
    faults = [("data leader", lambda: cluster.partitions(topic)[0][0]),
              ("share coordinator", lambda: cluster.partitions(SHARE_GROUP_STATE_TOPIC)[coordinator_index][0])]
    summaries: list[dict[str, Any]] = []  # the last answer, for a failure's message

    def persisted_start() -> int:
        """The share-partition's start offset in the share coordinator: every record below it is
        accepted or archived, durably (an acknowledgement can be done although the callback saw
        its connection go)."""
        summary = state_rpc(cluster, key, ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, 1, {"leader_epoch": -1})
        summaries[:] = [summary]
        return summary["start_offset"] if summary["error_code"] == 0 else -1

    try:
        deadline = time.monotonic() + 150
        rounds = 0
        while len(answered) < records and time.monotonic() < deadline:
            rounds += 1
            if rounds % 20 == 0 and not faults and persisted_start() >= records:
                break
            try:
                messages = consumer.poll(0.5) or []
            except KafkaException:  # a partition error while the cluster moves: poll again
                continue
            for message in messages:
                if message.error() is not None:
                    continue
                offset = message.offset()
                if offset in answered:
                    redelivered_after_answer.append((offset, message.delivery_count()))
                delivered.setdefault(offset, []).append(message.delivery_count())
                consumer.acknowledge(message, AcknowledgeType.ACCEPT)
            consumer.commit_async()
            # mid-stream, once a third and then two thirds are done: kill -9 the next victim,
            # bring the previous one back
            if faults and len(answered) >= records * (len(killed) + 1) // 3:
                what, victim = faults.pop(0)
                broker = victim()
                if killed:
                    cluster.restart(killed[-1][1])
                cluster.kill(broker)
                killed.append((what, broker))
        consumer.commit_sync(30)
    finally:
        consumer.close()
        for _what, broker in killed:
            if not cluster.brokers[broker].running:
                cluster.restart(broker)
    assert len(killed) == 2, f"the faults were not all delivered: killed {killed}, {len(answered)} answered"
    assert not redelivered_after_answer, f"delivered again after its acknowledgement was answered: " \
        f"{redelivered_after_answer[:10]}"
    # The broker brought back last may still be loading state partitions: wait for an answer
    # (not for a particular one), then judge it.
    try:
        start = wait_for(lambda: persisted_start() + 1, 60, interval=0.5,
                         what="the share coordinator to answer ReadShareGroupStateSummary") - 1
    except AssertionError as waited_out:
        raise AssertionError(f"{waited_out}; its last answer: {summaries}") from None
    missing = sorted(set(range(records)) - answered)
    assert start >= records, f"the share-partition starts at {start}: not every record is done; " \
        f"{len(missing)} never answered, e.g. {missing[:10]} (their deliveries: {[delivered.get(o) for o in missing[:5]]}; " \
        f"killed {killed})"
    assert all(counts == sorted(counts) for counts in delivered.values())
