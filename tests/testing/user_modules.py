"""The test modules a user of roost.testing would write, run by tests/testing/test_plugin.py in a
pytest of their own (pytester's runpytest_subprocess), so that the plugin loads through its entry
point as it does for users.

CONFTEST records the pids of every node and cluster a test used and, when the session has ended
(after the fixtures' teardown), which of them still run: the check that nothing is left behind is
made inside that pytest, before its exit could take the processes with it.
"""

CONFTEST = '''
import json
from pathlib import Path

import pytest


def _alive(pid):
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return False
    return fields[0] != "Z"  # a zombie has exited


@pytest.fixture(autouse=True)
def record_roost_pids(request):
    targets = [request.getfixturevalue(name) for name in ("roost_node", "roost_cluster")
               if name in request.fixturenames]
    yield
    with open("pids.txt", "a") as pids:
        for target in targets:
            pids.write(json.dumps({"bootstrap": target.bootstrap, "pids": target.pids}) + "\\n")


def pytest_sessionfinish(session):
    recorded = Path("pids.txt")
    lines = recorded.read_text().splitlines() if recorded.exists() else []
    pids = sorted({pid for line in lines for pid in json.loads(line)["pids"]})
    Path("leftovers.json").write_text(json.dumps({"pids": pids, "alive": [p for p in pids if _alive(p)]}))
'''

NODE_TESTS = '''
import time

import pytest
from confluent_kafka import Consumer, Producer
from kazoo.client import KazooClient


def test_confluent_kafka_produce_and_consume(roost_node, roost_topic):
    producer = Producer({"bootstrap.servers": roost_node.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce(roost_topic, f"value-{i}".encode(), key=b"user-42")
    assert producer.flush(10) == 0
    consumer = Consumer({"bootstrap.servers": roost_node.bootstrap, "group.id": "readers",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([roost_topic])
    values = []
    deadline = time.monotonic() + 30
    while len(values) < 10 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value().decode())
    consumer.close()
    assert values == [f"value-{i}" for i in range(10)]


def test_helpers_round_trip(roost_node, roost_topic):
    sent = roost_node.produce(roost_topic, [b"plain", ("key", "text"), (None, None)], headers={"trace": "t1"})
    assert [record.offset for record in sent] == [0, 1, 2]
    got = roost_node.consume(roost_topic, 3)
    assert [(record.key, record.value) for record in got] == [(None, b"plain"), (b"key", b"text"), (None, None)]
    assert got[0].headers == [("trace", b"t1")]
    with pytest.raises(TimeoutError, match="3 of 4 records"):
        roost_node.consume(roost_topic, 4, timeout=1)


def test_share_consumer_takes_work_from_a_queue(roost_node, roost_topic):
    roost_node.produce(roost_topic, [f"job-{i}" for i in range(5)])
    worker = roost_node.share_consumer()
    worker.subscribe([roost_topic])
    done = []
    deadline = time.monotonic() + 30
    while len(done) < 5 and time.monotonic() < deadline:
        done += [m.value().decode() for m in worker.poll(0.5) or [] if m.error() is None]
    worker.commit_sync(30)
    worker.close()
    assert sorted(done) == [f"job-{i}" for i in range(5)]


@pytest.mark.roost_topic(partitions=3, config={"cleanup.policy": "compact"})
def test_marker_shapes_the_topic(roost_node, roost_topic):
    assert sorted(roost_node.partitions(roost_topic)) == [0, 1, 2]
    from confluent_kafka.admin import ConfigResource
    resource = ConfigResource("topic", roost_topic)
    configs = roost_node.admin().describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"


@pytest.mark.parametrize("roost_topic, expected", [(2, 2), ({"partitions": 4}, 4)], indirect=["roost_topic"])
def test_indirect_parametrization(roost_node, roost_topic, expected):
    assert len(roost_node.partitions(roost_topic)) == expected


seen_topics = []


@pytest.mark.parametrize("round", [1, 2])
def test_each_test_gets_a_fresh_topic_deleted_after_it(roost_node, roost_topic, round):
    seen_topics.append(roost_topic)
    assert roost_node.produce(roost_topic, [b"x"])[0].offset == 0  # a fresh, empty topic
    if round == 2:
        first, second = seen_topics
        assert first != second
        deadline = time.monotonic() + 20
        while first in roost_node.admin().list_topics(timeout=10).topics and time.monotonic() < deadline:
            time.sleep(0.1)
        assert first not in roost_node.admin().list_topics(timeout=10).topics


def test_kazoo_lock(roost_node):
    first = KazooClient(hosts=roost_node.zookeeper)
    second = KazooClient(hosts=roost_node.zookeeper)
    first.start(timeout=10)
    second.start(timeout=10)
    try:
        with first.Lock("/locks/nightly-job", "worker-1"):
            contender = second.Lock("/locks/nightly-job", "worker-2")
            assert not contender.acquire(blocking=False)
            assert contender.contenders() == ["worker-1"]
        assert contender.acquire(timeout=10)
        contender.release()
    finally:
        for client in (first, second):
            client.stop()
            client.close()
'''

FAILING_TEST = '''
def test_a_user_bug(roost_node, roost_topic):
    roost_node.produce(roost_topic, [b"one"])
    assert roost_node.consume(roost_topic, 1)[0].value == b"two", "the user's own assertion"
'''

CLUSTER_TESTS = '''
import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.roost_cluster(brokers=3, keepers=1)


@pytest.mark.roost_topic(replication_factor=3, config={"min.insync.replicas": 2})
def test_a_killed_leader_loses_no_acknowledged_record(roost_cluster, roost_topic):
    producer = Producer({"bootstrap.servers": roost_cluster.bootstrap, "acks": "all",
                         "enable.idempotence": True})
    acknowledged = []

    def on_delivery(error, message):
        if error is None:
            acknowledged.append(message.value())

    def send(first, count):
        for i in range(first, first + count):
            producer.produce(roost_topic, str(i).encode(), on_delivery=on_delivery)
            producer.poll(0)
        assert producer.flush(60) == 0

    send(0, 200)
    leader = roost_cluster.leader(roost_topic)
    roost_cluster.kill(leader)
    send(200, 200)  # to the new leader, with the killed one out of the ISR
    roost_cluster.restart(leader)
    roost_cluster.wait_for_leaders(roost_topic, in_sync=True)
    send(400, 200)
    assert len(acknowledged) == 600
    # Only the restarted broker left: what it serves must be everything acknowledged.
    others = [broker for broker in roost_cluster.brokers if broker != leader]
    for broker in others:
        roost_cluster.kill(broker)
    assert roost_cluster.leader(roost_topic) == leader
    values = [record.value for record in roost_cluster.consume(roost_topic, 600, timeout=30)]
    assert sorted(values) == sorted(acknowledged)
    for broker in others:
        roost_cluster.restart(broker)


def test_expired_session_and_restarted_keeper(roost_cluster, roost_topic):
    roost_cluster.expire_session(2)
    roost_cluster.stop_keeper(1)
    roost_cluster.start_keeper(1)
    roost_cluster.wait_for_brokers({1, 2, 3})
    roost_cluster.produce(roost_topic, [b"after"])
    assert [record.value for record in roost_cluster.consume(roost_topic, 1)] == [b"after"]
'''
