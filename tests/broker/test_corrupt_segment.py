"""A bit flipped at rest in a segment of a real `roost up` process, found at read time: a consumer
(confluent-kafka, its own CRC check off, so that only the broker stands between it and the damage)
gets every record before the damaged batch, never the damaged one; the broker logs the file,
position and offset, and stops that partition alone (its only replica: nothing is cut; it answers
KAFKA_STORAGE_ERROR, without a leader) while its directory and the other keep serving.
`roost check-logs` then reports the same damage offline. (With other in-sync replicas the damaged
one repairs instead: tests/cluster/test_replica_repair.py.)
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from tests.broker.test_log_dirs import assert_offline, create_topic, describe, placement
from tests.support.procs import ROOST, RoostProcess, start_roost, wait_for

RECORDS = 50


def start(first: Path, second: Path) -> RoostProcess:
    return start_roost(["up", "--data-dir", str(first), "--kafka-port", "0", "--set", f"log.dirs={first},{second}"],
                       expect=("kafka", "keeper"))


def consume(bootstrap: str, topic: str, index: int, want: int, linger_s: float = 0.0) -> list[bytes]:
    """Read from offset 0 until `want` records came, then `linger_s` longer (any more is a fault)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "corrupt", "enable.auto.commit": False,
                         "check.crcs": False, "fetch.error.backoff.ms": 50})
    got: list[bytes] = []
    try:
        consumer.assign([TopicPartition(topic, index, 0)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(got) < want:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
        until = time.monotonic() + linger_s
        while time.monotonic() < until:
            message = consumer.poll(0.1)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def test_a_flipped_bit_in_a_segment_is_never_served_and_stops_its_partition(tmp_path: Path) -> None:
    first, second = tmp_path / "data", tmp_path / "second-disk"
    proc = start(first, second)
    try:
        bootstrap = proc.address("kafka")
        create_topic(bootstrap, "rotting", 2)
        where = placement(describe(bootstrap), "rotting")
        healthy = next(i for i, (d, _) in where.items() if d == str(first))
        damaged = next(i for i, (d, _) in where.items() if d == str(second))
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
        values = [f"{n:04d}".encode().ljust(200, b"-") for n in range(RECORDS)]
        for value in values:
            for index in (healthy, damaged):
                producer.produce("rotting", value, partition=index)
            producer.flush(30)  # one batch per record
        assert producer.flush(30) == 0
    finally:
        proc.stop()
    segment = second / "logs" / f"rotting-{damaged}" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    at = data.index(values[RECORDS // 2])  # inside the record of batch 25
    data[at] ^= 0x01
    segment.write_bytes(bytes(data))

    proc = start(first, second)
    try:
        bootstrap = proc.address("kafka")
        got = consume(bootstrap, "rotting", damaged, RECORDS // 2, linger_s=1.0)
        assert got == values[:len(got)], "a record that differs from the one written was served"
        assert len(got) == RECORDS // 2, f"{len(got)} records served: the ones before the damaged batch are expected"
        text = wait_for(lambda: f"rotting-{damaged} stopped" in proc.text() and proc.text(),
                        what="the corruption logged")
        assert str(segment) in text and "position" in text and f"offset {RECORDS // 2}" in text
        assert_offline(bootstrap, "rotting", damaged)
        assert describe(bootstrap)[str(second)]["error_code"] == 0  # the directory serves on
        assert consume(bootstrap, "rotting", healthy, RECORDS) == values  # the other directory serves
    finally:
        proc.stop()
    report = subprocess.run([*ROOST, "check-logs", str(second / "logs")], capture_output=True, text=True, timeout=120)
    assert report.returncode == 1, report.stdout + report.stderr
    assert str(segment) in report.stdout and "CRC" in report.stdout
