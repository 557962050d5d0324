"""`roost group ...` run as a process against a real `roost up`; committed offsets are read back
with confluent-kafka's Consumer.committed(), members are made by real subscribed consumers."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from roost.admin.seek import parse_time_ms
from tests.cli.kafka_cli import (
    assert_one_line_error,
    dead_address,
    run_cli,
    run_in_process,
    run_json,
)
from tests.support.procs import wait_for

TOPIC = "events"
RECORDS = 10  # per partition
STEP_MS = 1000  # between the records' timestamps


@pytest.fixture(scope="module")
def base_ms(bootstrap: str) -> int:
    """TOPIC: two partitions of RECORDS records each; record i stamped base + i * STEP_MS (an
    hour ago, well inside the default retention)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(10)
    base = int(time.time() * 1000) - 3_600_000
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in (0, 1):
        for i in range(RECORDS):
            producer.produce(TOPIC, f"{i}".encode(), partition=partition, timestamp=base + i * STEP_MS)
    assert producer.flush(30) == 0
    return base


def commit(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return {tp.partition: tp.offset
                for tp in consumer.committed([TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)], timeout=10)}
    finally:
        consumer.close()


def test_describe_shows_committed_log_end_and_lag(bootstrap: str, base_ms: int) -> None:
    commit(bootstrap, "lagging", {0: 4, 1: RECORDS})
    described = run_json("group", "describe", "lagging", "-b", bootstrap)
    assert described["group"] == "lagging" and described["state"] == "empty" and described["members"] == []
    rows = {(r["topic"], r["partition"]): (r["committed"], r["log_end_offset"], r["lag"]) for r in described["offsets"]}
    assert rows == {(TOPIC, 0): (4, RECORDS, RECORDS - 4), (TOPIC, 1): (RECORDS, RECORDS, 0)}
    assert described["lag_by_topic"] == [{"topic": TOPIC, "partitions": 2, "lag": RECORDS - 4}]

    listed = run_json("group", "list", "-b", bootstrap)
    assert {"group": "lagging", "state": "empty"}.items() <= next(g for g in listed if g["group"] == "lagging").items()
    text = run_cli("group", "describe", "lagging", "-b", bootstrap)
    assert text.returncode == 0 and "LOG-END-OFFSET" in text.stdout and "LAG" in text.stdout


def test_seek_plans_without_changing_then_executes(bootstrap: str, base_ms: int) -> None:
    commit(bootstrap, "seeker", {0: 5, 1: 5})
    dry = run_cli("group", "seek", "seeker", "--to", "start", "-b", bootstrap, "--format", "json")
    assert dry.returncode == 0, dry.stderr
    assert "dry run" in dry.stderr
    assert committed(bootstrap, "seeker") == {0: 5, 1: 5}

    def execute(to: str) -> dict[int, int]:
        done = run_cli("group", "seek", "seeker", f"--to={to}", "--execute", "-b", bootstrap, "--format", "json")
        assert done.returncode == 0, done.stderr
        plan = {row["partition"]: row["new"] for row in json.loads(done.stdout)}
        now = committed(bootstrap, "seeker")
        assert now == plan  # what was printed is what was committed
        return now

    assert execute("+3") == {0: 8, 1: 8}
    assert execute("-10") == {0: 0, 1: 0}  # kept at the log start
    assert execute("end") == {0: RECORDS, 1: RECORDS}
    assert execute("7") == {0: 7, 1: 7}
    assert execute(f"@{base_ms + 4 * STEP_MS}") == {0: 4, 1: 4}  # the first record at or after the time


def test_seek_gives_a_new_group_offsets_only_for_named_topics(bootstrap: str, base_ms: int) -> None:
    assert_one_line_error(run_cli("group", "seek", "fresh", "--to", "start", "-b", bootstrap), "unknown group: fresh")
    done = run_cli("group", "seek", "fresh", "--to", "3", "--topics", TOPIC, "--execute", "-b", bootstrap)
    assert done.returncode == 0, done.stderr
    assert committed(bootstrap, "fresh") == {0: 3, 1: 3}


