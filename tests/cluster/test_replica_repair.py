"""A bit flipped at rest in a replica's old segment (below its recovery point, so no start-up
check sees it), found when that replica leads and is read, in a real 3-broker cluster:

- replicated (RF 3, acks=all): the damaged batch is never served; the partition alone goes offline
  on that broker (its directory keeps serving), leadership moves to another in-sync replica, the
  damaged replica cuts its log before the damaged batch, refetches, and rejoins the ISR; its
  segment bytes are then the leader's, and every acknowledged record is there.
- RF 1 (the same damage, no other copy): refused, nothing cut; the broker's log and
  `roost check-logs` name the file, and the offset.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import NewTopic

from tests.support.cluster import LocalCluster
from tests.support.procs import ROOST, wait_for

MENDING, SOLE = "mending", "sole"
DAMAGED = 3  # the broker whose copies rot
RECORDS = 60
SEGMENT_BYTES = "3000"  # about ten one-record batches a segment: several old segments


def value(n: int) -> bytes:
    return f"{n:04d}".encode().ljust(200, b"-")


def produce(cluster: LocalCluster, topic: str, numbers: range) -> dict[int, bytes]:
    """acks=all, one batch per record; offset -> value of every acknowledged record."""
    acked: dict[int, bytes] = {}
    failed: list[Any] = []
    producer = Producer({"bootstrap.servers": cluster.running_bootstrap(), "acks": "all", "linger.ms": 0,
                         "enable.idempotence": True})

    def delivered(error: Any, message: Any) -> None:
        (failed.append(error) if error is not None else acked.__setitem__(message.offset(), message.value()))

    for n in numbers:
        producer.produce(topic, value(n), partition=0, on_delivery=delivered)
        producer.flush(30)
    assert producer.flush(30) == 0 and failed == [], failed
    return acked


def consume(cluster: LocalCluster, topic: str, want: int, timeout_s: float = 40.0) -> tuple[dict[int, bytes], list[str]]:
    """From offset 0 with the client's CRC check off (only the broker stands between it and the
    damage): offset -> value, and the errors seen, until `want` records came or time ran out."""
    consumer = Consumer({"bootstrap.servers": cluster.running_bootstrap(), "group.id": "repair",
                         "enable.auto.commit": False, "check.crcs": False, "fetch.error.backoff.ms": 50,
                         "topic.metadata.refresh.interval.ms": 500})
    got: dict[int, bytes] = {}
    errors: list[str] = []
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline and len(got) < want:
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error() is not None:
                errors.append(str(message.error()))
            else:
                got[message.offset()] = message.value()
    finally:
        consumer.close()
    return got, errors


def segments(cluster: LocalCluster, broker: int, topic: str) -> list[Path]:
    return sorted((cluster.root / f"broker-{broker}" / "logs" / f"{topic}-0").glob("*.log"))


def flip_in_old_segment(cluster: LocalCluster, topic: str, n: int) -> tuple[Path, int]:
    """Flip a bit inside record `n`'s value in the stopped broker's copy; (file, position)."""
    for segment in segments(cluster, DAMAGED, topic)[:-1]:  # never the active one
        data = bytearray(segment.read_bytes())
        at = data.find(value(n))
        if at >= 0:
            data[at + 10] ^= 0x04
            segment.write_bytes(bytes(data))
            return segment, at
    raise AssertionError(f"record {n} is in no old segment of broker {DAMAGED}")


@pytest.fixture(scope="module")
def damaged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, dict[str, Any]]]:
    cluster = LocalCluster.start(tmp_path_factory.mktemp("repair"), brokers=3,
                                 settings={"auto.leader.rebalance.enable": False})
    try:
        # Broker 1 leads; broker 3 gets every record as a follower's fetch.
        configs = {"segment.bytes": SEGMENT_BYTES, "min.insync.replicas": "2"}
        admin = cluster.admin()
        futures = admin.create_topics([NewTopic(MENDING, 1, replica_assignment=[[1, DAMAGED, 2]], config=configs)])
        for future in futures.values():
            future.result(30)
        cluster.wait_for_isr(MENDING)
        acked = produce(cluster, MENDING, range(RECORDS))
        cluster.wait_for_isr(MENDING)
        sole_configs = {"segment.bytes": SEGMENT_BYTES}
        for future in admin.create_topics([NewTopic(SOLE, 1, replica_assignment=[[DAMAGED]],
                                                    config=sole_configs)]).values():
            future.result(30)
        cluster.wait_for_isr(SOLE)
        sole_acked = produce(cluster, SOLE, range(RECORDS))
        # A clean stop: the recovery point covers everything, so the restart checks nothing.
        assert cluster.stop_broker(DAMAGED) == 0
        bad_segment, bad_position = flip_in_old_segment(cluster, MENDING, 25)
        sole_segment, _ = flip_in_old_segment(cluster, SOLE, 25)
        sole_bytes = {p.name: p.read_bytes() for p in segments(cluster, DAMAGED, SOLE)}
        cluster.start_broker(DAMAGED)
        cluster.wait_for_isr(MENDING)  # it rejoins: nothing has read the damaged batch yet
        yield cluster, {"acked": acked, "segment": bad_segment, "position": bad_position,
                        "sole_acked": sole_acked, "sole_segment": sole_segment, "sole_bytes": sole_bytes}
    finally:
        cluster.close()


def test_a_damaged_replica_is_never_served_cuts_its_log_and_refetches_from_the_new_leader(
        damaged: tuple[LocalCluster, dict[str, Any]]) -> None:
    cluster, found = damaged
    acked: dict[int, bytes] = found["acked"]
    # Its leader stops: the damaged replica, next in the ISR, leads, and a consumer reads it.
    assert cluster.stop_broker(1) == 0
    wait_for(lambda: cluster.partitions(MENDING)[0][0] == DAMAGED, 30, interval=0.2, what=f"{DAMAGED} leading")
    got, _errors = consume(cluster, MENDING, RECORDS)
    assert all(got[offset] == acked[offset] for offset in got), "a record that differs from the one written was served"
    assert set(got) == set(acked), f"{len(got)} of {len(acked)} acknowledged records read"
    output = cluster.wait_for_output(DAMAGED, f"{MENDING}-0 repaired: cut at offset", str(found["segment"]))
    assert "failed and is now offline" not in output  # the partition alone went offline, not its directory
    # Another in-sync replica leads, and the damaged one is back in the ISR only once it has
    # refetched (it is a follower that reached the leader's high watermark).
    wait_for(lambda: (p := cluster.partitions(MENDING)[0])[0] == 2 and set(p[2]) == {2, DAMAGED}, 30,
             interval=0.2, what="the repaired replica back in the ISR")
    cluster.start_broker(1)
    more = produce(cluster, MENDING, range(RECORDS, RECORDS + 20))
    cluster.wait_for_isr(MENDING)
    leader = cluster.partitions(MENDING)[0][0]

    def same_bytes() -> bool:
        mine = b"".join(p.read_bytes() for p in segments(cluster, DAMAGED, MENDING))
        theirs = b"".join(p.read_bytes() for p in segments(cluster, leader, MENDING))
        return mine == theirs
    wait_for(same_bytes, 30, interval=0.2, what="the repaired replica's batches byte-identical to the leader's")
    # Every acknowledged record is there (and, by the bytes above, on the repaired replica too).
    everything = {**acked, **more}
    got, _errors = consume(cluster, MENDING, len(everything))
    assert got == everything


def test_a_damaged_sole_replica_is_refused_naming_file_and_offset_and_nothing_is_cut(
        damaged: tuple[LocalCluster, dict[str, Any]]) -> None:
    cluster, found = damaged
    acked: dict[int, bytes] = found["sole_acked"]
    got, _errors = consume(cluster, SOLE, RECORDS, timeout_s=4.0)
    assert all(got[offset] == acked[offset] for offset in got), "a record that differs from the one written was served"
    assert len(got) < len(acked), "the damaged batch (or what follows it) was served"
    output = cluster.wait_for_output(DAMAGED, f"{SOLE}-0 stopped: damaged record batch in {found['sole_segment']}",
                                     "nothing is cut")
    line = next(line for line in output.splitlines() if f"{SOLE}-0 stopped" in line)
    assert f"offset {max(got) + 1 if got else 0}" in line, line  # the first offset not served
    # Not a byte was cut: the files are as they were (the flipped bit included).
    assert {p.name: p.read_bytes() for p in segments(cluster, DAMAGED, SOLE)} == found["sole_bytes"]
    assert cluster.partitions(SOLE)[0][0] == -1  # no leader: it answers nothing rather than less
    report = subprocess.run([*ROOST, "check-logs", str(found["sole_segment"].parent)], capture_output=True,
                            text=True, timeout=120)
    assert report.returncode == 1, report.stdout + report.stderr
    assert str(found["sole_segment"]) in report.stdout
