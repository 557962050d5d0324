"""A transaction survives kill -9 of its coordinator's broker in a three-broker cluster: the
transaction's state is in every in-sync replica of its `__transaction_state` partition before
each answer, so the replica that takes over loads it (COORDINATOR_LOAD_IN_PROGRESS meanwhile),
and the producer's commit, retried there, makes the records visible to read_committed exactly
once; the next transaction goes on with the same producer. Then the leader of one of the
transaction's data partitions is killed before the commit: the markers wait for its successor."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from roost.broker.metadata.catalog import TRANSACTION_STATE_TOPIC
from tests.support.cluster import LocalCluster
from tests.support.procs import wait_for
from tests.support.reading import read_to_end

TOPIC = "txf-orders"


def read_committed(bootstrap: str, expected: int, timeout: float = 30.0) -> list[bytes]:
    """The topic's committed records, read until `expected` came and then to the end."""
    return read_to_end(bootstrap, TOPIC, 2, "read_committed", until=lambda values: len(values) >= expected,
                       timeout=timeout)


def test_a_transaction_commits_across_a_kill_of_its_coordinator(tmp_path: Path) -> None:
    cluster = LocalCluster.start(tmp_path, brokers=3, keepers=1,
                                 settings={"transaction.state.log.num.partitions": 1})
    try:
        creator = cluster.admin()
        creator.create_topics([NewTopic(TOPIC, 2, 3)])[TOPIC].result(30)
        cluster.wait_for_isr(TOPIC)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": "txf-app",
                             "linger.ms": 5})
        producer.init_transactions(60)
        cluster.wait_for_isr(TRANSACTION_STATE_TOPIC)  # the coordinator's state is on all three
        producer.begin_transaction()
        for i in range(10):
            producer.produce(TOPIC, b"before-%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        coordinator = cluster.partitions(TRANSACTION_STATE_TOPIC)[0][0]
        cluster.kill(coordinator)
        # Another broker leads the state partition after the ZooKeeper session expires.
        wait_for(lambda: cluster.partitions(TRANSACTION_STATE_TOPIC).get(0, (-1,))[0] not in (-1, coordinator),
                 30, what="a new transaction coordinator")
        producer.commit_transaction(60)
        producer.begin_transaction()
        producer.produce(TOPIC, b"after", partition=0)
        producer.commit_transaction(60)
        seen = read_committed(cluster.running_bootstrap(), 11)
        assert sorted(seen) == sorted([b"after", *(b"before-%d" % i for i in range(10))])

        # Now the leader of a data partition dies mid-transaction: the coordinator's markers wait
        # for the new leader, and the commit goes through.
        cluster.restart(coordinator)
        cluster.wait_for_isr(TOPIC)
        producer.begin_transaction()
        for i in range(10):
            producer.produce(TOPIC, b"second-%d" % i, partition=i % 2)
        assert producer.flush(30) == 0
        data_leader = cluster.partitions(TOPIC)[1][0]
        cluster.kill(data_leader)
        producer.commit_transaction(60)
        expected = sorted([b"after", *(b"before-%d" % i for i in range(10)), *(b"second-%d" % i for i in range(10))])
        assert sorted(read_committed(cluster.running_bootstrap(), 21)) == expected
    finally:
        cluster.close()
