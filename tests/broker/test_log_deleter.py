"""Deleted partitions' files go on the log deleter's thread, not on the event loop: a DeleteTopics
of a thousand partitions held a broker's loop 0.5-0.9 s when each log was removed inline (rmtree
and a directory fsync per partition). The log is renamed out of the live names at once, so the
topic's name can be used again straight away, and a renamed log left by a stop is removed at the
next start, never served."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from roost.config import BrokerConfig
from roost.storage import log_deleter
from roost.storage.directories import DELETED_NAME, LogDirs, deleted_name, partition_name
from roost.storage.log_manager import LogManager
from tests.broker.conftest import StartBroker
from tests.log.conftest import batch
from tests.support.procs import wait_for

PARTITIONS = 12


def test_deleted_logs_are_renamed_at_once_and_removed_on_the_deleter_thread(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    removed_on: list[str] = []
    real_rmtree = shutil.rmtree

    def recording_rmtree(path: Path, ignore_errors: bool = False) -> None:
        removed_on.append(threading.current_thread().name)
        real_rmtree(path, ignore_errors=ignore_errors)

    monkeypatch.setattr(log_deleter.shutil, "rmtree", recording_rmtree)
    config = BrokerConfig.build([("test", {"broker.id": 0})])
    logs = LogManager(config, tmp_path)
    try:
        opened = [logs.open_log("gone", index, config.topic_defaults()) for index in range(PARTITIONS)]
        for partition_log in opened:
            partition_log.append(bytearray(batch([b"v" * 100, b"w" * 100])))
        logs_dir = opened[0].directory.parent
        for index, partition_log in enumerate(opened):
            logs.delete_log("gone", index, partition_log)
            # The live name is free the moment the call returns.
            assert not (logs_dir / partition_name("gone", index)).exists()
            assert logs.dirs.dir_of("gone", index) is None
        assert logs.deleter.wait_idle(30)
        assert sorted(entry.name for entry in logs_dir.iterdir()) == []
        assert logs.deleter.removed == PARTITIONS
        assert removed_on and set(removed_on) == {"roost-log-deleter"}
    finally:
        logs.close()


def test_a_renamed_log_left_by_a_stop_is_removed_at_start_and_never_served(tmp_path: Path) -> None:
    logs_dir = tmp_path / "logs"
    left = logs_dir / deleted_name("old", 0)
    left.mkdir(parents=True)
    (left / "00000000000000000000.log").write_bytes(b"x" * 1000)
    kept = logs_dir / partition_name("kept", 3)
    kept.mkdir()
    assert DELETED_NAME.match(left.name)

    dirs = LogDirs([tmp_path], broker_id=0)

    assert not left.exists()
    assert dirs.dir_of("old", 0) is None
    assert dirs.dir_of("kept", 3) is not None  # a live log beside it is untouched
    assert kept.is_dir()


def test_a_deleted_topic_with_records_leaves_no_files_and_its_name_starts_empty(
        start_broker: StartBroker, tmp_path: Path) -> None:
    proc = start_broker()
    bootstrap = proc.address("kafka")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic("doomed", 4, 1)]).values():
        future.result(30)
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in range(200):
        producer.produce("doomed", b"record %d" % n, partition=n % 4)
    assert producer.flush(30) == 0
    data = next(path for path in tmp_path.rglob("doomed-0") if path.is_dir()).parent

    admin.delete_topics(["doomed"])["doomed"].result(30)
    for future in admin.create_topics([NewTopic("doomed", 2, 1)]).values():
        future.result(30)

    def names() -> list[str]:
        return sorted(entry.name for entry in data.iterdir() if entry.name.startswith("doomed"))
    wait_for(lambda: names() == ["doomed-0", "doomed-1"], 30, "the deleted logs removed from the data directory")
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "deleted-check"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition("doomed", 0), timeout=30) == (0, 0)
    finally:
        consumer.close()
