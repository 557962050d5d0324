"""`roost topic ...` run as a process against a real `roost up`; every fact it reports or changes
is checked with an independent client (confluent-kafka's AdminClient and Consumer)."""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from tests.cli.kafka_cli import (
    assert_one_line_error,
    dead_address,
    run_cli,
    run_in_process,
    run_json,
)
from tests.support.procs import wait_for


@pytest.fixture(scope="module")
def admin(bootstrap: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap})


def partition_count(admin: AdminClient, topic: str) -> int:
    return len(admin.list_topics(timeout=10).topics[topic].partitions)


def produce(bootstrap: str, topic: str, per_partition: dict[int, int]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition, count in per_partition.items():
        for i in range(count):
            producer.produce(topic, f"{partition}-{i}".encode(), partition=partition)
    assert producer.flush(30) == 0


def watermarks(bootstrap: str, topic: str, partition: int) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "watermarks"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
    finally:
        consumer.close()


def test_create_with_partitions_and_configs_is_what_another_client_sees(bootstrap: str, admin: AdminClient) -> None:
    done = run_cli("topic", "create", "created", "-p", "3", "-c", "retention.ms=1000",
                   "-c", "cleanup.policy=delete", "-b", bootstrap)
    assert done.returncode == 0, done.stderr
    assert "created" in done.stdout
    assert partition_count(admin, "created") == 3
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "created")]).values()
    assert future.result(10)["retention.ms"].value == "1000"

    listed = run_json("topic", "list", "-b", bootstrap)
    assert {"name": "created", "partitions": 3, "replicas": 1} in listed


def create(admin: AdminClient, *names: str, partitions: int = 1) -> None:
    """Topics made by the independent client, for the commands that need one to exist."""
    for future in admin.create_topics([NewTopic(name, partitions, 1) for name in names]).values():
        future.result(10)


def test_create_again_fails_unless_if_not_exists(bootstrap: str, admin: AdminClient) -> None:
    create(admin, "twice")
    assert_one_line_error(run_cli("topic", "create", "twice", "-b", bootstrap), "twice", "already exists")
    again = run_json("topic", "create", "twice", "--if-not-exists", "-b", bootstrap)
    assert again == [{"topic": "twice", "status": "exists"}]


def test_list_filters_by_regex_and_hides_internal_topics(bootstrap: str, admin: AdminClient) -> None:
    done = run_cli("topic", "create", "alpha-1", "alpha-2", "beta-1", "-b", bootstrap)
    assert done.returncode == 0, done.stderr
    # A committed offset makes the broker create __consumer_offsets.
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "makes-offsets-topic"})
    consumer.commit(offsets=[TopicPartition("alpha-1", 0, 0)], asynchronous=False)
    consumer.close()
    wait_for(lambda: "__consumer_offsets" in admin.list_topics(timeout=10).topics, what="__consumer_offsets")

    names = [row["name"] for row in run_json("topic", "list", "-r", "^alpha", "-b", bootstrap)]
    assert names == ["alpha-1", "alpha-2"]
    plain = [row["name"] for row in run_json("topic", "list", "-b", bootstrap)]
    assert "__consumer_offsets" not in plain and "beta-1" in plain
    everything = [row["name"] for row in run_json("topic", "list", "--internal", "-b", bootstrap)]
    assert "__consumer_offsets" in everything


def test_describe_reports_offsets_and_trim_moves_the_log_start(bootstrap: str, admin: AdminClient) -> None:
    create(admin, "offsets", partitions=2)
    produce(bootstrap, "offsets", {0: 7, 1: 3})

    described = run_json("topic", "describe", "offsets", "-b", bootstrap)
    assert described["topic"] == "offsets"
    rows = {row["partition"]: row for row in described["partitions"]}
    assert {p: (r["log_start_offset"], r["log_end_offset"]) for p, r in rows.items()} == {0: (0, 7), 1: (0, 3)}
    # The leader's log size (DescribeLogDirs): 7 records take more bytes than 3.
    assert rows[0]["size"] > rows[1]["size"] > 0
    assert all(r["leader"] >= 0 and r["isr"] == r["replicas"] and r["health"] == "ok" for r in rows.values())
    assert {c["name"]: c["source"] for c in described["configs"]}["retention.ms"] == "default"

    trimmed = run_json("topic", "trim", "offsets", "-p", "0", "-o", "4", "-b", bootstrap)
    assert trimmed == [{"partition": 0, "log_start_offset": 4}]
    assert watermarks(bootstrap, "offsets", 0) == (4, 7)
    assert watermarks(bootstrap, "offsets", 1) == (0, 3)  # only the partition named
    after = {r["partition"]: r["log_start_offset"] for r in
             run_json("topic", "describe", "offsets", "-b", bootstrap)["partitions"]}
    assert after == {0: 4, 1: 0}

    text = run_cli("topic", "describe", "offsets", "-b", bootstrap)
    assert text.returncode == 0 and "LOG-END-OFFSET" in text.stdout and "SIZE" in text.stdout and "retention.ms" in text.stdout