def test_a_group_with_live_members_is_described_and_not_moved(bootstrap: str, base_ms: int) -> None:
    commit(bootstrap, "live", {0: 2, 1: 2})
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "live", "client.id": "live-client",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        consumer.subscribe([TOPIC])

        def assigned() -> bool:
            consumer.poll(0.2)
            return len(consumer.assignment()) == 2

        wait_for(assigned, timeout=30, what="the consumer's assignment")
        described = run_json("group", "describe", "live", "-b", bootstrap)
        assert described["state"] == "stable"
        (member,) = described["members"]
        assert member["client_id"] == "live-client" and member["assignment"] == f"{TOPIC}:0,1"
        assert {r["client_id"] for r in described["offsets"]} == {"live-client"}

        refused = run_cli("group", "seek", "live", "--to", "start", "--execute", "-b", bootstrap)
        assert_one_line_error(refused, "live member", "stop its consumers")
        assert committed(bootstrap, "live") == {0: 2, 1: 2}
    finally:
        consumer.close()


def test_delete_removes_the_group_or_says_the_broker_cannot(bootstrap: str, base_ms: int) -> None:
    commit(bootstrap, "doomed", {0: 1})
    done = run_cli("group", "delete", "doomed", "-b", bootstrap)
    if done.returncode == 0:
        assert_one_line_error(run_cli("group", "describe", "doomed", "-b", bootstrap), "unknown group")
    else:  # Roost does not implement DeleteGroups (yet): a clean error, not librdkafka's abort
        assert_one_line_error(done, "does not support")
        assert done.returncode == 1


@pytest.mark.parametrize(("args", "fragment"), [
    (("group", "describe", "no-such-group"), "unknown group: no-such-group"),
    (("group", "delete", "no-such-group"), "unknown group: no-such-group"),
    (("group", "seek", "no-such-group", "--to", "start", "--topics", "no-such-topic"), "unknown topic: no-such-topic"),
])
def test_unknown_groups_and_topics_are_one_line_errors(capsys: pytest.CaptureFixture[str], bootstrap: str,
                                                       base_ms: int, args: tuple[str, ...], fragment: str) -> None:
    assert_one_line_error(run_in_process(capsys, *args, "-b", bootstrap), fragment)


@pytest.mark.parametrize("to", ["bogus", "@yesterday", "+", "1.5"])
def test_bad_seek_targets_are_usage_errors(capsys: pytest.CaptureFixture[str], to: str) -> None:
    done = run_in_process(capsys, "group", "seek", "g", f"--to={to}", "-b", dead_address())
    assert done.returncode == 2 and "--to" in done.stderr


def test_an_unreachable_cluster_is_a_one_line_error_within_the_timeout() -> None:
    assert_one_line_error(run_cli("group", "list", "-b", dead_address(), "--timeout", "1", timeout=30),
                          "cannot reach the cluster")


@pytest.mark.parametrize(("text", "expected"), [
    ("1732438800", 1732438800_000),  # seconds
    ("1732438800123", 1732438800123),  # milliseconds
    ("1732438800123456789", 1732438800123),  # nanoseconds
    ("2024-11-24T09:00:00", 1732438800_000),  # ISO 8601, UTC when no zone is named
    ("2024-11-24T10:00:00+01:00", 1732438800_000),
    ("-2h", 1732438800_000 - 7_200_000),
    ("-90s", 1732438800_000 - 90_000),
    # The rest is the consume offset grammar's time, shared: compound durations, `now`, a date.
    ("-1h30m", 1732438800_000 - 5_400_000),
    ("now", 1732438800_000),
    ("2024-11-24", 1732406400_000),
])
def test_seek_times(text: str, expected: int) -> None:
    assert parse_time_ms(text, now_ms=1732438800_000) == expected
