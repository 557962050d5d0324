"""A failing fsync on a real `roost up` process: after it, nothing more is acknowledged from that
log directory, and after a power cut nothing acknowledged is lost.

The fault comes from the LD_PRELOAD shim in tests/support/faultfs.c: fsync of files under the
broker's second log directory returns EIO from the moment the test says so. Linux, after a failed
writeback, marks the pages clean and may drop them (PostgreSQL's "fsyncgate"): a later fsync
succeeds and proves nothing. So the test models the worst case: after the kill -9 it cuts every
segment whose fsync failed back to what its last successful fsync covered. A broker that went on
acknowledging after the failure (the `broker-failed-fsync-ignored` mutation in
scripts/break_claims.py) loses those acknowledged records there; Roost takes the directory
offline at the first failed fsync (Kafka's rule for a failed log directory), answers
KAFKA_STORAGE_ERROR for its partitions, and keeps serving the other directory.
"""

from __future__ import annotations

from pathlib import Path

from kafka import KafkaProducer
from kafka.errors import KafkaStorageError, KafkaTimeoutError

from tests.broker.test_log_dirs import (
    KAFKA_STORAGE_ERROR,
    assert_offline,
    create_topic,
    describe,
    placement,
    read_all,
)
from tests.support.faultfs import FaultFs
from tests.support.procs import RoostProcess, start_roost


def start(tmp_path: Path, fs: FaultFs) -> RoostProcess:
    first, second = tmp_path / "data", fs.prefix
    return start_roost(["up", "--data-dir", str(first), "--kafka-port", "0", "--set", f"log.dirs={first},{second}"],
                       expect=("kafka", "keeper"), env=fs.env())


def refusals(bootstrap: str, index: int, acked: list[bytes], attempts: int = 20) -> int:
    """Send to `index` after the fault, one record at a time; returns how many were acknowledged
    (each appended to `acked`). The first answers are KAFKA_STORAGE_ERROR; once the partition is
    offline it has no leader, and a send times out instead: either way, not acknowledged."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, acks="all", request_timeout_ms=2000,
                             delivery_timeout_ms=3000, max_block_ms=5000)
    count = 0
    try:
        for n in range(attempts):
            value = f"after-{n}".encode()
            try:
                producer.send("synced", value, partition=index).get(timeout=10)
            except KafkaStorageError:
                continue
            except KafkaTimeoutError:
                break  # no leader any more (the controller took the partition offline)
            acked.append(value)
            count += 1
    finally:
        producer.close(10)  # a batch waiting for a leader expires after delivery_timeout_ms
    return count


def test_after_a_failed_fsync_nothing_more_is_acknowledged_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    fs = FaultFs.build(tmp_path / "faultfs", prefix=tmp_path / "second-disk")
    proc = start(tmp_path, fs)
    try:
        bootstrap = proc.address("kafka")
        # flush.messages=1: every acknowledgement waits for an fsync of the segment.
        create_topic(bootstrap, "synced", 2, **{"flush.messages": "1"})
        where = placement(describe(bootstrap), "synced")
        healthy = next(i for i, (d, _) in where.items() if d != str(fs.prefix))
        failing = next(i for i, (d, _) in where.items() if d == str(fs.prefix))
        acked: dict[int, list[bytes]] = {healthy: [], failing: []}
        producer = KafkaProducer(bootstrap_servers=bootstrap, retries=0, acks="all")
        try:
            for n in range(20):
                for index in (healthy, failing):
                    value = f"before-{n}".encode()
                    producer.send("synced", value, partition=index).get(timeout=30)
                    acked[index].append(value)
            fs.fail_fsync()
            acked_after = refusals(bootstrap, failing, acked[failing])
            for n in range(20):  # the other directory keeps serving
                value = f"healthy-{n}".encode()
                producer.send("synced", value, partition=healthy).get(timeout=30)
                acked[healthy].append(value)
        finally:
            producer.close(10)
        assert fs.failed_files(), "the shim never failed an fsync: the fault was not injected"
        assert_offline(bootstrap, "synced", failing)
        assert describe(bootstrap)[str(fs.prefix)]["error_code"] == KAFKA_STORAGE_ERROR
    finally:
        proc.kill9()
    # The power cut: what the failed fsyncs did not make durable is gone.
    cut = fs.drop_unsynced(suffixes=(".log",))
    fs.heal()
    proc = start(tmp_path, fs)
    try:
        stored = read_all(proc.address("kafka"), "synced", (healthy, failing))
    finally:
        proc.stop()
    for index, values in acked.items():
        kept = [value for (p, _o), value in sorted(stored.items()) if p == index]
        lost = [value for value in values if value not in kept]
        assert not lost, (f"partition {index}: {len(lost)} acknowledged records lost after the failed fsync "
                          f"(first {lost[:3]}; segments cut {cut})")
    assert acked_after == 0, f"{acked_after} records acknowledged after the failed fsync"
