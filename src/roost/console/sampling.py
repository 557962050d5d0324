"""Sampling the figures behind the rates: end offsets (ListOffsets, through the AdminClient) and
leader log sizes (DescribeLogDirs, one request per broker per sample, through roost.admin.replica_sizes).

Two callers, both bounded: the overview samples the whole cluster (every partition's end offset,
and every broker's whole DescribeLogDirs answer) at most once per history.MIN_INTERVAL_S, in the
background; the topic list samples only the topics of the page it shows whose latest point is
older than that, so at 10,000 topics a page costs one ListOffsets batch and one DescribeLogDirs
per broker naming at most a page of topics, and the overview's sample serves every page in
between. Neither answer waits on a sample when it has a point to show: the sample runs in the
console's thread pool and the next answer shows it (a page refreshes every few seconds). Only a
topic never sampled is sampled inside the request, so a page's first answer has its sizes.
"""

from __future__ import annotations

import logging
import time
from concurrent.futures import ThreadPoolExecutor

from confluent_kafka.admin import ClusterMetadata, OffsetSpec

from roost.admin.replica_sizes import UNANSWERED, broker_replica_sizes
from roost.console.context import Console
from roost.console.history import TopicPoint

Partition = tuple[str, int]
MAX_RATE_PARTITIONS = 20_000  # past this, sampling every end offset costs more than the figure is worth
MAX_ASKING_THREADS = 8
SAMPLE_BATCH = 200  # partitions per ListOffsets of a whole-cluster sample (see KafkaSide.offsets)
CLIENT_ID = "roost-console"
log = logging.getLogger("roost.console")


def leader_sizes(metadata: ClusterMetadata, topics: list[str] | None,
                 timeout_s: float) -> dict[Partition, int] | None:
    """Bytes of each partition's leader replica, for `topics` (None: all), from one DescribeLogDirs
    per live broker, asked at once. A partition whose leader did not answer is left out; None when
    no broker answered (a cluster without DescribeLogDirs, a TLS listener)."""
    brokers = {b.id: (b.host, b.port) for b in metadata.brokers.values()}
    if not brokers:
        return None
    asks: dict[int, dict[str, list[int]] | None] = {}
    if topics is None:
        asks = dict.fromkeys(brokers)
    else:  # each broker is asked only of the partitions it leads
        for name in topics:
            topic = metadata.topics.get(name)
            for index, partition in (topic.partitions.items() if topic is not None else ()):
                if partition.leader in brokers:
                    asked = asks.setdefault(partition.leader, {})
                    assert asked is not None
                    asked.setdefault(name, []).append(index)
        if not asks:
            return {}
    answers: dict[int, dict[Partition, int]] = {}
    with ThreadPoolExecutor(max_workers=min(len(asks), MAX_ASKING_THREADS)) as pool:
        futures = {broker: pool.submit(broker_replica_sizes, *brokers[broker], ask, timeout_s, CLIENT_ID)
                   for broker, ask in asks.items()}
        for broker, future in futures.items():
            try:
                answers[broker] = future.result()
            except UNANSWERED:
                continue
    if not answers:
        return None
    sizes: dict[Partition, int] = {}
    for name in metadata.topics if topics is None else topics:
        topic = metadata.topics.get(name)
        for index, partition in (topic.partitions.items() if topic is not None else ()):
            size = answers.get(partition.leader, {}).get((name, index))
            if size is not None:
                sizes[(name, index)] = size
    return sizes


def topic_sum(metadata: ClusterMetadata, name: str, figures: dict[Partition, int | None] | None) -> int | None:
    """The sum over the topic's partitions; None unless every partition has its figure."""
    if figures is None:
        return None
    values = [figures.get((name, index)) for index in metadata.topics[name].partitions]
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def record_topics(console: Console, metadata: ClusterMetadata, names: list[str], now: float,
                  ends: dict[Partition, int | None], sizes: dict[Partition, int] | None) -> None:
    console.topic_rates.sizes_known = sizes is not None
    for name in names:
        console.topic_rates.record(name, TopicPoint(now, topic_sum(metadata, name, ends),
                                                    topic_sum(metadata, name, sizes)))  # type: ignore[arg-type]


def sample_cluster(console: Console, metadata: ClusterMetadata) -> bool:
    """Starts a whole-cluster sample in the console's thread pool when one is due: the overview
    answers from the last finished sample, so its answer never waits on one (at 1,000 partitions
    a sample is a few hundred ms of ListOffsets). False when the cluster is too big to sample."""
    if console.kafka.partition_counts(metadata).partitions > MAX_RATE_PARTITIONS:
        return False
    now = time.time()
    if console.history.claim(now):
        partitions = [(name, index) for name, topic in metadata.topics.items() for index in topic.partitions]
        try:
            console.pool.submit(take_cluster_sample, console, metadata, partitions, now)
        except RuntimeError:  # the console is closing: its pool takes no more work
            pass
    return True


def take_cluster_sample(console: Console, metadata: ClusterMetadata, partitions: list[Partition],
                        now: float) -> None:
    try:
        ends = console.kafka.offsets(partitions, OffsetSpec.latest(), SAMPLE_BATCH)
        sizes = leader_sizes(metadata, None, console.settings.request_timeout_s)
    except Exception:  # a background task has no one to answer: the log has the why, the next sample retries
        log.exception("sampling the cluster's end offsets and sizes failed")
        return
    complete_ends = all(ends.get(p) is not None for p in partitions)
    complete_sizes = sizes is not None and all(p in sizes for p in partitions)
    console.history.record_cluster(now, sum(v for v in ends.values() if v is not None) if complete_ends else None,
                                   sum(sizes.values()) if sizes is not None and complete_sizes else None)
    names = list(metadata.topics)
    console.topic_rates.keep_only(set(names))
    record_topics(console, metadata, names, now, ends, sizes)


def sample_topics(console: Console, names: list[str]) -> None:
    """Samples the named topics (a page of the list) that are due: inside this call when one was
    never sampled (the stale ones with it, one sample for all), else in the console's thread pool
    while the caller answers from the points it has."""
    due = console.topic_rates.due(names)
    if due.unseen:
        take_topic_sample(console, due.unseen + due.stale)
    elif due.stale:
        try:
            console.pool.submit(take_topic_sample_logged, console, due.stale)
        except RuntimeError:  # the console is closing: its pool takes no more work
            pass


def take_topic_sample(console: Console, names: list[str]) -> None:
    metadata = console.kafka.metadata(stale_ok=True)  # the one the topic list's page was made from
    names = [name for name in names if name in metadata.topics]
    now = time.time()
    ends = console.kafka.offsets([(name, index) for name in names for index in metadata.topics[name].partitions],
                                 OffsetSpec.latest())
    sizes = leader_sizes(metadata, names, console.settings.request_timeout_s)
    record_topics(console, metadata, names, now, ends, sizes)


def take_topic_sample_logged(console: Console, names: list[str]) -> None:
    try:
        take_topic_sample(console, names)
    except Exception:  # a background task has no one to answer: the log has the why, the claim lapses
        log.exception("sampling the end offsets and sizes of %d topics failed", len(names))
