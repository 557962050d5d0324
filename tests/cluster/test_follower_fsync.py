"""A follower fsyncs what it replicated before it tells the leader it holds it (topic
`flush.messages=1`), observed with strace on real broker processes (tests/support/syscall_trace.py).

A follower tells the leader how far its log goes with the fetch offset of its next Fetch; the
leader counts that towards the high watermark, and so towards an acks=all acknowledgement. So
for every record a real client produced with acks=all, the follower's write of it to its segment
file must be followed by an fsync of that file that returns before the follower's next Fetch to
the leader begins to leave. The test knows only the Kafka protocol (a request's api key) and
Kafka's on-disk layout (`<topic>-<partition>/<offset>.log`), nothing of the broker's code.

The same check is run on a topic without the setting, and must find every such Fetch sent with
the record only in the page cache, so the test can tell the two apart.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import NewTopic

from tests.support.cluster import LocalCluster
from tests.support.probes import produce_probes
from tests.support.syscall_trace import (
    DATA_WRITES,
    SYNCS,
    Syscall,
    SyscallTrace,
    kafka_requests_sent,
)

FETCH = 1
TOPICS = {"replicated-durable": {"flush.messages": "1", "min.insync.replicas": "2"},
          "replicated-lazy": {"min.insync.replicas": "2"}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("follower-fsync"), brokers=2, keepers=1)
    try:
        admin = cluster.admin()
        futures = admin.create_topics([NewTopic(name, 1, 2, config=config) for name, config in TOPICS.items()])
        for future in futures.values():
            future.result(30)
        for name in TOPICS:
            cluster.wait_for_isr(name)
        yield cluster
    finally:
        cluster.close()


def is_segment_of(topic: str, path: str) -> bool:
    directory, _, name = path.rpartition("/")
    return name.endswith(".log") and directory.rpartition("/")[2].rpartition("-")[0] == topic


def follower_verdicts(calls: list[Syscall], cluster: LocalCluster, topic: str, leader: int, follower: int,
                      probes: list[bytes]) -> dict[bytes, str | None]:
    """For each probe: None when the follower's write of it was fsynced before its next Fetch to
    the leader began, else what happened instead."""
    pid = cluster.brokers[follower].process.popen.pid  # type: ignore[union-attr]
    fetches = kafka_requests_sent(calls, pid, [cluster.brokers[leader].advertised_port], api_keys=[FETCH])
    verdicts: dict[bytes, str | None] = {}
    for probe in probes:
        writes = [c for c in calls if c.pid == pid and c.name in DATA_WRITES and c.ok and probe in c.data
                  and is_segment_of(topic, c.target)]
        assert len(writes) == 1, f"the follower wrote {probe!r} to its log {len(writes)} times"
        write = writes[0]
        after = next((f for f in fetches if f.sent > write.exit), None)
        assert after is not None, f"no Fetch from the follower after it wrote {probe!r}"
        synced = any(c.pid == pid and c.name in SYNCS and c.ok and c.target == write.target
                     and write.exit < c.entry and c.exit < after.sent for c in calls)
        verdicts[probe] = None if synced else f"fetched again before fsyncing {probe!r} ({write.target})"
    return verdicts


def traced_probes(cluster: LocalCluster, topic: str, tmp_path: Path) -> dict[bytes, str | None]:
    leader, replicas, isr = cluster.partitions(topic)[0]
    assert sorted(isr) == sorted(replicas) == [1, 2], (leader, replicas, isr)
    follower = next(b for b in replicas if b != leader)
    pid = cluster.brokers[follower].process.popen.pid  # type: ignore[union-attr]
    with SyscallTrace([pid], tmp_path / "strace.txt") as trace:
        probes = produce_probes(cluster.bootstrap, topic, "replica-probe")
    return follower_verdicts(trace.calls, cluster, topic, leader, follower, probes)


def test_a_follower_fsyncs_before_its_next_fetch_tells_the_leader(cluster: LocalCluster, tmp_path: Path) -> None:
    verdicts = traced_probes(cluster, "replicated-durable", tmp_path)
    assert [v for v in verdicts.values() if v is not None] == []


def test_without_flush_messages_the_check_sees_fetches_before_any_fsync(
        cluster: LocalCluster, tmp_path: Path) -> None:
    verdicts = traced_probes(cluster, "replicated-lazy", tmp_path)
    assert all(v is not None for v in verdicts.values()), verdicts