def test_health_filters_on_a_healthy_single_broker_show_nothing(bootstrap: str, admin: AdminClient) -> None:
    create(admin, "healthy", partitions=2)
    flags = ("--under-replicated", "--under-min-isr", "--offline")  # together: any of the three
    assert run_json("topic", "list", *flags, "-b", bootstrap) == []
    assert run_json("topic", "describe", "healthy", *flags, "-b", bootstrap)["partitions"] == []
    assert len(run_json("topic", "describe", "healthy", "-b", bootstrap)["partitions"]) == 2


def test_add_partitions_adds_n(bootstrap: str, admin: AdminClient) -> None:
    create(admin, "growing", partitions=3)
    done = run_cli("topic", "add-partitions", "growing", "-n", "2", "-b", bootstrap)
    assert done.returncode == 0, done.stderr
    assert "3 -> 5" in done.stdout
    assert partition_count(admin, "growing") == 5


def test_delete_removes_the_topic(bootstrap: str, admin: AdminClient) -> None:
    create(admin, "doomed")
    assert run_json("topic", "delete", "doomed", "-b", bootstrap) == [{"topic": "doomed", "status": "deleted"}]
    wait_for(lambda: "doomed" not in admin.list_topics(timeout=10).topics, what="the topic to go")


def test_alter_config_changes_the_config_or_says_the_broker_cannot(bootstrap: str, admin: AdminClient) -> None:
    create(admin, "altered")
    done = run_cli("topic", "alter-config", "altered", "--set", "retention.ms=5000", "-b", bootstrap)
    if done.returncode == 0:
        (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, "altered")]).values()
        assert future.result(10)["retention.ms"].value == "5000"
    else:  # Roost does not implement IncrementalAlterConfigs (yet)
        assert_one_line_error(done, "does not support")


@pytest.mark.parametrize(("args", "fragment"), [
    (("topic", "describe", "no-such-topic"), "unknown topic: no-such-topic"),
    (("topic", "delete", "no-such-topic"), "unknown topic: no-such-topic"),
    (("topic", "add-partitions", "no-such-topic", "-n", "1"), "unknown topic"),
    (("topic", "trim", "no-such-topic", "-o", "1"), "unknown topic"),
])
def test_unknown_topics_are_one_line_errors(capsys: pytest.CaptureFixture[str], bootstrap: str,
                                            args: tuple[str, ...], fragment: str) -> None:
    assert_one_line_error(run_in_process(capsys, *args, "-b", bootstrap), fragment)


def test_trim_of_a_missing_partition_is_refused(capsys: pytest.CaptureFixture[str], bootstrap: str,
                                                admin: AdminClient) -> None:
    create(admin, "small")
    assert_one_line_error(run_in_process(capsys, "topic", "trim", "small", "-p", "3", "-o", "0", "-b", bootstrap),
                          "no partition 3")


@pytest.mark.parametrize("args", [
    ("topic", "create", "bad", "-c", "retention.ms"),
    ("topic", "create", "bad", "-p", "0"),
    ("topic", "trim", "bad", "-o", "soon"),
    ("topic", "add-partitions", "bad", "-n", "0"),
    ("topic", "alter-config", "bad"),
])
def test_bad_arguments_fail_without_a_traceback(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    done = run_in_process(capsys, *args, "-b", dead_address())
    assert done.returncode == 2 and "Traceback" not in done.stderr
    # One line naming the command, what was wrong, and where to look.
    assert done.stderr.count("\n") == 1 and done.stderr.startswith(f"roost topic {args[1]}: "), done.stderr
    assert done.stderr.rstrip().endswith("--help')"), done.stderr


def test_an_unreachable_cluster_is_a_one_line_error_within_the_timeout() -> None:
    done = run_cli("topic", "list", "-b", dead_address(), "--timeout", "1", timeout=30)
    assert_one_line_error(done, "cannot reach the cluster", "within 1s")


def test_an_unknown_client_setting_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    done = run_in_process(capsys, "topic", "list", "-X", "no.such.setting=1", "-b", dead_address())
    assert_one_line_error(done, "client settings", "no.such.setting")
