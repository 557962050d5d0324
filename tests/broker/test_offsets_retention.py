"""`offsets.retention.minutes`: the committed offsets of an empty group vanish once they are older
than the retention, and younger ones stay. The broker is a real `roost up` whose wall clock the
test moves forward (tests.support.shifted_clock), so minutes pass in no time; it checks for
expired offsets every 100 ms (`offsets.retention.check.interval.ms`)."""

from __future__ import annotations

import sys
from pathlib import Path

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.broker.conftest import FAST_GROUPS
from tests.support.procs import RoostProcess, start_roost, wait_for
from tests.support.shifted_clock import applied, write_shift

TOPIC = "retained"
SHIFTED_ROOST = [sys.executable, "-m", "tests.support.shifted_clock"]


def commit(bootstrap: str, group: str, offset: int) -> None:
    """Commit `offset` for partition 0 as a consumer outside any generation would (the group
    stays empty, which is when offsets can expire)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def committed(bootstrap: str, group: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        return consumer.committed([TopicPartition(TOPIC, 0)], timeout=30)[0].offset
    finally:
        consumer.close()


def move_clock(clock: Path, seconds: float) -> None:
    write_shift(clock, seconds)
    wait_for(lambda: applied(clock, seconds), timeout=30, what=f"the broker's clock to move {seconds} s on")


def test_committed_offsets_of_an_empty_group_expire_after_the_retention(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    write_shift(clock, 0)
    broker: RoostProcess = start_roost(
        ["up", "--data-dir", str(tmp_path / "data"), "--kafka-port", "0", *FAST_GROUPS,
         "--offsets.retention.minutes", "1", "--offsets.retention.check.interval.ms", "100"],
        expect=("kafka", "keeper"), command=[*SHIFTED_ROOST, str(clock)])
    try:
        bootstrap = broker.address("kafka")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
        move_clock(clock, 0)
        commit(bootstrap, "old-group", 7)
        move_clock(clock, 40)  # 40 s later: within the minute of retention
        assert committed(bootstrap, "old-group") == 7
        commit(bootstrap, "young-group", 9)
        move_clock(clock, 65)  # the old commit is now 65 s old, the young one 25 s
        wait_for(lambda: committed(bootstrap, "old-group") < 0, timeout=60,
                 what="the old group's offsets to expire")
        # The check that removed the old group's offsets ran after the young group's commit, and
        # kept it: younger than the retention.
        assert committed(bootstrap, "young-group") == 9
        assert "expired 1 committed offsets of group old-group" in broker.text()
        assert "of group young-group" not in broker.text()
    finally:
        broker.stop()
