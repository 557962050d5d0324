"""fsync before every acknowledgement (`log.flush.interval.messages=1`, topic `flush.messages=1`),
observed on a real `roost` process with strace (tests/support/syscall_trace.py).

For every produce request a real client sends, and every offset commit, the bytes it carries are
written to the partition's segment file, an fsync of that file begins after the write and returns,
and only then does the first byte of the answer go to the client's socket. The test knows nothing
of the broker's code: only the Kafka protocol (to pair a request with its response) and Kafka's
on-disk layout (`<topic>-<partition>/<offset>.log`).

The same check is run where the setting is off, and must find every answer sent without an fsync,
so the test can tell the two apart.
"""

from __future__ import annotations

import itertools
import re
import uuid
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.conftest import StartBroker
from tests.support.probes import produce_probes
from tests.support.procs import RoostProcess
from tests.support.syscall_trace import (
    DATA_WRITES,
    SYNCS,
    Durability,
    SyscallTrace,
    durable_before_answer,
    kafka_exchanges,
)

PRODUCE, OFFSET_COMMIT = 0, 8
PROBE = re.compile(rb"fsync-probe-[0-9a-f]{8}-\d+\.")  # as tests.support.probes writes them


def segment_of(topic: str):
    def is_segment(path: str) -> bool:
        directory, _, name = path.rpartition("/")
        return name.endswith(".log") and directory.rpartition("/")[2].rpartition("-")[0] == topic
    return is_segment


def commit_offsets(bootstrap: str, topic: str, group: str, commits: int = 3) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        for offset in range(1, commits + 1):
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def produce_answers(trace: SyscallTrace, broker: RoostProcess, topic: str, values: list[bytes]) -> list[Durability]:
    """One Durability per produced value, from the produce request that carried it."""
    found: dict[bytes, Durability] = {}
    for exchange in kafka_exchanges(trace.calls, [broker.port("kafka")], api_keys=[PRODUCE]):
        for probe in PROBE.findall(exchange.request):
            if probe in values:
                assert exchange.answered is not None, f"no answer to the produce of {probe!r}"
                found[probe] = durable_before_answer(trace.calls, exchange, probe, segment_of(topic))
    assert sorted(found) == sorted(values), "not every produced value was seen in a request"
    return [found[v] for v in values]


def commit_answers(trace: SyscallTrace, broker: RoostProcess, group: str) -> list[Durability]:
    probe = group.encode()
    answers = [durable_before_answer(trace.calls, exchange, probe, segment_of("__consumer_offsets"))
               for exchange in kafka_exchanges(trace.calls, [broker.port("kafka")], api_keys=[OFFSET_COMMIT])
               if probe in exchange.request]
    assert len(answers) == 3, "expected three offset commits"
    return answers


def create_topics(bootstrap: str, topics: dict[str, dict[str, str]]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1, config=config) for name, config in topics.items()])
    for future in futures.values():
        future.result(30)


def test_broker_setting_fsyncs_every_produce_and_offset_commit_before_answering(
        start_broker: StartBroker, tmp_path: Path) -> None:
    broker: RoostProcess = start_broker("--no-keeper", "--log.flush.interval.messages", "1")
    bootstrap = broker.address("kafka")
    create_topics(bootstrap, {"durable": {}})
    group = f"fsync-probe-group-{uuid.uuid4().hex[:8]}"
    with SyscallTrace([broker.popen.pid], tmp_path / "strace.txt") as trace:
        values = produce_probes(bootstrap, "durable", "fsync-probe")
        commit_offsets(bootstrap, "durable", group)
    pid = broker.popen.pid
    for answer in produce_answers(trace, broker, "durable", values) + commit_answers(trace, broker, group):
        assert answer.written == {pid}, answer.describe()
        assert answer.synced == {pid}, "answered before the fsync: " + answer.describe()


def test_topic_setting_fsyncs_before_answering_and_the_check_sees_when_it_is_off(
        start_broker: StartBroker, tmp_path: Path) -> None:
    """Broker default off: a topic with flush.messages=1 fsyncs before each answer; a topic
    without it answers with the data only in the page cache, and the check must say so, as it
    must for offset commits (the offsets topic follows the broker default)."""
    broker = start_broker("--no-keeper")
    bootstrap = broker.address("kafka")
    create_topics(bootstrap, {"eager": {"flush.messages": "1"}, "lazy": {}})
    group = f"fsync-probe-group-{uuid.uuid4().hex[:8]}"
    with SyscallTrace([broker.popen.pid], tmp_path / "strace.txt") as trace:
        eager = produce_probes(bootstrap, "eager", "fsync-probe")
        lazy = produce_probes(bootstrap, "lazy", "fsync-probe")
        commit_offsets(bootstrap, "lazy", group)
    pid = broker.popen.pid
    for answer in produce_answers(trace, broker, "eager", eager):
        assert answer.synced == {pid}, "answered before the fsync: " + answer.describe()
    for answer in produce_answers(trace, broker, "lazy", lazy) + commit_answers(trace, broker, group):
        assert answer.written == {pid}, answer.describe()
        assert answer.synced == set(), "an fsync nobody asked for: " + answer.describe()


def test_a_roll_makes_the_old_segment_durable_before_the_new_one_takes_a_byte(
        start_broker: StartBroker, tmp_path: Path) -> None:
    """Without fsync before ack, a segment is still fsynced when the log rolls past it, before the
    first byte goes to the next segment's file. Otherwise a power cut could keep a later segment's
    records (the kernel writes dirty pages back in any order) while an earlier one lost its tail
    at a batch boundary: a hole below the log end, which a follower would report as held (found
    by the replication simulation; tests/log/test_recovery.py shows the recovery side)."""
    broker = start_broker("--no-keeper")
    bootstrap = broker.address("kafka")
    create_topics(bootstrap, {"rolling": {"segment.bytes": "300"}})
    is_segment = segment_of("rolling")
    with SyscallTrace([broker.popen.pid], tmp_path / "strace.txt") as trace:
        produce_probes(bootstrap, "rolling", "roll-probe", one_by_one=16, burst=4)
    first_write: dict[str, int] = {}
    synced_at: dict[str, list[int]] = {}
    for call in trace.calls:
        if not call.ok or not is_segment(call.target):
            continue
        if call.name in DATA_WRITES and call.data:
            first_write.setdefault(call.target, call.entry)
        elif call.name in SYNCS:
            synced_at.setdefault(call.target, []).append(call.exit)
    segments = sorted(first_write, key=lambda path: int(path.rpartition("/")[2].removesuffix(".log")))
    assert len(segments) >= 3, f"expected the log to roll at least twice: {segments}"
    for earlier, later in itertools.pairwise(segments):
        assert any(exit_ < first_write[later] for exit_ in synced_at.get(earlier, [])), (
            f"{later} was written before any fsync of {earlier} had returned")
